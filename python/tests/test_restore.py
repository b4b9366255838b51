"""`kpack.restore` on a transformed fat library: the fat binary comes back with every code
object, and a missing archive raises naming the wrapper, the target and the paths."""

from __future__ import annotations

import pytest

import kpack

from conftest import fixture


def _transformed(tmp_path):
    output = tmp_path / "lib" / "libtwo.so"
    output.parent.mkdir()
    kpack.transform(fixture("bin/libtwo.so"), output, tmp_path / ".kpack")
    return output


def test_restore_brings_back_the_fat_binary_with_every_code_object(tmp_path):
    kpacked = _transformed(tmp_path)
    out = tmp_path / "restored.so"
    summary = kpack.restore(kpacked, out, compress=True)
    assert summary["format"] == "ccob" and summary["wrappers"] == 2
    [before] = kpack.inspect(fixture("bin/libtwo.so"))
    [after] = kpack.inspect(out)
    assert after["details"]["state"] == "fat"
    assert after["totals"] == before["totals"]

    picked = kpack.restore(
        kpacked, tmp_path / "gfx90a.so", targets=["gfx90a"], kpack_dirs=[tmp_path / ".kpack"]
    )
    assert picked["targets"] == ["gfx90a:xnack+", "gfx90a:xnack-"]


def test_restore_without_the_archive_raises_and_writes_nothing(tmp_path):
    kpacked = _transformed(tmp_path)
    (tmp_path / ".kpack" / "libtwo_gfx1030.kpack").unlink()
    out = tmp_path / "restored.so"
    with pytest.raises(kpack.ArchiveError, match="gfx1030") as err:
        kpack.restore(kpacked, out, targets=["gfx1030"])
    assert "libtwo_@GFXARCH@.kpack" in str(err.value)
    assert not out.exists()
    with pytest.raises(kpack.UsageError):
        kpack.restore(kpacked, out, targets=["not a target"])
