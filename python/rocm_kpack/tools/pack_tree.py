"""``pack_tree``: the reference's older single-tree flow. The tree is copied to ``--output``,
each fat binary rewritten (:func:`kpack.transform`) to load its code objects from the one
archive ``<output>/.kpack/<group>-<family>.kpack``, which ``kpack pack`` writes. Exit
status 0, or 1 on any error."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict

import kpack
from rocm_kpack.tools._common import (
    add_toolchain_flags,
    entry_point,
    fail,
    kpack_command,
    megabytes,
    tool_parser,
)


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Pack the fat binaries of a tree into one .kpack archive")
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--group-name", required=True)
    p.add_argument("--gfx-arch-family", required=True)
    p.add_argument("--gfx-arches", required=True, help="comma-separated (the archive lists the "
                   "targets it holds)")
    p.add_argument("--max-workers", type=int, default=0, help="default: one per core")
    p.add_argument("--compression", choices=["none", "zstd"], default="zstd")
    p.add_argument("--compression-level", type=int, default=3)
    add_toolchain_flags(p)
    return p


def fat_binaries(tree: Path) -> Dict[Path, str]:
    """The linked fat binaries of `tree` (relative path -> archive key). The key is the
    path with `_` for `/`, as kpack names modules: an archive key is one file name."""
    fat: Dict[Path, str] = {}
    for r in kpack.inspect(tree):
        d = r["details"]
        if r["kind"] in ("elf", "pe") and d["elf_type"] != "relocatable" and d["state"] == "fat":
            rel = Path(r["path"]).relative_to(tree)
            fat[rel] = rel.as_posix().replace("/", "_")
    return fat


def pack_tree(args: argparse.Namespace) -> int:
    if not args.input.is_dir():
        return fail(f"Input directory does not exist: {args.input}")
    arches = [a.strip() for a in args.gfx_arches.split(",") if a.strip()]
    if not arches:
        return fail("--gfx-arches must contain at least one architecture")
    archive_name = f"{args.group_name}-{args.gfx_arch_family}.kpack"
    archive = args.output / ".kpack" / archive_name
    print("Packing install tree:")
    print(f"  Input:            {args.input}")
    print(f"  Output:           {args.output}")
    print(f"  Group:            {args.group_name}")
    print(f"  Arch family:      {args.gfx_arch_family}")
    print(f"  Architectures:    {', '.join(arches)}")
    print()

    fat = fat_binaries(args.input)
    keys = sorted(fat.values())
    clash = next((k for k, k2 in zip(keys, keys[1:]) if k == k2), None)
    if clash is not None:
        return fail(f"two fat binaries would share the archive key {clash!r}")
    opaque = 0
    with tempfile.TemporaryDirectory(prefix="rocm-kpack-pack-tree-") as tmp:
        named = Path(tmp) / "named"  # the fat binaries under their keys, for `kpack pack`
        unused = Path(tmp) / "per-target"  # transform's own archives, not wanted here
        named.mkdir()
        for root, dirs, files in os.walk(args.input):
            dirs.sort()
            src_dir = Path(root)
            dest_dir = args.output / src_dir.relative_to(args.input)
            dest_dir.mkdir(parents=True, exist_ok=True)
            for name in sorted(files) + [d for d in dirs if (src_dir / d).is_symlink()]:
                src, dest = src_dir / name, dest_dir / name
                rel = src.relative_to(args.input)
                if src.is_symlink():
                    os.symlink(os.readlink(src), dest)
                    opaque += 1
                elif rel in fat:
                    (named / fat[rel]).symlink_to(src.resolve())
                    depth = len(rel.parts) - 1
                    kpack.transform(
                        src,
                        dest,
                        unused,
                        kernel_name=fat[rel],
                        search_paths=["../" * depth + f".kpack/{archive_name}"],
                        compression="none",
                    )
                else:
                    shutil.copy2(src, dest)
                    opaque += 1
        if fat:
            archive.parent.mkdir(parents=True, exist_ok=True)
            status = kpack_command(
                "--threads", args.max_workers, "pack", "-o", archive,
                "--group", args.group_name, "--family", args.gfx_arch_family,
                "--compression", args.compression, "--level", args.compression_level,
                *sorted(named.iterdir()),
            )
            if status:
                return status

    print()
    print("=" * 70)
    print("PACKING COMPLETE")
    print("=" * 70)
    print()
    print("Statistics:")
    print(f"  Opaque files:       {opaque:>6}")
    print(f"  Bundled binaries:   {len(fat):>6}")
    print()
    print("Output:")
    print(f"  Packed tree:        {args.output}")
    if not fat:
        print("  Kpack archive:      none (no fat binaries)")
        return 0
    print(f"  Kpack archive:      {archive}")
    print(f"  Kpack size:         {megabytes(archive.stat().st_size):.2f} MB")
    print()
    with kpack.Archive(archive) as packed:
        print("Kpack contents:")
        print(f"  Binaries:           {len(packed.binaries):>6}")
        print(f"  Total kernels:      {len(packed):>6}")
        print(f"  Architectures:      {', '.join(packed.architectures)}")
    return 0


main = entry_point(parser, pack_tree)


if __name__ == "__main__":
    sys.exit(main())
