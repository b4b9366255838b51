"""The reference's artifact command lines (`rocm_kpack.tools.split_artifacts`,
`verify_artifacts`, `recombine_artifacts`), as its split/recombine walkthrough types them,
run unchanged on the hipcc-built shards in fixtures/shards; what they write passes
`kpack verify --original`, and they exit as the reference does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
from conftest import FIXTURES, PACKAGING_CONFIG, fixture, run_kpack, run_tool

SHARDS = ("shard-a", "shard-b", "shard-c")
# What the walkthrough passes for the reference's external tools; kpack ignores it.
BUNDLER = "/opt/rocm/llvm/bin/clang-offload-bundler"


def walkthrough_script(tool: str, *args) -> subprocess.CompletedProcess:
    """`python python/rocm_kpack/tools/<tool>.py ARGS...` from the repository root, the form
    the walkthrough types (the script imports the installed package)."""
    return subprocess.run(
        [sys.executable, f"python/rocm_kpack/tools/{tool}.py", *map(str, args)],
        capture_output=True, text=True, cwd=FIXTURES.parent, env=dict(os.environ, CI="1"),
    )


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory) -> Dict:
    """Steps 4 to 6 of the walkthrough: batch split of each shard, verify, recombine."""
    root = tmp_path_factory.mktemp("walkthrough")
    tmp = root / "tmp"
    tmp.mkdir()
    runs = {}
    for shard in SHARDS:
        runs[f"split {shard}"] = walkthrough_script(
            "split_artifacts",
            "--batch-artifact-parent-dir", fixture(f"shards/{shard}"),
            "--output-dir", root / "split-artifacts" / shard,
            "--split-databases", "rocblas", "hipblaslt",
            "--tmp-dir", tmp,
            "--clang-offload-bundler", BUNDLER,
            "--verbose",
        )
        runs[f"verify {shard}"] = walkthrough_script(
            "verify_artifacts",
            "--artifacts-dir", root / "split-artifacts" / shard,
            "--clang-offload-bundler", BUNDLER,
            "--verbose",
        )
    config = root / "packaging-config.json"
    config.write_text(json.dumps(PACKAGING_CONFIG, indent=2))
    runs["recombine"] = walkthrough_script(
        "recombine_artifacts",
        "--input-shards-dir", root / "split-artifacts",
        "--config", config,
        "--output-dir", root / "recombined-artifacts",
        "--verbose",
    )
    return {"root": root, "config": config, "runs": runs}


def test_walkthrough_split_verify_recombine_run_unchanged_and_lose_nothing(walkthrough):
    root, runs = walkthrough["root"], walkthrough["runs"]
    for step, run in runs.items():
        assert run.returncode == 0, f"{step}: {run.stdout}{run.stderr}"
    split_a = runs["split shard-a"].stdout
    assert "Ignoring --clang-offload-bundler: kpack runs no external tools" in split_a
    assert "[2] demo_lib_gfx90X (artifact_prefix: demo_lib)" in split_a
    assert "✓ BATCH SPLITTING COMPLETED SUCCESSFULLY" in split_a
    for shard in SHARDS:
        assert "✓ ALL CHECKS PASSED" in runs[f"verify {shard}"].stdout
    assert "✓ RECOMBINATION COMPLETED SUCCESSFULLY" in runs["recombine"].stdout

    split = root / "split-artifacts"
    assert sorted(p.name for p in (split / "shard-b").iterdir()) == [
        "demo_host_generic", "demo_lib_generic", "demo_lib_gfx908", "demo_lib_gfx90a"]
    recombined = root / "recombined-artifacts"
    assert sorted(p.name for p in recombined.iterdir()) == [
        "demo_host_generic", "demo_lib_generic", "demo_lib_gfx10", "demo_lib_gfx9"]
    # Strict identity: every original code object and file comes back byte for byte.
    for shard in SHARDS:
        check = run_kpack("verify", split / shard, "--original", fixture(f"shards/{shard}"))
        assert check.returncode == 0, check.stdout + check.stderr
    check = run_kpack("verify", recombined, "--original", fixture("shards"))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "18 code objects identical: ok" in check.stdout


def test_single_artifact_split_takes_both_generations_of_flags(tmp_path):
    artifact = fixture("shards/shard-a/demo_lib_gfx90X")
    new = walkthrough_script(
        "split_artifacts", "--artifact-dir", artifact, "--output-dir", tmp_path / "new",
        "--artifact-prefix", "demo_lib", "--tmp-dir", tmp_path,
        "--split-databases", "rocblas", "hipblaslt", "--clang-offload-bundler", BUNDLER,
    )
    old = walkthrough_script(
        "split_artifacts", "--input-dir", artifact, "--output-dir", tmp_path / "old",
        "--component-name", "demo_lib", "--tmp-dir", tmp_path,
        "--split-databases", "rocblas", "hipblaslt", "--clang-offload-bundler", BUNDLER,
    )
    for run in (new, old):
        assert run.returncode == 0, run.stderr
        # The older walkthrough's loop greps for this line to count successes.
        assert "Splitting complete" in run.stdout
        assert "Ignoring" not in run.stdout  # only under --verbose
    files = sorted(p.relative_to(tmp_path / "new") for p in (tmp_path / "new").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "old") for p in (tmp_path / "old").rglob("*"))
    for rel in files:
        if (tmp_path / "new" / rel).is_file():
            assert (tmp_path / "new" / rel).read_bytes() == (tmp_path / "old" / rel).read_bytes()
    assert (tmp_path / "new/demo_lib_gfx906/demo/stage/lib/rocblas/library/"
            "TensileLibrary_Type_S_gfx906.dat").is_file()
    check = run_kpack("verify", tmp_path / "new", "--original", artifact)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("args, status, says", [
    ([], 2, "one of the arguments --artifact-dir/--input-dir --batch-artifact-parent-dir"),
    (["--artifact-dir", "A", "--batch-artifact-parent-dir", "B"], 2, "not allowed with"),
    (["--batch-artifact-parent-dir", "B", "--split-databases", "tensorflow"], 2, "invalid choice"),
    (["--artifact-dir", "shards/shard-a/demo_lib_gfx90X"], 1,
     "Error: --artifact-prefix is required with --artifact-dir"),
    (["--batch-artifact-parent-dir", "shards/shard-a", "--artifact-prefix", "demo_lib"], 1,
     "Error: --artifact-prefix cannot be used with --batch-artifact-parent-dir"),
    (["--artifact-dir", "shards/nowhere", "--artifact-prefix", "x"], 1, "nowhere"),
])
def test_split_artifacts_exit_statuses_are_the_references(tmp_path, args, status, says):
    run = run_tool("split_artifacts", "--output-dir", tmp_path / "out", *args, cwd=FIXTURES)
    assert run.returncode == status, run.stderr
    assert says in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_recombine_exit_statuses_are_the_references(walkthrough, tmp_path):
    shards = walkthrough["root"] / "split-artifacts"

    def recombine(config, *more):
        return run_tool("recombine_artifacts", "--input-shards-dir", shards, "--config", config,
                        "--output-dir", tmp_path / "out", *more)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"primary_shard": "shard-a", "architecture_groups": {}}))
    run = recombine(bad)
    assert run.returncode == 2
    assert "Error: Failed to load configuration:" in run.stderr and "architecture_groups" in run.stderr
    run = recombine(tmp_path / "missing.json")
    assert run.returncode == 2 and "missing.json" in run.stderr
    run = run_tool("recombine_artifacts", "--input-shards-dir", tmp_path / "none", "--config",
                   walkthrough["config"], "--output-dir", tmp_path / "out")
    assert run.returncode == 2
    assert recombine(walkthrough["config"], "--no-such-flag").returncode == 2

    # Failures of the recombination itself: 1. kpack enforces the validation flags.
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({
        "primary_shard": "shard-a",
        "architecture_groups": {"mi300": {"architectures": ["gfx942"]}},
        "validation": {"error_on_missing_architecture": True},
    }))
    run = recombine(strict)
    assert run.returncode == 1 and "no shard provides gfx942" in run.stderr
    run = recombine(walkthrough["config"], "--component", "blas_lib")
    assert run.returncode == 1 and 'no artifact of component blas_lib in' in run.stderr
    assert not (tmp_path / "out").exists()


def copy_of_split(walkthrough, tmp_path: Path, shard: str) -> Path:
    copy = tmp_path / shard
    shutil.copytree(walkthrough["root"] / "split-artifacts" / shard, copy, symlinks=True)
    return copy


def test_verify_artifacts_reports_a_damaged_archive_and_exits_1(walkthrough, tmp_path):
    split = copy_of_split(walkthrough, tmp_path, "shard-a")
    archive = split / "demo_lib_gfx906/demo/stage/.kpack/lib_libdemo.so.1_gfx906.kpack"
    data = bytearray(archive.read_bytes())
    data[200] ^= 0x01  # inside the first code object's stored bytes
    archive.write_bytes(bytes(data))
    run = run_tool("verify_artifacts", "--artifacts-dir", split)
    assert run.returncode == 1
    assert "✗ Kpack Archives: Some kpack archives are invalid" in run.stdout
    assert "✗ demo_lib_gfx906: demo/stage/.kpack/lib_libdemo.so.1_gfx906.kpack invalid" in run.stdout
    assert "✓ Architecture Separation" in run.stdout
    assert "✗ kpack verify" in run.stdout
    assert "✗ VERIFICATION FAILED" in run.stdout


def test_verify_artifacts_finds_device_code_left_in_a_generic_artifact(walkthrough, tmp_path):
    split = copy_of_split(walkthrough, tmp_path, "shard-a")
    rel = "demo/stage/lib/libdemo.so.1"
    shutil.copyfile(fixture(f"shards/shard-a/demo_lib_gfx90X/{rel}"),
                    split / "demo_lib_generic" / rel)
    run = run_tool("verify_artifacts", "--artifacts-dir", split)
    assert run.returncode == 1
    assert f"✗ {rel} (0.0M) - still holds device code" in run.stdout
    assert "✗ Fat Binary Conversion: Some binaries still hold device code" in run.stdout


def test_verify_artifacts_compares_architectures_whole(walkthrough, tmp_path):
    # The reference reads gfx90a as gfx90 (and so would pass a gfx900 archive in a gfx90a
    # artifact, or fail a group artifact); kpack compares the whole processor name.
    split = copy_of_split(walkthrough, tmp_path, "shard-b")
    run = run_tool("verify_artifacts", "--artifacts-dir", split)
    assert run.returncode == 0, run.stdout
    assert "✓ demo_lib_gfx90a: all archives hold gfx90a (checked 4 archives)" in run.stdout
    stray = "demo/stage/.kpack/bin_demo_gfx900.kpack"
    shutil.copyfile(walkthrough["root"] / "split-artifacts/shard-a/demo_lib_gfx900" / stray,
                    split / "demo_lib_gfx90a" / stray)
    run = run_tool("verify_artifacts", "--artifacts-dir", split)
    assert run.returncode == 1
    assert "- demo/stage/.kpack/bin_demo_gfx900.kpack holds gfx900" in run.stdout
    assert "✗ Architecture Separation: Architecture cross-contamination detected" in run.stdout


def test_verify_artifacts_of_a_missing_directory_exits_2(tmp_path):
    run = run_tool("verify_artifacts", "--artifacts-dir", tmp_path / "none")
    assert run.returncode == 2 and "none" in run.stderr
