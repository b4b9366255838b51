"""``python -m kpack`` and the ``kpack`` command: the command line of the Rust ``kpack``
binary, run in this process."""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

from kpack import _native


def main() -> NoReturn:
    """Runs ``kpack`` with this process's arguments and exits with its status."""
    # Behave as the native binary does: a closed pipe (`kpack inspect ... | head`) and
    # Ctrl-C end the process quietly instead of surfacing in Python.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_native.main(["kpack", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
