"""The exceptions kpack raises.

Every one is a :class:`KpackError`; its message is the one the ``kpack`` command prints
after ``kpack: error:`` and names the file (and, for malformed input, the byte offset and
what was expected). The class says what went wrong, by the deepest cause kpack knows: a
missing file is an :class:`InputError` whichever function met it, a corrupt offload bundle a
:class:`FormatError`.
"""

from __future__ import annotations

from typing import Any


class KpackError(Exception):
    """Base class of every error kpack raises."""


class InputError(KpackError, OSError):
    """A file could not be read or written (a missing input, a permission, a full disk)."""


class FormatError(KpackError, ValueError):
    """An input is malformed: an ELF file, an ``ar`` archive, a clang offload bundle, a
    compressed (CCOB) bundle or a code object."""


class ArchiveError(KpackError):
    """A ``.kpack`` archive is malformed, or has no entry for the binary and architecture
    asked for."""


class IntegrityError(ArchiveError):
    """A ``.kpack`` archive is damaged: a code object or the table of contents read from it
    does not match the digest the archive stores (``KPACK_ERROR_INTEGRITY_CHECK_FAILED`` in
    the C library). The message names the file, the entry and the byte offset."""


class TransformError(KpackError):
    """A fat binary cannot be turned into a host-only binary (the rewrite or its verifier
    refused it)."""


class ArtifactError(KpackError):
    """A build artifact, its manifest, its record or the packaging configuration is wrong, or
    a recombine validation failed."""


class VerificationError(ArtifactError):
    """:func:`kpack.verify` found failures; :attr:`report` is the whole report (the JSON of
    ``kpack verify --json``)."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


class UsageError(KpackError, ValueError):
    """An argument is invalid (an unknown compression or database handler, options that
    exclude each other)."""


__all__ = [
    "KpackError",
    "InputError",
    "FormatError",
    "ArchiveError",
    "IntegrityError",
    "TransformError",
    "ArtifactError",
    "VerificationError",
    "UsageError",
]
