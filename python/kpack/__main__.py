"""``python -m kpack``: the ``kpack`` command, the Rust binary the wheel installs beside this
package's interpreter, run with this process's arguments."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import NoReturn

from kpack._command import binary


def main() -> NoReturn:
    """Runs ``kpack`` with this process's arguments in place of this process (on POSIX, where
    exec keeps the pid, the terminal and the exit status), so it behaves as the binary does."""
    try:
        program = binary()
    except FileNotFoundError as err:
        sys.exit(f"kpack: error: {err}")
    argv = [program, *sys.argv[1:]]
    if os.name == "posix":
        os.execv(program, argv)
    sys.exit(subprocess.call(argv))


if __name__ == "__main__":
    main()
