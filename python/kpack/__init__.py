"""kpack: ROCm kernel packing from Python.

Takes AMD GPU device code out of host binaries, packs it per GPU architecture into
``.kpack`` archives, and splits and recombines TheRock build artifacts. The functions here
are the ``kpack`` subcommands of the same name and return what they print with ``--json``,
parsed (the same serialization, so the two cannot differ); the keyword arguments are the
command's options. Errors raise :class:`KpackError` subclasses carrying the message the
command prints.

>>> import kpack
>>> [r["kind"] for r in kpack.inspect("fixtures/bin/libtwo.so")]
['elf']
>>> with kpack.Archive("fixtures/vectors/test_noop.kpack") as archive:
...     archive.architectures
['gfx900', 'gfx906']

The ``kpack`` command itself is installed with the package (``python -m kpack`` runs it too).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Union, cast

from kpack import _native
from kpack._errors import (
    ArchiveError,
    ArtifactError,
    FormatError,
    InputError,
    IntegrityError,
    KpackError,
    TransformError,
    UsageError,
    VerificationError,
)
from kpack._native import Archive

__version__: str = _native.__version__

PathArg = Union[str, "os.PathLike[str]"]


def inspect(
    paths: Union[PathArg, Iterable[PathArg]], *, errors: str = "raise"
) -> List[Dict[str, Any]]:
    """Describes files as ``kpack inspect --json`` does: one dict per file (see docs/json.md
    for the schema), directories searched recursively in sorted order, files inside them
    that cannot hold device code left out.

    ``errors="raise"`` (the default) raises the error of the first file that cannot be
    inspected; ``errors="report"`` lists it instead as ``{"path", "kind": "error", "error",
    "details": {}, "totals": []}``, as the command does. A missing path always raises
    :class:`InputError`.
    """
    if errors not in ("raise", "report"):
        raise UsageError(f'errors must be "raise" or "report", not {errors!r}')
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    reports = json.loads(_native.inspect(list(paths), errors == "raise"))
    return cast(List[Dict[str, Any]], reports)


def split(
    input: PathArg,
    output: PathArg,
    *,
    component: Optional[str] = None,
    batch: bool = False,
    split_databases: Iterable[str] = (),
    compression: str = "zstd",
    level: Optional[int] = None,
    threads: int = 0,
    output_format: str = "dir",
) -> List[Dict[str, Any]]:
    """Splits a build artifact (``kpack split``): ``output/<component>_generic`` gets the host
    code and rewritten binaries, ``output/<component>_<processor>`` each GPU processor's
    archives and kernel-database files.

    Give ``component`` (the artifact's name stem) for one artifact, or ``batch=True`` to split
    every artifact under ``input``. ``split_databases`` names the kernel-database handlers to
    apply, in order (``rocblas``, ``hipblaslt``, ``hipsparselt``, ``aotriton``, ``miopen``,
    ``composablekernel``, ``hipkernelprovider``, ``hotswap_cache``). ``compression`` is
    ``"zstd"``, ``"none"`` (both archive format v1, what HIP runtimes read) or ``"unified"``
    (format v2, smaller; kpack's runtime only); ``level`` is the zstd level, 1 to 22, and by
    default the scheme's own, as for ``kpack --compression`` (3 for ``"zstd"``, 19 for
    ``"unified"``); ``threads=0`` uses one per core.
    ``input`` may be an artifact directory or a ``.tar.zst``/``.tar.xz`` of one;
    ``output_format="tar.zst"`` writes every artifact as a reproducible ``<name>.tar.zst``.

    Returns one summary per artifact split, as ``kpack split --json`` prints them.
    """
    summaries = json.loads(
        _native.split(
            input,
            output,
            component,
            batch,
            list(split_databases),
            compression,
            level,
            threads,
            output_format,
        )
    )
    return cast(List[Dict[str, Any]], summaries)


def recombine(
    shards: PathArg,
    config: PathArg,
    output: PathArg,
    *,
    component: Optional[str] = None,
    threads: int = 0,
    output_format: str = "dir",
    group_archives: bool = False,
    compression: str = "zstd",
    level: Optional[int] = None,
) -> Dict[str, Any]:
    """Recombines split shards (``kpack recombine``): each component's generic artifact
    from the primary shard and one ``<component>_<group>`` per architecture group of the
    packaging configuration ``config``, whose ``validation`` flags are enforced (a failed
    validation raises :class:`ArtifactError`). Shards may hold ``.tar.zst`` artifacts;
    ``output_format="tar.zst"`` writes every package as a ``<name>.tar.zst``.
    ``group_archives=True`` writes one archive per module and group with all of the group's
    targets (``compression``, ``level``), plus a relative link per target;
    ``compression="unified"`` implies it.

    Returns the summary ``kpack recombine --json`` prints.
    """
    summary = json.loads(
        _native.recombine(
            shards,
            config,
            output,
            component,
            threads,
            output_format,
            group_archives,
            compression,
            level,
        )
    )
    return cast(Dict[str, Any], summary)


def verify(
    artifacts: PathArg,
    *,
    original: Optional[PathArg] = None,
    threads: int = 0,
    check: bool = True,
) -> Dict[str, Any]:
    """Checks split or recombined artifacts (``kpack verify``); with ``original`` (the
    unsplit artifacts), that every original code object and file is recovered byte for byte.

    Returns the report ``kpack verify --json`` prints: each failure a dict with its ``kind``
    (``entry``, ``file`` or ``check``), its fields and the line printed (``message``). When it
    lists failures, ``check=True``
    (the default) raises :class:`VerificationError` (whose ``report`` is that report), as the
    command exits with status 1.
    """
    report: Dict[str, Any] = json.loads(_native.verify(artifacts, original, threads))
    failures = report["failures"]
    if check and failures:
        lines = "".join(f"\n  {f['message']}" for f in failures)
        raise VerificationError(
            f"{os.fspath(artifacts)}: {len(failures)} failures:{lines}", report
        )
    return report


def transform(
    input: PathArg,
    output: PathArg,
    kpack_dir: PathArg,
    *,
    name: Optional[str] = None,
    kernel_name: Optional[str] = None,
    search_paths: Iterable[str] = (),
    compression: str = "zstd",
    level: Optional[int] = None,
) -> Dict[str, Any]:
    """Turns a fat binary into a host-only binary at ``output`` plus one archive per GPU
    target, ``kpack_dir/<name>_<target>.kpack`` (``kpack transform``). ``output`` may be
    ``input`` itself. ``name`` is the archive group (default: the output's file name up to
    its first ``.``), ``kernel_name`` the marker's kernel name (default: the output's file
    name), ``search_paths`` the marker's search paths (default: ``kpack_dir`` relative to the
    output). An input that is already kpacked, or a separated debug file, is left unchanged.

    Returns the report ``kpack transform --json`` prints: ``{"status": "transformed", ...}``
    with the summary, ``{"status": "already-kpacked", "input": ...}``, or
    ``{"status": "debug-only", "input": ...}`` for a separated debug file (no device code;
    nothing is written).
    """
    report = json.loads(
        _native.transform(
            input,
            output,
            kpack_dir,
            name,
            kernel_name,
            list(search_paths),
            compression,
            level,
        )
    )
    return cast(Dict[str, Any], report)


def prune(
    paths: Union[PathArg, Iterable[PathArg]],
    output: PathArg,
    *,
    keep: Iterable[str] = (),
    drop: Iterable[str] = (),
    allow_empty: bool = False,
) -> Dict[str, Any]:
    """Keeps only some GPU targets' device code in fat binaries, which stay fat
    (``kpack prune``). ``output`` is a file for one input file, a tree for one directory (its
    fat binaries pruned, the kernel-database files of dropped targets left out, everything
    else copied), a directory holding each input under its name for several.

    Give ``keep`` (``"gfx90a"`` keeps every variant of the processor, ``"gfx90a:xnack-"``
    that variant and the code objects that run on it) or ``drop`` (``"gfx90a"`` every
    variant, ``"gfx90a:xnack+"`` exactly that one), not both. A target no input holds, or a
    binary left without device code (unless ``allow_empty``), raises :class:`UsageError`,
    and nothing is written.

    Returns the report ``kpack prune --json`` prints: ``{"files": [...], "kept": [...],
    "dropped": [...]}``.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    report = json.loads(_native.prune(list(paths), output, list(keep), list(drop), allow_empty))
    return cast(Dict[str, Any], report)


