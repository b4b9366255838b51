"""``kpack_binary INPUT OUTPUT``: the reference's single-binary rewrite over
:func:`kpack.transform`. kpack writes the ``.rocm_kpack_ref`` marker itself and the archives
it points at, ``.kpack/<name>_<target>.kpack`` beside OUTPUT, so the output loads as it is;
the reference wanted a marker added beforehand (``objcopy --add-section``) and dropped the
device code. Exit status 0, or 1 on any error (an input already carrying a marker included)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kpack
from rocm_kpack.tools._common import entry_point, fail, megabytes, tool_parser


def kpack_binary(args: argparse.Namespace) -> int:
    print(f"Kpacking: {args.input}")
    print(f"Output: {args.output}")
    print()
    result = kpack.transform(args.input, args.output, args.output.parent / ".kpack")
    if result["status"] == "already-kpacked":
        return fail(f"{args.input} already has a .rocm_kpack_ref marker (kpack writes the "
                    "marker itself: give the fat binary); nothing written")
    if result["status"] == "debug-only":
        return fail(f"{args.input} is a separated debug file: no device code; nothing written")
    before, after, removed = result["input_size"], result["output_size"], result["removed"]
    print("Results:")
    print(f"  Original size: {before:,} bytes ({megabytes(before):.2f} MB)")
    print(f"  New size: {after:,} bytes ({megabytes(after):.2f} MB)")
    print(f"  Removed: {removed:,} bytes ({megabytes(removed):.2f} MB)")
    if before:
        print(f"  Reduction: {removed / before * 100:.2f}%")
    print(f"  Marker: kernel {result['kernel_name']}, search paths "
          f"{', '.join(result['search_paths'])}")
    for a in result["archives"]:
        print(f"  Archive: {a['path']} ({a['entries']} entries)")
    return 0


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Rewrite a fat binary into a host-only binary plus its archives")
    p.add_argument("input", type=Path, help="fat binary (ELF executable or shared library)")
    p.add_argument("output", type=Path, help="host-only binary to write")
    return p


main = entry_point(parser, kpack_binary)


if __name__ == "__main__":
    sys.exit(main())
