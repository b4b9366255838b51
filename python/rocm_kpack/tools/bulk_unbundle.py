"""``bulk_unbundle FILES...``: the reference's unbundling aid over ``kpack unbundle``: each
file's code objects go to the directory the reference picks, the file's path with its last
suffix replaced by ``.unbundled`` (``libfoo.so`` -> ``libfoo.unbundled``), named as kpack
names them. Exit status 0, or 1 at the first file that fails."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocm_kpack.tools._common import add_toolchain_flags, entry_point, kpack_command, tool_parser


def bulk_unbundle(args: argparse.Namespace) -> int:
    for file in args.files:
        dest = file.with_suffix(".unbundled")
        status = kpack_command("unbundle", file, "-o", dest)
        if status:
            return status
        print(f"Unbundled {dest}: {len(list(dest.iterdir()))} code objects")
    return 0


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Write the code objects of each file into <file>.unbundled")
    p.add_argument("files", nargs="+", type=Path)
    add_toolchain_flags(p)
    return p


main = entry_point(parser, bulk_unbundle)


if __name__ == "__main__":
    sys.exit(main())