def restore(
    input: PathArg,
    output: PathArg,
    *,
    kpack_dirs: Iterable[PathArg] = (),
    targets: Iterable[str] = (),
    compress: bool = False,
) -> Dict[str, Any]:
    """Turns a kpacked binary back into a fat binary at ``output`` (``kpack restore``): each
    wrapper points again at a bundle rebuilt from the archives its marker finds (as the
    runtime looks them up), or in ``kpack_dirs`` instead; ``targets`` narrows the targets
    (``gfx90a`` selects every variant; default: every target found); ``compress`` writes
    CCOB v3 bundles. A missing archive or entry raises :class:`ArchiveError` naming the
    wrapper, the target and the paths searched, and nothing is written.

    Returns the summary ``kpack restore --json`` prints.
    """
    summary = json.loads(
        _native.restore(input, output, list(kpack_dirs), list(targets), compress)
    )
    return cast(Dict[str, Any], summary)


def split_wheel(
    wheel: PathArg,
    output: PathArg,
    *,
    device_package_prefix: Optional[str] = None,
    overlay_root: Optional[str] = None,
    device_requires_dist: Iterable[str] = (),
    split_databases: Iterable[str] = (),
    output_format: str = "wheel",
    variants: bool = False,
    variant_label: str = "variant",
    compression: str = "zstd",
    level: Optional[int] = None,
    multi_target_archives: bool = False,
    threads: int = 0,
) -> Dict[str, Any]:
    """Splits a fat Python wheel (``kpack split-wheel``; a ``.whl`` or an unpacked wheel
    directory) into ``output``: a host wheel (same name, version and tags, every fat binary
    rewritten to load its device code from ``<overlay_root>/.kpack/``, ``device-<key>`` extras
    in its METADATA) and one device wheel per GPU target, sub-family and family.

    ``device_package_prefix`` defaults to ``<name>-device`` and ``overlay_root`` to the one
    top-level package holding the fat binaries; ``device_requires_dist`` entries may contain
    ``@GFXARCH@``; ``split_databases`` names the kernel-database handlers, as for :func:`split`.
    ``output_format`` is ``"wheel"`` or ``"directory"`` (unpacked wheels); ``variants=True``
    also writes the PEP 817/825 variant copy of the host wheel, named like the host wheel
    with ``-<variant_label>`` before ``.whl``; ``multi_target_archives=True`` puts one archive
    per module in each device wheel, indexed by the host wheel. ``threads=0`` uses one worker
    per core (``kpack --threads``). A hostile or broken wheel raises :class:`FormatError`
    naming the entry, and nothing is written.

    Returns the summary ``kpack split-wheel --json`` prints.
    """
    summary = json.loads(
        _native.split_wheel(
            wheel,
            output,
            device_package_prefix,
            overlay_root,
            list(device_requires_dist),
            list(split_databases),
            output_format,
            variants,
            variant_label,
            compression,
            level,
            multi_target_archives,
            threads,
        )
    )
    return cast(Dict[str, Any], summary)


__all__ = [
    "Archive",
    "ArchiveError",
    "ArtifactError",
    "FormatError",
    "InputError",
    "IntegrityError",
    "KpackError",
    "TransformError",
    "UsageError",
    "VerificationError",
    "__version__",
    "inspect",
    "prune",
    "recombine",
    "restore",
    "split",
    "split_wheel",
    "transform",
    "verify",
]
