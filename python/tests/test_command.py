"""The wheel's `kpack` command: on PATH in the environment, and as `python -m kpack`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import kpack
from conftest import fixture, kpack_command, run_kpack


def test_kpack_is_on_path_in_the_environment_and_prints_its_version():
    env_bin = str(Path(sys.executable).parent)
    found = shutil.which("kpack", path=env_bin + os.pathsep + os.environ.get("PATH", ""))
    assert found == kpack_command()
    out = subprocess.run([found, "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"kpack {kpack.__version__}"


def test_python_dash_m_kpack_runs_the_same_command():
    out = subprocess.run([sys.executable, "-m", "kpack", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"kpack {kpack.__version__}"
    listing = subprocess.run([sys.executable, "-m", "kpack", "list", fixture("vectors/test_noop.kpack")],
                             capture_output=True, text=True)
    assert listing.returncode == 0 and "gfx906" in listing.stdout


def test_command_exit_statuses_are_the_binarys():
    assert run_kpack("inspect", fixture("bin/libone.so")).returncode == 0
    assert run_kpack("inspect", "/nonexistent/file.so").returncode == 1
    usage = run_kpack("split", "--no-such-option")
    assert usage.returncode == 2 and "Usage" in usage.stderr


def test_a_closed_pipe_ends_the_command_quietly():
    # `kpack inspect --json … | head -c 10`, with more output than a pipe holds: the command
    # dies of SIGPIPE like the binary, not with a Python traceback or a Rust print panic.
    fixtures = fixture("bin").parent
    proc = subprocess.Popen([kpack_command(), "inspect", "--json", *[fixtures] * 4],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait() == -signal.SIGPIPE, stderr
    assert stderr == ""


def test_the_package_under_test_is_the_installed_one_not_the_source_tree():
    assert "site-packages" in Path(kpack.__file__).parts, kpack.__file__


def test_the_command_is_the_kpack_binary_itself_not_a_python_script():
    # The wheel ships the CLI's binary as its script; `python -m kpack` finds that same file.
    script = Path(kpack_command())
    assert script.read_bytes()[:4] == b"\x7fELF"
    from kpack._command import binary

    assert Path(binary()) == script.resolve()
