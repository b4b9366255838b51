"""``recombine_artifacts``: the reference's reduce step over :func:`kpack.recombine`. Exit
status 0; 1 when collection or combination fails (kpack also enforces the configuration's
``validation`` flags, which the reference ignores); 2 for bad arguments or configuration."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import kpack
from rocm_kpack.tools._common import banner, closing, entry_point, tool_parser


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Recombine split artifacts into package groups")
    p.add_argument("--input-shards-dir", type=Path, required=True)
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--component", help="only this component (e.g. rocblas_lib)")
    p.add_argument("--verbose", action="store_true")
    return p


def usage_error(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 2


def recombine(args: argparse.Namespace) -> int:
    if not args.input_shards_dir.is_dir():
        return usage_error(f"Input shards directory is not a directory: {args.input_shards_dir}")
    if not args.config.is_file():
        return usage_error(f"Configuration file does not exist: {args.config}")
    banner("ARTIFACT RECOMBINATION")
    print(f"Input shards directory: {args.input_shards_dir}")
    print(f"Configuration: {args.config}")
    print(f"Output directory: {args.output_dir}")
    print()
    try:
        summary = kpack.recombine(
            args.input_shards_dir, args.config, args.output_dir, component=args.component
        )
    except kpack.ArtifactError as err:
        # kpack names the configuration file first when the configuration itself is wrong.
        if str(err).startswith(f"{os.fspath(args.config)}: "):
            return usage_error(f"Failed to load configuration: {err}")
        raise
    packages = 0
    for c in summary["components"]:
        print(f"Processing component: {c['component']}")
        print(f"  {c['component']}_generic (from {c['generic_from']})")
        packages += 1
        for g in c["groups"]:
            sources = ", ".join(f"{a} from {shard}" for a, shard in g["architectures"].items())
            print(f"  {g['artifact']}: {sources}")
            packages += 1
    print()
    closing(
        "RECOMBINATION SUMMARY",
        [f"Components: {len(summary['components'])}", f"Packages written: {packages}"],
        "✓ RECOMBINATION COMPLETED SUCCESSFULLY",
    )
    return 0


main = entry_point(parser, recombine)


if __name__ == "__main__":
    sys.exit(main())
