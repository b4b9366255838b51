"""Shared by the tests of the installed `kpack` package: the repository's fixtures and the
`kpack` command of the environment under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


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
