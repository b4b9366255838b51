"""``split_python_wheels``: the reference's wheel splitter over :func:`kpack.split_wheel`: a
fat wheel (or an unpacked one) becomes a host wheel plus device wheels per GPU target,
sub-family and family. Exit status 0, or 1 on any error (2 for argparse's usage errors)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import kpack
from rocm_kpack.tools._common import (
    HANDLERS,
    add_toolchain_flags,
    entry_point,
    fail,
    tool_parser,
    use_tmp_dir,
)

# The reference's --wheel-type presets: the database handlers each selects.
WHEEL_TYPE_PRESETS = {"torch-fat": ["rocblas", "hipblaslt", "hipsparselt", "aotriton", "miopen"]}


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Split a Python wheel into host + per-arch device wheels")
    p.add_argument("--input", type=Path, required=True, help="a .whl or an unpacked wheel")
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--device-package-prefix", required=True)
    p.add_argument("--overlay-root", required=True)
    p.add_argument("--device-requires-dist", nargs="*", default=[])
    p.add_argument("--output-format", choices=["wheel", "directory"], default="wheel")
    p.add_argument("--wheel-type", choices=sorted(WHEEL_TYPE_PRESETS), default=None)
    p.add_argument("--databases", nargs="*", default=None,
                   help=f"overrides --wheel-type; available: {', '.join(HANDLERS)}")
    p.add_argument("--compression", choices=["none", "zstd"], default="zstd")
    p.add_argument("--compression-level", type=int, default=3)
    p.add_argument("--tmp-dir", type=Path, default=None)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("-j", "--jobs", type=int, default=1)
    p.add_argument("--generate-variant-wheel", action="store_true")
    p.add_argument("--variant-label", default="variant")
    add_toolchain_flags(p)
    return p


def split(args: argparse.Namespace) -> int:
    if not args.input.exists():
        return fail(f"Input does not exist: {args.input}")
    use_tmp_dir(args.tmp_dir, args.verbose)
    # --databases, even empty, wins over --wheel-type.
    if args.databases is not None:
        handlers = args.databases
    else:
        handlers = WHEEL_TYPE_PRESETS.get(args.wheel_type, [])
    print(f"Input: {args.input}")
    print(f"Output: {args.output_dir}")
    print(f"Device package prefix: {args.device_package_prefix}")
    print(f"Overlay root: {args.overlay_root}")
    print(f"Output format: {args.output_format}")
    if args.generate_variant_wheel:
        print("Variant wheel: enabled")
    summary = kpack.split_wheel(
        args.input,
        args.output_dir,
        device_package_prefix=args.device_package_prefix,
        overlay_root=args.overlay_root,
        device_requires_dist=args.device_requires_dist,
        split_databases=handlers,
        output_format=args.output_format,
        variants=args.generate_variant_wheel,
        variant_label=args.variant_label,
        compression=args.compression,
        level=args.compression_level,
        threads=max(args.jobs, 1),
    )
    print("\nSplit complete:")
    print(f"  Fat binaries processed: {len(summary['fat_binaries'])}")
    print(f"  Architectures: {', '.join(summary['architectures'])}")
    print(f"  Host wheel: {summary['host']['path']}")
    if summary["variant"]:
        print(f"  Variant wheel: {summary['variant']['path']}")
    for device in sorted(summary["devices"], key=lambda d: d["key"]):
        print(f"  Device wheel ({device['key']}): {device['path']}")
    return 0


main = entry_point(parser, split)


if __name__ == "__main__":
    sys.exit(main())
