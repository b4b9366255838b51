"""`kpack.inspect`: the JSON of `kpack inspect --json`, and exceptions for what it cannot read."""

from __future__ import annotations

import json

import kpack
import pytest
from conftest import fixture, run_kpack, truncated, cli_json


def test_inspect_returns_exactly_what_the_command_prints_with_json():
    paths = [fixture("bin/libtwo.so"), fixture("bin/libtwo.a"), fixture("modern/ccob_v3_llvm22.bundle"),
             fixture("vectors/test_noop.kpack"), fixture("bin/k1_gfx90a.hsaco")]
    assert kpack.inspect(paths) == cli_json("inspect", "--json", *paths)


def test_inspect_of_a_fat_library_reports_wrappers_bundles_and_totals():
    [report] = kpack.inspect(fixture("bin/libtwo.so"))
    assert list(report) == ["path", "kind", "details", "totals"]
    assert report["kind"] == "elf"
    assert report["details"]["state"] == "fat"
    # bundle 0 (k1) + bundle 1 (k2), sizes as clang-offload-bundler-15 unbundles them.
    assert report["totals"][0] == {"target": "gfx1030", "count": 2, "bytes": 3640 + 3632}
    assert report["totals"][4]["target"] == "gfx90a:xnack+"


def test_inspect_of_a_directory_recurses_sorted_and_skips_unrelated_files(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "libone.so").write_bytes(fixture("bin/libone.so").read_bytes())
    (tmp_path / "a.co").write_bytes(fixture("modern/mk_gfx1030.co").read_bytes())
    (tmp_path / "README").write_text("not device code")
    paths = [r["path"] for r in kpack.inspect(str(tmp_path))]
    assert len(paths) == 2 and paths[0].endswith("a.co") and paths[1].endswith("b/libone.so")


def test_inspect_of_a_missing_file_raises_input_error_naming_it(tmp_path):
    missing = tmp_path / "nope.so"
    with pytest.raises(kpack.InputError) as err:
        kpack.inspect(missing)
    assert str(missing) in str(err.value)
    assert isinstance(err.value, OSError) and isinstance(err.value, kpack.KpackError)
    # The message is the one the command prints.
    assert f"kpack: error: {err.value}" in run_kpack("inspect", missing).stderr


def test_inspect_of_a_truncated_archive_raises_archive_error_with_file_and_offset(tmp_path):
    cut = truncated(tmp_path, "vectors/test_noop.kpack", 600)
    with pytest.raises(kpack.ArchiveError) as err:
        kpack.inspect(cut)
    message = str(err.value)
    assert str(cut) in message
    assert any(w in message for w in ("offset", "at byte", "0x")), message
    out = run_kpack("inspect", cut)
    assert out.returncode == 1
    assert out.stderr.strip() == f"kpack: error: {message}"


def test_inspect_of_a_corrupt_bundle_raises_format_error_naming_the_file(tmp_path):
    cut = truncated(tmp_path, "modern/ccob_v3_llvm22.bundle", 1000)
    with pytest.raises(kpack.FormatError) as err:
        kpack.inspect(cut)
    assert str(cut) in str(err.value)
    assert run_kpack("inspect", cut).stderr.strip() == f"kpack: error: {err.value}"


def test_inspect_with_errors_report_lists_a_bad_file_as_the_command_does(tmp_path):
    bad = truncated(tmp_path, "bin/k1_genco.hsaco", 64)
    good = fixture("bin/libone.so")
    reports = kpack.inspect([good, bad], errors="report")
    assert [r["kind"] for r in reports] == ["elf", "error"]
    assert "k1_genco.hsaco" in reports[1]["error"]
    out = run_kpack("inspect", "--json", good, bad)
    assert out.returncode == 1
    assert reports == json.loads(out.stdout)


def test_inspect_rejects_an_unknown_errors_mode():
    with pytest.raises(kpack.UsageError):
        kpack.inspect(fixture("bin/libone.so"), errors="ignore")
