"""`kpack.split_wheel` on the repository's fat sample wheel (fixtures/wheels/build_wheel.sh):
the same wheels and summary as `kpack split-wheel --json`, valid RECORDs, and a broken wheel
refused by name with nothing written."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import kpack
import pytest
from conftest import fixture, run_kpack

WHEEL = "wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl"
HANDLERS = ["rocblas", "aotriton"]


def record_errors(whl: Path) -> list:
    """Every RECORD row of `whl` whose sha256 or size does not match the entry (empty when
    the wheel checks out), read with zipfile and hashlib only."""
    with zipfile.ZipFile(whl) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(z.read(record).decode())))
        listed = {row[0] for row in rows}
        errors = [n for n in z.namelist() if n not in listed and not n.endswith("/")]
        for name, digest, size in rows:
            if name == record:
                continue
            data = z.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()
            ).rstrip(b"=").decode()
            if digest != want or int(size) != len(data):
                errors.append(name)
        return errors


def test_split_wheel_writes_what_the_command_writes_with_valid_records(tmp_path: Path) -> None:
    ours = tmp_path / "api"
    summary = kpack.split_wheel(fixture(WHEEL), ours, split_databases=HANDLERS)
    cli = tmp_path / "cli"
    out = run_kpack("split-wheel", fixture(WHEEL), "-o", cli, "--json",
                    "--split-databases", *HANDLERS)
    assert out.returncode == 0, out.stderr
    # The same summary but for the output directory, and the same bytes in every wheel.
    assert json.dumps(summary).replace(str(ours), "OUT") == json.dumps(
        json.loads(out.stdout)
    ).replace(str(cli), "OUT")
    names = sorted(p.name for p in ours.iterdir())
    assert names == sorted(p.name for p in cli.iterdir())
    for name in names:
        assert (ours / name).read_bytes() == (cli / name).read_bytes(), name

    assert summary["name"] == "kpack-demo"
    assert len(summary["fat_binaries"]) == 3
    keys = {d["key"] for d in summary["devices"]}
    assert {"gfx900", "gfx90a", "gfx1100", "gfx110x", "gfx11"} <= keys
    for whl in [summary["host"]["path"], *(d["path"] for d in summary["devices"])]:
        assert record_errors(Path(whl)) == [], whl
    # The host wheel's binaries hold no device code any more.
    with zipfile.ZipFile(summary["host"]["path"]) as z:
        binaries = [n for n in z.namelist() if n.endswith(".so") or n.endswith("exe_pie")]
        assert len(binaries) == 3
        for name in binaries:
            assert b"__CLANG_OFFLOAD_BUNDLE__" not in z.read(name), name


def test_split_wheel_of_a_zip_that_is_not_a_wheel_raises_naming_it_and_writes_nothing(
    tmp_path: Path,
) -> None:
    bogus = tmp_path / "bogus-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bogus, "w") as z:
        z.writestr("bogus/__init__.py", "")
    out = tmp_path / "out"
    with pytest.raises(kpack.FormatError) as err:
        kpack.split_wheel(bogus, out)
    assert str(bogus) in str(err.value)
    assert "not a wheel" in str(err.value)
    assert not out.exists()


def test_split_wheel_rejects_an_unknown_output_format(tmp_path: Path) -> None:
    with pytest.raises(kpack.UsageError, match="output format"):
        kpack.split_wheel(fixture(WHEEL), tmp_path / "out", output_format="tarball")


def test_split_wheel_with_multi_target_archives_is_what_the_command_writes(tmp_path: Path) -> None:
    ours = tmp_path / "api"
    summary = kpack.split_wheel(fixture(WHEEL), ours, split_databases=HANDLERS,
                                multi_target_archives=True)
    cli = tmp_path / "cli"
    out = run_kpack("split-wheel", fixture(WHEEL), "-o", cli, "--json", "--multi-target-archives",
                    "--split-databases", *HANDLERS)
    assert out.returncode == 0, out.stderr
    for p in ours.iterdir():
        assert p.read_bytes() == (cli / p.name).read_bytes(), p.name
        assert record_errors(p) == [], p.name
    gfx90a = next(d for d in summary["devices"] if d["key"] == "gfx90a")
    assert gfx90a["archives"] == 1
    with zipfile.ZipFile(summary["host"]["path"]) as z:
        assert "kpack_demo/.kpack/one.kpm" in z.namelist()
