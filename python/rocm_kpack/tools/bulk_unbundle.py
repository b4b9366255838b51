"""``bulk_unbundle FILES...``: the reference's unbundling aid over ``kpack unbundle``: each
file's code objects go to the directory the reference picks, the file's path with its last
suffix replaced by ``.unbundled`` (``libfoo.so`` -> ``libfoo.unbundled``), named as kpack
names them. Exit status 0, or 1 at the first file that fails."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from rocm_kpack.tools._common import add_toolchain_flags, kpack_command, run


def bulk_unbundle(args: argparse.Namespace) -> int:
    for file in args.files:
        dest = file.with_suffix(".unbundled")
        status = kpack_command("unbundle", file, "-o", dest)
        if status:
            return status
        print(f"Unbundled {dest}: {len(list(dest.iterdir()))} code objects")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Write the code objects of each file into <file>.unbundled (kpack; see "
        "docs/reference-commands.md)"
    )
    p.add_argument("files", nargs="+", type=Path)
    add_toolchain_flags(p)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return run(parser(), bulk_unbundle, argv)


if __name__ == "__main__":
    sys.exit(main())
