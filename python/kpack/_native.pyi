"""Type stubs of the native module (``kpack._native``); use :mod:`kpack`, not this module."""

import os
from types import TracebackType
from typing import List, Optional, Tuple, Type, Union, final

_Path = Union[str, "os.PathLike[str]"]

__version__: str

def inspect(paths: List[_Path], raise_errors: bool) -> str: ...
def split(
    input: _Path,
    output: _Path,
    component: Optional[str],
    batch: bool,
    split_databases: List[str],
    compression: str,
    level: Optional[int],
    threads: int,
    output_format: str,
) -> str: ...
def recombine(
    shards: _Path,
    config: _Path,
    output: _Path,
    component: Optional[str],
    threads: int,
    output_format: str,
    group_archives: bool,
    compression: str,
    level: Optional[int],
) -> str: ...
def verify(artifacts: _Path, original: Optional[_Path], threads: int) -> str: ...
def transform(
    input: _Path,
    output: _Path,
    kpack_dir: _Path,
    name: Optional[str],
    kernel_name: Optional[str],
    search_paths: List[str],
    compression: str,
    level: Optional[int],
) -> str: ...
def prune(
    paths: List[_Path],
    output: _Path,
    keep: List[str],
    drop: List[str],
    allow_empty: bool,
) -> str: ...
def restore(
    input: _Path,
    output: _Path,
    kpack_dirs: List[_Path],
    targets: List[str],
    compress: bool,
) -> str: ...
def split_wheel(
    wheel: _Path,
    output: _Path,
    device_package_prefix: Optional[str],
    overlay_root: Optional[str],
    device_requires_dist: List[str],
    split_databases: List[str],
    output_format: str,
    variants: bool,
    variant_label: str,
    compression: str,
    level: Optional[int],
    multi_target_archives: bool,
    threads: int,
) -> str: ...

@final
class Archive:
    """A ``.kpack`` archive open for reading (memory-mapped; opening reads only its table of
    contents). Use it as a context manager, or call :meth:`close`; every use after closing
    raises :class:`ValueError`."""

    def __new__(cls, path: _Path) -> Archive: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def group_name(self) -> str: ...
    @property
    def gfx_arch_family(self) -> str: ...
    @property
    def architectures(self) -> List[str]: ...
    @property
    def compression_scheme(self) -> str: ...
    @property
    def binaries(self) -> List[str]: ...
    @property
    def entries(self) -> List[Tuple[str, str, int]]: ...
    def __contains__(self, key: Tuple[str, str], /) -> bool: ...
    def __len__(self) -> int: ...
    def get(self, binary: str, arch: str) -> bytes: ...
    def validate(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Archive": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
