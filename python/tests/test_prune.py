"""`kpack.prune` on a real fat library: the kept targets stay, byte for byte, and bad
requests raise without writing anything."""

import pytest

import kpack
from conftest import fixture


def test_prune_keeps_only_the_named_processor(tmp_path):
    source = fixture("bin/libtwo.so")
    output = tmp_path / "libtwo.so"
    report = kpack.prune(source, output, keep=["gfx90a"])
    assert report["kept"] == ["gfx90a:xnack+", "gfx90a:xnack-"]
    assert report["dropped"] == ["gfx1030", "gfx900", "gfx906", "gfx908"]
    assert report["files"][0]["action"] == "pruned"
    before = {t["target"]: t for t in kpack.inspect(source)[0]["totals"]}
    after = kpack.inspect(output)[0]["totals"]
    assert [t["target"] for t in after] == ["gfx90a:xnack+", "gfx90a:xnack-"]
    assert all(t == before[t["target"]] for t in after)


def test_prune_refuses_bad_requests_and_writes_nothing(tmp_path):
    source = fixture("bin/libtwo.so")
    output = tmp_path / "out.so"
    with pytest.raises(kpack.UsageError, match="gfx1100 matches no code object"):
        kpack.prune(source, output, keep=["gfx1100"])
    with pytest.raises(kpack.UsageError, match="not both"):
        kpack.prune(source, output, keep=["gfx90a"], drop=["gfx900"])
    with pytest.raises(kpack.UsageError, match="not an AMDGPU processor"):
        kpack.prune(source, output, keep=["gfx9000"])
    with pytest.raises(kpack.UsageError, match="--allow-empty"):
        kpack.prune(source, output, drop=["gfx1030", "gfx900", "gfx906", "gfx908", "gfx90a"])
    assert list(tmp_path.iterdir()) == []
