"""`kpack.split`, `kpack.recombine` and `kpack.verify` on the hipcc-built shards in
fixtures/shards, as a build script runs them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import kpack
import pytest
from conftest import PACKAGING_CONFIG, cli_json, fixture


def split_all(out: Path):
    return [
        kpack.split(fixture(f"shards/{shard}"), out / "shards" / shard, batch=True,
                    split_databases=["rocblas"])
        for shard in ("shard-a", "shard-b", "shard-c")
    ]


def test_split_recombine_and_verify_recover_every_original_byte(tmp_path):
    splits = split_all(tmp_path)
    demo_lib = next(c for c in splits[0] if c["component"] == "demo_lib")
    assert demo_lib["fat_binaries"] == 2 and demo_lib["generic_only"] is False
    assert [a["name"] for a in demo_lib["artifacts"]] == ["demo_lib_generic", "demo_lib_gfx900", "demo_lib_gfx906"]

    config = tmp_path / "packaging.json"
    config.write_text(json.dumps(PACKAGING_CONFIG))
    out = tmp_path / "out"
    summary = kpack.recombine(tmp_path / "shards", config, out)
    lib = next(c for c in summary["components"] if c["component"] == "demo_lib")
    assert [g["artifact"] for g in lib["groups"]] == ["demo_lib_gfx9", "demo_lib_gfx10"]

    report = kpack.verify(out, original=fixture("shards"))
    assert report["failures"] == []
    assert report["code_objects"] > 0 and report["original_files"] > 0


def test_recombine_with_group_archives_links_each_target_to_its_group_archive(tmp_path):
    split_all(tmp_path)
    config = tmp_path / "packaging.json"
    config.write_text(json.dumps(PACKAGING_CONFIG))
    out = tmp_path / "out"
    kpack.recombine(tmp_path / "shards", config, out, group_archives=True, compression="none")
    kpack_dir = out / "demo_lib_gfx9/demo/stage/.kpack"
    link = kpack_dir / "lib_libdemo.so.1_gfx900.kpack"
    assert link.is_symlink() and os.readlink(link) == "lib_libdemo.so.1_gfx9.kpack"
    with kpack.Archive(kpack_dir / "lib_libdemo.so.1_gfx9.kpack") as archive:
        assert archive.compression_scheme == "none"
    assert kpack.verify(out, original=fixture("shards"))["failures"] == []


def test_split_returns_what_the_command_prints_with_json(tmp_path):
    ours = kpack.split(fixture("shards/shard-a/demo_lib_gfx90X"), tmp_path / "py", component="demo_lib",
                       compression="none")
    theirs = cli_json("split", fixture("shards/shard-a/demo_lib_gfx90X"), "-o", tmp_path / "cli",
                      "--component", "demo_lib", "--compression", "none", "--json")
    # Identical but for the output directory each was given.
    assert json.dumps(ours).replace(str(tmp_path / "py"), "OUT") == json.dumps(theirs).replace(
        str(tmp_path / "cli"), "OUT")


def test_verify_raises_verification_error_naming_what_was_lost(tmp_path):
    split_all(tmp_path)
    split = tmp_path / "shards" / "shard-a"
    lost = next((split / "demo_lib_gfx906/demo/stage/.kpack").glob("*.kpack"))
    lost.unlink()
    with pytest.raises(kpack.VerificationError) as err:
        kpack.verify(split, original=fixture("shards/shard-a"))
    assert "gfx906" in str(err.value)
    assert err.value.report["failures"] and isinstance(err.value, kpack.ArtifactError)
    # check=False returns the same report instead.
    assert kpack.verify(split, original=fixture("shards/shard-a"), check=False) == err.value.report


def test_recombine_refuses_a_missing_architecture_and_writes_nothing(tmp_path):
    split_all(tmp_path)
    config = tmp_path / "strict.json"
    config.write_text(json.dumps({
        "primary_shard": "shard-a",
        "architecture_groups": {"mi300": {"architectures": ["gfx942", "gfx90a"]}},
        "validation": {"error_on_missing_architecture": True},
    }))
    out = tmp_path / "out"
    with pytest.raises(kpack.ArtifactError, match="gfx942"):
        kpack.recombine(tmp_path / "shards", config, out)
    assert not out.exists()


def test_recombine_of_a_missing_config_raises_input_error_naming_it(tmp_path):
    with pytest.raises(kpack.InputError, match="nope.json"):
        kpack.recombine(fixture("shards"), tmp_path / "nope.json", tmp_path / "out")


def test_split_rejects_an_unknown_database_handler_listing_the_known_ones(tmp_path):
    with pytest.raises(kpack.UsageError, match="rocblas"):
        kpack.split(fixture("shards/shard-a"), tmp_path, batch=True, split_databases=["tensorflow"])


@pytest.mark.parametrize("kwargs", [{}, {"component": "demo_lib", "batch": True}])
def test_split_wants_exactly_one_of_component_and_batch(tmp_path, kwargs):
    with pytest.raises(kpack.UsageError):
        kpack.split(fixture("shards/shard-a"), tmp_path, **kwargs)


def test_split_of_a_directory_without_a_manifest_raises_input_error(tmp_path):
    with pytest.raises(kpack.KpackError) as err:
        kpack.split(tmp_path / "missing", tmp_path / "out", component="x")
    assert "missing" in str(err.value)
