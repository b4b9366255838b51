"""``kpack_tool list [--summary] FILE`` and ``kpack_tool extract FILE BINARY ARCH -o OUT``:
the reference's archive tool over :class:`kpack.Archive` and ``kpack extract``. Exit status
0, or 1 on a missing file, a damaged archive or a key the archive lacks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kpack
from rocm_kpack.tools._common import entry_point, fail, kpack_command, megabytes, tool_parser


def list_archive(args: argparse.Namespace) -> int:
    path = Path(args.kpack_file)
    if not path.exists():
        return fail(f"{path} does not exist")
    with kpack.Archive(path) as archive:
        print(f"Kpack: {path.name}")
        print(f"  Group:       {archive.group_name}")
        print(f"  Arch family: {archive.gfx_arch_family}")
        print(f"  Binaries:    {len(archive.binaries)}")
        print()
        entries = sorted(archive.entries)
        if args.summary:
            total = sum(size for _, _, size in entries)
            print(f"Total kernels: {len(entries)}")
            print(f"Total size:    {total:,} bytes ({megabytes(total):.2f} MB)")
            return 0
        print(f"{'Binary Path':<60} {'Arch':<12} {'Size':>12}")
        print("-" * 85)
        previous = None
        for binary, arch, size in entries:
            shown = binary if binary != previous else ""
            print(f"{shown:<60} {arch:<12} {size / 1024:>10.1f} KB")
            previous = binary
    return 0


def extract(args: argparse.Namespace) -> int:
    path = Path(args.kpack_file)
    if not path.exists():
        return fail(f"{path} does not exist")
    binary = args.binary_path[2:] if args.binary_path.startswith("./") else args.binary_path
    with kpack.Archive(path) as archive:
        binaries = sorted(archive.binaries)
        if binary not in binaries:
            fail(f"Binary '{binary}' not found in archive")
            print("\nAvailable binaries:", file=sys.stderr)
            for b in binaries[:10]:
                print(f"  {b}", file=sys.stderr)
            if len(binaries) > 10:
                print(f"  ... and {len(binaries) - 10} more", file=sys.stderr)
            return 1
        arches = sorted(a for b, a, _ in archive.entries if b == binary)
        if args.arch not in arches:
            fail(f"Architecture '{args.arch}' not found for binary '{binary}'")
            print(f"\nAvailable architectures: {', '.join(arches)}", file=sys.stderr)
            return 1
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    # `kpack extract` checks the entry against its digest and writes the file atomically.
    status = kpack_command("extract", path, binary, args.arch, "-o", output)
    if status:
        return status
    print(f"Extracted: {binary} ({args.arch}) -> {output}")
    print(f"Size: {output.stat().st_size / 1024:.1f} KB")
    return 0


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Inspect and extract from .kpack archives")
    p.set_defaults(body=lambda _: p.print_help() or 1)  # no subcommand: the reference's 1
    sub = p.add_subparsers(dest="command")
    listing = sub.add_parser("list", help="list the contents of an archive")
    listing.add_argument("kpack_file")
    listing.add_argument("--summary", "-s", action="store_true")
    listing.set_defaults(body=list_archive)
    one = sub.add_parser("extract", help="extract one code object")
    one.add_argument("kpack_file")
    one.add_argument("binary_path", help="the binary key, e.g. lib/librocblas.so.5.1#0")
    one.add_argument("arch")
    one.add_argument("-o", "--output", required=True)
    one.set_defaults(body=extract)
    return p


def dispatch(args: argparse.Namespace) -> int:
    return args.body(args)


main = entry_point(parser, dispatch)


if __name__ == "__main__":
    sys.exit(main())
