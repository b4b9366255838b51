"""``verify_artifacts``: the reference's split-artifact checks, in its report format, done
with kpack: binaries classified by kpack's parser (not by ``readelf``'s columns), every
archive of every artifact read through its digests, architectures compared whole (``gfx90a``
stays ``gfx90a``), and kpack's own checks (:func:`kpack.verify`: markers resolve, packages
install side by side, indexes agree) as a fifth check. Exit status 0 when every check
passes, 1 when one fails, 2 when the checks cannot run."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import kpack
from rocm_kpack.tools._common import (
    add_toolchain_flags,
    banner,
    entry_point,
    megabytes,
    tool_parser,
)

RECORD = "kpack_artifact.json"


class Report:
    """The checks run so far, printed as the reference prints them."""

    def __init__(self) -> None:
        self.results: List[Tuple[str, bool, str]] = []

    def check(
        self, name: str, passed: bool, summary: str, details: List[str], show: bool = True
    ) -> None:
        print(f"CHECK: {name}")
        print("-" * 70)
        print(f"{'✓' if passed else '✗'} {summary}\n")
        if details and (show or not passed):
            for line in details:
                print(line)
            print()
        self.results.append((name, passed, summary))

    def skip(self, name: str, why: str) -> None:
        print(f"CHECK: {name}")
        print("-" * 70)
        print(f"⊘ {why}\n")
        self.results.append((name, True, why))

    def finish(self) -> bool:
        banner("VERIFICATION SUMMARY")
        failed = [r for r in self.results if not r[1]]
        for name, passed, summary in self.results:
            print(f"{'✓' if passed else '✗'} {name}: {summary}")
        print()
        print(f"Total checks: {len(self.results)}")
        print(f"Passed: {len(self.results) - len(failed)}")
        print(f"Failed: {len(failed)}")
        print()
        if failed:
            print("✗ VERIFICATION FAILED")
            print(f"  {len(failed)} check(s) failed")
        else:
            print("✓ ALL CHECKS PASSED")
        print()
        return not failed


def is_generic(artifact: Path) -> bool:
    return artifact.name.endswith("_generic")


def files_named(artifact: Path, suffix: str) -> Iterator[Path]:
    """Regular files (not symlinks) under `artifact` ending in `suffix`, sorted."""
    for root, dirs, files in os.walk(artifact):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if name.endswith(suffix) and not path.is_symlink():
                yield path


def manifests(report: Report, artifacts: List[Path], verbose: bool) -> None:
    details, ok = [], True
    for a in artifacts:
        try:
            lines = (a / "artifact_manifest.txt").read_text().splitlines()
            details.append(f"  ✓ {a.name}: {sum(1 for line in lines if line.strip())} prefixes")
        except (OSError, UnicodeDecodeError) as err:
            details.append(f"  ✗ {a.name}: artifact_manifest.txt: {err}")
            ok = False
    report.check(
        "Artifact Manifests",
        ok,
        "All artifacts have valid manifests" if ok else "Some manifests missing or invalid",
        details,
        show=verbose,
    )


def conversion(report: Report, artifacts: List[Path]) -> None:
    """Every linked binary of a generic artifact is kpacked or host-only. Relocatable objects
    and static libraries keep their device code by design (they are linked later)."""
    generic = [a for a in artifacts if is_generic(a)]
    if not generic:
        report.skip("Fat Binary Conversion", "No generic artifact found, skipping fat binary check")
        return
    details, ok = [], True
    for a in generic:
        converted, host_only, failed = [], [], []
        for r in kpack.inspect(a, errors="report"):
            path = Path(r["path"])
            rel = path.relative_to(a)
            if r["kind"] == "error":
                failed.append(f"    ✗ {rel} - {r['error']}")
                continue
            if r["kind"] not in ("elf", "pe") or r["details"]["elf_type"] == "relocatable":
                continue
            size = f"({megabytes(path.stat().st_size):.1f}M)"
            state = r["details"]["state"]
            if state == "kpacked":
                converted.append(f"    ✓ {rel} {size}")
            elif state == "fat":
                failed.append(f"    ✗ {rel} {size} - still holds device code")
            else:
                host_only.append(f"    • {rel} {size}")
        ok = ok and not failed
        details.append(f"  {a.name}: {len(converted)} converted, {len(host_only)} host-only, "
                       f"{len(failed)} failed")
        for title, lines in (("Converted (fat → host-only)", converted),
                             ("Host-only (no device code)", host_only),
                             ("Failed conversions", failed)):
            if lines:
                details += [f"  {title}:", *lines]
    report.check(
        "Fat Binary Conversion",
        ok,
        "All fat binaries converted" if ok else "Some binaries still hold device code",
        details,
    )


def expected_architectures(artifact: Path) -> List[str]:
    """The processors an arch or group artifact is for: kpack's record of it, else the
    suffix of its name (`blas_lib_gfx90a` is gfx90a, whole)."""
    try:
        record = json.loads((artifact / RECORD).read_text())
        return [arch.split(":")[0] for arch in record["architectures"]]
    except (OSError, ValueError, KeyError):
        return [artifact.name.rsplit("_", 1)[-1]]


def separation(report: Report, artifacts: List[Path]) -> None:
    arch_artifacts = [a for a in artifacts if not is_generic(a)]
    if not arch_artifacts:
        report.skip("Architecture Separation", "No architecture-specific artifacts found")
        return
    details, ok = [], True
    for a in arch_artifacts:
        expected = expected_architectures(a)
        archives = list(files_named(a, ".kpack"))
        foreign = []
        for path in archives:
            try:
                with kpack.Archive(path) as archive:
                    arches = archive.architectures
            except kpack.KpackError:
                continue  # reported by the archive check
            foreign += [(path, arch) for arch in arches if arch.split(":")[0] not in expected]
        if foreign:
            ok = False
            details.append(f"  ✗ {a.name}: {len(foreign)} targets of other architectures")
            details += [f"      - {p.relative_to(a)} holds {arch}" for p, arch in foreign]
        else:
            details.append(f"  ✓ {a.name}: all archives hold {', '.join(expected)} "
                           f"(checked {len(archives)} archives)")
    report.check(
        "Architecture Separation",
        ok,
        "All archs separated" if ok else "Architecture cross-contamination detected",
        details,
    )


def archives(report: Report, artifacts: List[Path], damage: Dict[Path, List[str]]) -> None:
    """Every archive anywhere in an artifact (the reference looks only at the old
    `kpack/stage/.kpack/`): its table of contents, and every entry as kpack verify read it
    through its digest (`damage`: the problems it found, by archive)."""
    details, ok = [], True
    for a in artifacts:
        for path in files_named(a, ".kpack"):
            rel = path.relative_to(a)
            try:
                with kpack.Archive(path) as archive:
                    archive.validate()
                    kernels = len(archive)
            except kpack.KpackError as err:
                problems = [str(err)]
            else:
                problems = damage.get(path.resolve(), [])
            if problems:
                details += [f"  ✗ {a.name}: {rel} invalid: {p}" for p in problems]
                ok = False
                continue
            details.append(f"  ✓ {a.name}: {rel} ({megabytes(path.stat().st_size):.1f}MB, "
                           f"{kernels} kernels)")
    if not details:
        report.skip("Kpack Archives", "No kpack archives found")
        return
    report.check(
        "Kpack Archives",
        ok,
        "All kpack archives are valid" if ok else "Some kpack archives are invalid",
        details,
    )


def kpack_checks(report: Report, result: Dict[str, Any]) -> None:
    details = [f"  ✗ {f['message']}" for f in result["failures"]]
    details += [f"  ! {p}: no digests (entries decoded, not proven intact)"
                for p in result["unproven"]]
    ok = not result["failures"]
    report.check(
        "kpack verify",
        ok,
        f"{result['artifacts']} artifacts, {result['binaries']} binaries, "
        f"{result['archives']} archives, {result['entries']} entries: "
        + ("markers resolve, packages install side by side" if ok
           else f"{len(result['failures'])} failures"),
        details,
    )


def damaged_archives(result: Dict[str, Any]) -> Dict[Path, List[str]]:
    """kpack verify's failures of archive entries and files, by archive."""
    damage: Dict[Path, List[str]] = {}
    for f in result["failures"]:
        if f["kind"] in ("entry", "file"):
            entry = f"entry {f['binary']} for {f['arch']}: " if f["kind"] == "entry" else ""
            damage.setdefault(Path(f["file"]).resolve(), []).append(entry + f["problem"])
    return damage


