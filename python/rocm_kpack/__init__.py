"""rocm_kpack: the command lines of ROCm's reference ``rocm-kpack``, run by kpack.

A team whose scripts call ``python -m rocm_kpack.tools.split_artifacts …`` (TheRock's CI,
the reference's walkthroughs) switches to kpack by installing the ``kpack`` package: each
module of :mod:`rocm_kpack.tools` takes the reference tool's flags and exits with its
statuses, and does the work with kpack's own API (:mod:`kpack`) or the ``kpack`` command
run in this process. There is no second implementation here; where the reference has a
known bug, kpack's result is the right one. Which tools, which flags, and where the output
differs from the reference's: docs/reference-commands.md.
"""
