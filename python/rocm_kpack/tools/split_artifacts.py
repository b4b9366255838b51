"""``split_artifacts``: the reference's artifact splitter (the map step) over
:func:`kpack.split`. Both generations of its flags: ``--artifact-dir``/``--artifact-prefix``
or ``--batch-artifact-parent-dir``, and the older walkthroughs' ``--input-dir``/
``--component-name``. Exit status 0, or 1 on any error (2 for argparse's usage errors)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import kpack
from rocm_kpack.tools._common import (
    HANDLERS,
    add_toolchain_flags,
    banner,
    closing,
    entry_point,
    fail,
    tool_parser,
    use_tmp_dir,
)


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Split TheRock artifacts into generic and architecture-specific artifacts")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--artifact-dir",
        "--input-dir",
        dest="artifact_dir",
        type=Path,
        help="one artifact: a directory holding artifact_manifest.txt, or its .tar.zst",
    )
    mode.add_argument(
        "--batch-artifact-parent-dir",
        type=Path,
        help="every artifact in this directory (those named *_generic skipped)",
    )
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument(
        "--artifact-prefix",
        "--component-name",
        dest="artifact_prefix",
        help="the component (blas_lib of blas_lib_gfx110X); required with --artifact-dir, "
        "refused with --batch-artifact-parent-dir",
    )
    p.add_argument("--split-databases", nargs="+", choices=HANDLERS, default=None)
    p.add_argument("--tmp-dir", type=Path, default=Path(tempfile.gettempdir()))
    p.add_argument("--verbose", action="store_true")
    add_toolchain_flags(p)
    return p


def print_artifacts(summary: Dict[str, Any]) -> None:
    for a in summary["artifacts"]:
        print(f"    {a['name']} ({a['files']} files, {a['archives']} archives)")


def split(args: argparse.Namespace) -> int:
    batch = args.batch_artifact_parent_dir is not None
    if batch and args.artifact_prefix:
        return fail("--artifact-prefix cannot be used with --batch-artifact-parent-dir")
    if not batch and not args.artifact_prefix:
        return fail("--artifact-prefix is required with --artifact-dir")
    use_tmp_dir(args.tmp_dir, args.verbose)
    handlers: List[str] = args.split_databases or []
    if args.verbose:
        print(
            f"Database handlers enabled: {', '.join(handlers)}"
            if handlers
            else "Database splitting disabled (use --split-databases to enable)"
        )
    if not batch:
        print(f"Splitting artifact: {args.artifact_dir}")
        print(f"Artifact prefix: {args.artifact_prefix}")
        print(f"Output directory: {args.output_dir}")
        [summary] = kpack.split(
            args.artifact_dir,
            args.output_dir,
            component=args.artifact_prefix,
            split_databases=handlers,
        )
        print_artifacts(summary)
        print("Splitting complete!")
        return 0

    banner("BATCH ARTIFACT SPLITTING")
    print(f"Shard directory: {args.batch_artifact_parent_dir}")
    print(f"Output directory: {args.output_dir}")
    print()
    # kpack's batch is all or nothing: one failure is the run's error, and nothing is written.
    summaries = kpack.split(
        args.batch_artifact_parent_dir, args.output_dir, batch=True, split_databases=handlers
    )
    for i, summary in enumerate(summaries, 1):
        print(f"[{i}] {Path(summary['input']).name} (artifact_prefix: {summary['component']})")
        print_artifacts(summary)
        print("    ✓ Success")
    print()
    closing(
        "BATCH SPLITTING SUMMARY",
        [f"Processed: {len(summaries)}", f"Successful: {len(summaries)}", "Failed: 0"],
        "✓ BATCH SPLITTING COMPLETED SUCCESSFULLY",
    )
    return 0


main = entry_point(parser, split)


if __name__ == "__main__":
    sys.exit(main())