def verify(args: argparse.Namespace) -> int:
    if not args.artifacts_dir.is_dir():
        print(f"Error: Artifacts directory is not a directory: {args.artifacts_dir}",
              file=sys.stderr)
        return 2
    banner("ARTIFACT VERIFICATION")
    print(f"Artifacts directory: {args.artifacts_dir}\n")
    artifacts = sorted(d for d in args.artifacts_dir.iterdir() if d.is_dir())
    report = Report()
    if not artifacts:
        report.check("Artifacts", False, f"No artifacts found in {args.artifacts_dir}", [])
        report.finish()
        return 1
    print(f"Found {len(artifacts)} artifacts:")
    for a in artifacts:
        print(f"  - {a.name}")
    print()
    # kpack's checks run first: they read every archive entry through its digest once, and
    # the archive check reports what they found.
    result = kpack.verify(args.artifacts_dir, check=False)
    manifests(report, artifacts, args.verbose)
    conversion(report, artifacts)
    separation(report, artifacts)
    archives(report, artifacts, damaged_archives(result))
    kpack_checks(report, result)
    return 0 if report.finish() else 1


def parser() -> argparse.ArgumentParser:
    p = tool_parser("Verify split artifacts")
    p.add_argument("--artifacts-dir", type=Path, required=True)
    p.add_argument("--verbose", action="store_true")
    add_toolchain_flags(p)
    return p


main = entry_point(parser, verify)


if __name__ == "__main__":
    sys.exit(main())
