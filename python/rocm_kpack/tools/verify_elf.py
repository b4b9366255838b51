"""``verify_elf BINARY [-v]``: the reference's ELF check over ``kpack verify-elf``, the
structural verifier every kpack rewrite passes (ELF or PE). The reference also ran
``readelf``, ``strip``, ``gdb`` and ``ldd``; kpack runs no external tool. Exit status 0 when
the binary passes, 1 when it fails or does not exist."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_kpack.tools._common import entry_point, fail, kpack_command, tool_parser


def verify_elf(args: argparse.Namespace) -> int:
    if not args.binary.exists():
        return fail(f"{args.binary} does not exist")
    print(f"Verifying: {args.binary}")
    print("-" * 60)
    status = kpack_command("verify-elf", args.binary)
    print("-" * 60)
    print(f"Overall: {'PASSED' if status == 0 else 'FAILED'}")
    return 0 if status == 0 else 1


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Verify an ELF binary's structure")
    p.add_argument("binary", type=Path)
    p.add_argument("--verbose", "-v", action="store_true")
    return p


main = entry_point(parser, verify_elf)


if __name__ == "__main__":
    sys.exit(main())
