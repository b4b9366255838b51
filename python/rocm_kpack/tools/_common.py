"""What the tools share: the flags that only configured the reference's external tools,
``--tmp-dir``, the ``kpack`` command run as a child process, and how errors end a tool (on
stderr, exit status 1; argparse's usage errors exit 2)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Callable, List, Optional, Union

from kpack import KpackError
from kpack._command import binary

# kpack's kernel-database handlers (`kpack split --split-databases`), a superset of the
# reference's; its presets name the same handlers.
HANDLERS = (
    "rocblas",
    "hipblaslt",
    "hipsparselt",
    "aotriton",
    "miopen",
    "composablekernel",
    "hipkernelprovider",
    "hotswap_cache",
)

RULE = "=" * 70


def banner(title: str) -> None:
    print(RULE)
    print(title)
    print(RULE)


def closing(title: str, counts: List[str], verdict: str) -> None:
    """The reference's closing block: a banner, the counts, a blank line, the verdict."""
    banner(title)
    for line in counts:
        print(line)
    print()
    print(verdict)


def tool_parser(what: str) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        description=f"{what} (kpack; see docs/reference-commands.md)"
    )


def add_toolchain_flags(parser: argparse.ArgumentParser) -> None:
    """``--clang-offload-bundler``: accepted, and ignored (kpack runs no external tool)."""
    parser.add_argument(
        "--clang-offload-bundler",
        type=Path,
        default=None,
        help="ignored: kpack reads and writes offload bundles itself",
    )


def note_ignored_toolchain(args: argparse.Namespace) -> None:
    """One line under ``--verbose`` when the reference's toolchain was configured."""
    given = []
    if getattr(args, "clang_offload_bundler", None) is not None:
        given.append("--clang-offload-bundler")
    if os.environ.get("KPACK_LLVM_BIN"):
        given.append("KPACK_LLVM_BIN")
    if given and getattr(args, "verbose", False):
        print(f"Ignoring {' and '.join(given)}: kpack runs no external tools")


def use_tmp_dir(tmp_dir: Optional[Path], verbose: bool) -> None:
    """``--tmp-dir``: where kpack's temporaries go (``TMPDIR``, read by kpack's Rust code
    and by Python's ``tempfile``)."""
    if tmp_dir is None:
        return
    os.environ["TMPDIR"] = os.fspath(tmp_dir)
    tempfile.tempdir = None
    if verbose:
        print(f"Using temporary directory: {tmp_dir}")


def kpack_command(*argv: Union[str, "os.PathLike[str]", int]) -> int:
    """Runs ``kpack ARGV...`` (the installed binary; what it prints goes to this process's
    stdout and stderr, after what Python printed so far) and returns its exit status."""
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.call([binary(), *map(str, argv)])


def fail(message: object) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def megabytes(size: int) -> float:
    return size / (1024 * 1024)


def entry_point(
    parser: Callable[[], argparse.ArgumentParser],
    body: Callable[[argparse.Namespace], int],
) -> Callable[[Optional[List[str]]], int]:
    """A tool's ``main(argv=None) -> int``, what its console script and ``python -m`` call:
    parses ``argv`` (default: the process's arguments; a usage error exits 2) and runs
    ``body``; a kpack error is printed as ``Error: <message>`` (with the traceback under
    ``--verbose``) and gives exit status 1, as the reference's tools do."""

    def main(argv: Optional[List[str]] = None) -> int:
        args = parser().parse_args(argv)
        note_ignored_toolchain(args)
        try:
            return body(args)
        except KpackError as err:
            status = fail(err)
            if getattr(args, "verbose", False):
                traceback.print_exc()
            return status

    return main
