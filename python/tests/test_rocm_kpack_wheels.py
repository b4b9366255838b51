"""`python -m rocm_kpack.tools.split_python_wheels`, with the flags TheRock's workflows pass,
on the repository's fat sample wheel: the wheels kpack's own API writes, installed side by
side they hold every original code object, and the reference's exit statuses."""

from __future__ import annotations

import zipfile
from pathlib import Path

import kpack
from conftest import code_objects, fixture, run_kpack, run_tool

WHEEL = "wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl"
HOST = "kpack_demo-1.0-py3-none-linux_x86_64.whl"
TORCH_FAT = ["rocblas", "hipblaslt", "hipsparselt", "aotriton", "miopen"]
DB_FILE = "kpack_demo/lib/rocblas/library/TensileLibrary_gfx1030.co"


def split(out: Path, *more: str):
    # TheRock's torch invocation (multi_arch_build_portable_linux_pytorch_wheels.yml).
    return run_tool(
        "split_python_wheels", "--input", fixture(WHEEL), "--output-dir", out,
        "--device-package-prefix", "kpack-demo-device", "--overlay-root", "kpack_demo/",
        "--device-requires-dist", "rocm-sdk-device-@GFXARCH@ == 7.1.0", "--compression", "zstd",
        *more,
    )


def test_therocks_command_line_writes_kpacks_wheels_which_lose_no_code_object(tmp_path):
    out = tmp_path / "dist"
    run = split(out, "--wheel-type", "torch-fat", "-j", "2")
    assert run.returncode == 0, run.stderr
    assert "Fat binaries processed: 3" in run.stdout
    assert f"Host wheel: {out / HOST}" in run.stdout
    # The same wheels, byte for byte, as kpack's API writes for the same options.
    api = tmp_path / "api"
    kpack.split_wheel(fixture(WHEEL), api, device_package_prefix="kpack-demo-device",
                      overlay_root="kpack_demo/", split_databases=TORCH_FAT,
                      device_requires_dist=["rocm-sdk-device-@GFXARCH@ == 7.1.0"])
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in api.iterdir())
    for name in names:
        assert (out / name).read_bytes() == (api / name).read_bytes(), name
    assert "kpack_demo_device_gfx1030-1.0-py3-none-linux_x86_64.whl" in names
    with zipfile.ZipFile(out / "kpack_demo_device_gfx1030-1.0-py3-none-linux_x86_64.whl") as z:
        metadata = z.read("kpack_demo_device_gfx1030-1.0.dist-info/METADATA").decode()
        assert "Requires-Dist: rocm-sdk-device-gfx1030 == 7.1.0" in metadata
        assert DB_FILE in z.namelist()  # torch-fat's rocblas handler moved it here

    # Installed side by side (host + every device wheel), every marker resolves and every
    # archive entry checks out; each host binary restored from the archives gives back the
    # fat wheel's code objects byte for byte.
    installed, original = tmp_path / "installed", tmp_path / "original"
    for name in names:
        with zipfile.ZipFile(out / name) as z:
            z.extractall(installed)
    with zipfile.ZipFile(fixture(WHEEL)) as z:
        z.extractall(original)
    check = run_kpack("verify", installed)
    assert check.returncode == 0, check.stdout + check.stderr
    fat = [r["path"] for r in kpack.inspect(original) if r["details"].get("state") == "fat"]
    assert len(fat) == 3
    (tmp_path / "restored").mkdir()
    for path in map(Path, fat):
        rel = path.relative_to(original)
        restored = tmp_path / "restored" / rel.name
        kpack.restore(installed / rel, restored)
        objects = code_objects(path, tmp_path / "o")
        assert objects and code_objects(restored, tmp_path) == objects, rel


def test_variant_label_and_empty_databases_are_honoured(tmp_path):
    out = tmp_path / "dist"
    run = split(out, "--wheel-type", "torch-fat", "--databases", "--generate-variant-wheel",
                "--variant-label", "amd")
    assert run.returncode == 0, run.stderr
    variant = out / "kpack_demo-1.0-py3-none-linux_x86_64-amd.whl"
    assert f"Variant wheel: {variant}" in run.stdout
    with zipfile.ZipFile(variant) as z:
        assert "kpack_demo-1.0.dist-info/variant.json" in z.namelist()
    # `--databases` with no names disables the handlers, even with --wheel-type.
    with zipfile.ZipFile(out / HOST) as z:
        assert DB_FILE in z.namelist()


def test_split_python_wheels_exit_statuses_are_the_references(tmp_path):
    missing = split(tmp_path / "a", "--input", tmp_path / "none.whl")
    assert missing.returncode == 1 and "Error: Input does not exist" in missing.stderr
    usage = run_tool("split_python_wheels", "--input", fixture(WHEEL), "--output-dir", tmp_path)
    assert usage.returncode == 2 and "--device-package-prefix" in usage.stderr
    bogus = tmp_path / "bogus-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bogus, "w") as z:
        z.writestr("bogus/__init__.py", "")
    broken = split(tmp_path / "b", "--input", bogus)
    assert broken.returncode == 1 and "not a wheel" in broken.stderr
    assert "Traceback" not in broken.stderr
    unknown = split(tmp_path / "c", "--databases", "tensorflow")
    assert unknown.returncode == 1 and "tensorflow" in unknown.stderr
    for out in ("a", "b", "c"):
        assert not (tmp_path / out).exists()
