"""Where the ``kpack`` binary is: the wheel ships it as its script (``kpack-<version>.data/
scripts/kpack``, installed where the environment's commands go), not as a Python console
script. maturin builds one crate into a wheel (PyO3/maturin#368), so ``scripts/wheel.sh``
builds the binary first and the wheel carries both it and ``kpack._native``: the command
is the CLI itself, and the native module needs none of the CLI's code (docs/python.md)."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path


def binary() -> str:
    """The path of the installed ``kpack`` binary, found through the distribution's RECORD,
    so that it is this package's whatever the install scheme (venv, ``--user``,
    ``--prefix``) and whatever ``PATH`` holds. Raises ``FileNotFoundError`` when this
    install has none (a wheel built by ``maturin`` alone, without ``scripts/wheel.sh``)."""
    name = "kpack.exe" if os.name == "nt" else "kpack"
    for entry in importlib.metadata.files("kpack") or []:
        if entry.name == name and entry.parent.name in ("bin", "Scripts"):
            path = Path(str(entry.locate())).resolve()
            if path.is_file():
                return str(path)
    raise FileNotFoundError(
        "this kpack install has no kpack binary (build the wheel with scripts/wheel.sh)"
    )
