"""The Python API reads the compression options as the `kpack` command does: a scheme without
a level takes that scheme's default level (19 for `unified`, 3 for `zstd`), so the two write
the same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import kpack
import pytest
from conftest import fixture, run_kpack


def files(root: Path) -> Dict[str, bytes]:
    """Every file under `root`, by its path relative to it."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("scheme", ["unified", "zstd", "none"])
def test_python_and_the_command_write_the_same_bytes_at_the_schemes_default_level(tmp_path, scheme):
    fat = fixture("bin/libtwo.so")
    api, cli = tmp_path / "api", tmp_path / "cli"
    kpack.transform(fat, api / "libtwo.so", api / ".kpack", compression=scheme)
    out = run_kpack("transform", "--compression", scheme,
                    "-o", cli / "libtwo.so", "--kpack-dir", cli / ".kpack", fat)
    assert out.returncode == 0, out.stderr
    written = files(api)
    assert any(name.endswith(".kpack") for name in written), written.keys()
    assert written == files(cli)


def test_a_level_given_to_python_is_the_level_given_to_the_command(tmp_path):
    fat = fixture("bin/libtwo.so")
    api, cli = tmp_path / "api", tmp_path / "cli"
    kpack.transform(fat, api / "libtwo.so", api / ".kpack", compression="zstd", level=19)
    out = run_kpack("transform", "--compression", "zstd", "--level", "19",
                    "-o", cli / "libtwo.so", "--kpack-dir", cli / ".kpack", fat)
    assert out.returncode == 0, out.stderr
    assert files(api) == files(cli)


def test_an_unknown_scheme_is_a_usage_error_naming_the_choices(tmp_path):
    with pytest.raises(kpack.UsageError, match="expected none, zstd or unified"):
        kpack.transform(fixture("bin/libtwo.so"), tmp_path / "o.so", tmp_path / "k",
                        compression="zstd-per-kernel")
