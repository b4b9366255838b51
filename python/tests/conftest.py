"""Shared by the tests of the installed `kpack` package: the repository's fixtures and the
`kpack` command of the environment under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# A packaging configuration for fixtures/shards: every target of the three shards in two
# groups, every validation flag on.
PACKAGING_CONFIG = {
    "primary_shard": "shard-a",
    "architecture_groups": {
        "gfx9": {"display_name": "GFX9", "architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]},
        "gfx10": {"architectures": ["gfx1030"]},
    },
    "validation": {
        "error_on_duplicate_device_code": True,
        "verify_generic_artifacts_match": True,
        "error_on_missing_architecture": True,
    },
}


def fixture(rel: str) -> Path:
    path = FIXTURES / rel
    assert path.exists(), f"fixture {path} is missing"
    return path


def kpack_command() -> str:
    """The `kpack` console script installed beside this interpreter (the wheel's)."""
    script = Path(sys.executable).parent / "kpack"
    assert script.exists(), f"no kpack script beside {sys.executable}"
    return str(script)


def run_kpack(*args: Any) -> subprocess.CompletedProcess:
    env = dict(os.environ, CI="1")
    return subprocess.run(
        [kpack_command(), *map(str, args)], capture_output=True, text=True, env=env
    )


def run_tool(tool: str, *args: Any, cwd: Any = None) -> subprocess.CompletedProcess:
    """`python -m rocm_kpack.tools.<tool> ARGS...`, the reference's command line, run by the
    interpreter under test."""
    env = dict(os.environ, CI="1")
    return subprocess.run(
        [sys.executable, "-m", f"rocm_kpack.tools.{tool}", *map(str, args)],
        capture_output=True, text=True, env=env, cwd=cwd,
    )


def code_objects(binary: Path, scratch: Path) -> Dict[str, bytes]:
    """Every device code object of `binary` (`kpack unbundle`), keyed by wrapper and bundle
    entry id, whatever the file is called."""
    out = scratch / f"{binary.name}.unbundled"
    result = run_kpack("unbundle", binary, "-o", out)
    assert result.returncode == 0, result.stderr
    return {p.name[len(binary.name) + 1:]: p.read_bytes() for p in out.iterdir()}


def cli_json(*args: Any) -> List[Any]:
    out = run_kpack(*args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def shards() -> Path:
    return fixture("shards")


def truncated(tmp_path: Path, rel: str, keep: int) -> Path:
    """The first `keep` bytes of fixture `rel`, under its own name in `tmp_path`."""
    cut = tmp_path / Path(rel).name
    cut.write_bytes(fixture(rel).read_bytes()[:keep])
    return cut
