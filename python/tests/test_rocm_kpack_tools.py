"""The reference's smaller tools (`kpack_tool`, `pack_tree`, `kpack_binary`, `verify_elf`,
`bulk_unbundle`) on the repository's fixtures, and a console script for every tool."""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import kpack
import pytest
import rocm_kpack.tools
from conftest import code_objects, fixture, run_kpack, run_tool

ARCHIVE = "vectors/test_zstd.kpack"
TOOLS = sorted(m.name for m in pkgutil.iter_modules(rocm_kpack.tools.__path__)
               if not m.name.startswith("_"))


def test_rocm_kpack_is_the_installed_package_with_every_tool():
    assert "site-packages" in Path(rocm_kpack.tools.__file__).parts, rocm_kpack.tools.__file__
    assert TOOLS == ["bulk_unbundle", "kpack_binary", "kpack_tool", "pack_tree",
                     "recombine_artifacts", "split_artifacts", "split_python_wheels",
                     "verify_artifacts", "verify_elf"]


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_has_a_console_script(tool):
    script = Path(sys.executable).parent / f"rocm-kpack-{tool.replace('_', '-')}"
    assert script.exists(), script
    out = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("usage:"), out.stderr


def test_kpack_tool_lists_an_archive_as_the_reference_does():
    listing = run_tool("kpack_tool", "list", fixture(ARCHIVE))
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[:4] == ["Kpack: test_zstd.kpack", "  Group:       test",
                         "  Arch family: gfx110X", "  Binaries:    2"]
    rows = [line.split() for line in lines[7:]]
    assert rows == [["bin/hiptest#0", "gfx1100", "1.0", "KB"],
                    ["lib/libhip.so#0", "gfx1100", "1.0", "KB"], ["gfx1101", "0.6", "KB"]]
    # The console script is the same tool.
    script = Path(sys.executable).parent / "rocm-kpack-kpack-tool"
    summary = subprocess.run([script, "list", "-s", fixture(ARCHIVE)], capture_output=True,
                             text=True)
    assert summary.returncode == 0
    assert "Total kernels: 3\nTotal size:    2,656 bytes (0.00 MB)" in summary.stdout


def test_kpack_tool_extracts_one_code_object_or_names_what_the_archive_holds(tmp_path):
    out = tmp_path / "deep" / "a.co"
    run = run_tool("kpack_tool", "extract", fixture(ARCHIVE), "./lib/libhip.so#0", "gfx1100",
                   "-o", out)
    assert run.returncode == 0, run.stderr
    with kpack.Archive(fixture(ARCHIVE)) as archive:
        assert out.read_bytes() == archive.get("lib/libhip.so#0", "gfx1100")
    miss = run_tool("kpack_tool", "extract", fixture(ARCHIVE), "lib/libhip.so#0", "gfx942",
                    "-o", tmp_path / "b.co")
    assert miss.returncode == 1
    assert "Available architectures: gfx1100, gfx1101" in miss.stderr
    assert not (tmp_path / "b.co").exists()
    assert run_tool("kpack_tool", "list", tmp_path / "none.kpack").returncode == 1
    assert run_tool("kpack_tool", "list").returncode == 2
    no_command = run_tool("kpack_tool")
    assert no_command.returncode == 1 and no_command.stdout.startswith("usage:")


def test_pack_tree_packs_one_archive_the_rewritten_binaries_load_from(tmp_path):
    tree = fixture("shards/shard-a/demo_lib_gfx90X/demo/stage")
    out = tmp_path / "packed"
    run = run_tool("pack_tree", "--input", tree, "--output", out, "--group-name", "demo",
                   "--gfx-arch-family", "gfx90X", "--gfx-arches", "gfx900,gfx906",
                   "--compression", "zstd", "--max-workers", "2")
    assert run.returncode == 0, run.stderr
    with kpack.Archive(out / ".kpack/demo-gfx90X.kpack") as archive:
        assert (archive.group_name, archive.gfx_arch_family) == ("demo", "gfx90X")
        assert archive.architectures == ["gfx900", "gfx906"]
        assert sorted(archive.binaries) == ["bin_demo#0", "lib_libdemo.so.1#0", "lib_libdemo.so.1#1"]
    assert os.readlink(out / "lib/libdemo.so") == os.readlink(tree / "lib/libdemo.so")
    for rel in ("lib/libdemo_host.so", "share/demo/readme.txt",
                "lib/rocblas/library/TensileLibrary_Type_S_gfx900.dat"):
        assert (out / rel).read_bytes() == (tree / rel).read_bytes(), rel
    for rel in ("bin/demo", "lib/libdemo.so.1"):
        resolved = run_kpack("inspect", "--resolve", "--target", "gfx906", out / rel)
        assert f"found in {out}/.kpack/demo-gfx90X.kpack" in resolved.stdout, resolved.stdout
        restored = tmp_path / "restored" / Path(rel).name
        restored.parent.mkdir(exist_ok=True)
        kpack.restore(out / rel, restored)
        objects = code_objects(tree / rel, tmp_path / "original")
        assert objects and code_objects(restored, tmp_path) == objects, rel


def test_kpack_binary_writes_a_host_binary_and_the_archives_it_loads(tmp_path):
    out = tmp_path / "lib" / "libtwo.so"
    out.parent.mkdir()
    run = run_tool("kpack_binary", fixture("bin/libtwo.so"), out)
    assert run.returncode == 0, run.stderr
    assert "Removed: 69,632 bytes" in run.stdout
    assert kpack.inspect(out)[0]["details"]["state"] == "kpacked"
    restored = tmp_path / "restored" / "libtwo.so"
    restored.parent.mkdir()
    kpack.restore(out, restored)
    objects = code_objects(fixture("bin/libtwo.so"), tmp_path / "original")
    assert len(objects) == 12 and code_objects(restored, tmp_path) == objects
    host_only = run_tool("kpack_binary", fixture("bin/libhostonly.so"), tmp_path / "h.so")
    assert host_only.returncode == 1 and "no device code" in host_only.stderr
    assert not (tmp_path / "h.so").exists()


def test_verify_elf_passes_a_rewritten_binary_and_fails_a_truncated_one(tmp_path):
    kpacked = tmp_path / "libone.so"
    kpack.transform(fixture("bin/libone.so"), kpacked, tmp_path / ".kpack")
    ok = run_tool("verify_elf", kpacked, "-v")
    assert ok.returncode == 0 and "Overall: PASSED" in ok.stdout
    cut = tmp_path / "cut.so"
    cut.write_bytes(kpacked.read_bytes()[:3000])
    bad = run_tool("verify_elf", cut)
    assert bad.returncode == 1 and "Overall: FAILED" in bad.stdout
    assert run_tool("verify_elf", tmp_path / "none.so").returncode == 1


def test_bulk_unbundle_writes_each_files_code_objects_beside_it(tmp_path):
    for name in ("libone.so", "libtwo.so"):
        shutil.copyfile(fixture(f"bin/{name}"), tmp_path / name)
    run = run_tool("bulk_unbundle", tmp_path / "libone.so", tmp_path / "libtwo.so",
                   "--clang-offload-bundler", "/nowhere/clang-offload-bundler")
    assert run.returncode == 0, run.stderr
    for name, count in (("libone", 6), ("libtwo", 12)):
        written = {p.name[len(name) + 4:]: p.read_bytes()
                   for p in (tmp_path / f"{name}.unbundled").iterdir()}
        assert len(written) == count
        assert written == code_objects(fixture(f"bin/{name}.so"), tmp_path / "witness")
    missing = run_tool("bulk_unbundle", tmp_path / "none.so")
    assert missing.returncode == 1
