"""The reference's tools, one module each, run as ``python -m rocm_kpack.tools.<tool>``, as
``python path/to/rocm_kpack/tools/<tool>.py`` or as the console script
``rocm-kpack-<tool with - for _>``: ``split_artifacts``, ``recombine_artifacts``,
``verify_artifacts``, ``pack_tree``, ``kpack_tool``, ``kpack_binary``, ``verify_elf``,
``bulk_unbundle``, ``split_python_wheels``. What they share is in ``_common``."""
