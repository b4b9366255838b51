"""`kpack.transform` on a real fat library, and `kpack.Archive` against the reference vectors
(fixtures/vectors/README.md lists their entries) and transform's own archives."""

from __future__ import annotations

import hashlib

import kpack
import pytest
from conftest import fixture, run_kpack, truncated

# (binary, arch, size, sha256 prefix) in table-of-contents order, from fixtures/vectors/README.md.
NOOP = [
    ("lib/libtest.so#0", "gfx900", 119, "df6b1ab7c33ae62f"),
    ("lib/libtest.so#0", "gfx906", 219, "12b6177c7d7619c6"),
    ("bin/testapp#0", "gfx900", 168, "77033f5412bc6d7b"),
]
ZSTD = [
    ("lib/libhip.so#0", "gfx1100", 1019, "11590fafe2ba03e4"),
    ("lib/libhip.so#0", "gfx1101", 619, "9f8e72947f029de7"),
    ("bin/hiptest#0", "gfx1100", 1018, "cb26f71dee1b9421"),
]


@pytest.mark.parametrize(
    "name, group, family, arches, scheme, binaries, expected",
    [
        ("test_noop.kpack", "test", "gfx900X", ["gfx900", "gfx906"], "none",
         ["lib/libtest.so#0", "bin/testapp#0"], NOOP),
        ("test_zstd.kpack", "test", "gfx110X", ["gfx1100", "gfx1101"], "zstd-per-kernel",
         ["lib/libhip.so#0", "bin/hiptest#0"], ZSTD),
    ],
)
def test_archive_reads_the_reference_vectors_as_listed(name, group, family, arches, scheme, binaries, expected):
    with kpack.Archive(fixture(f"vectors/{name}")) as archive:
        assert archive.group_name == group
        assert archive.gfx_arch_family == family
        assert archive.architectures == arches
        assert archive.compression_scheme == scheme
        assert archive.binaries == binaries
        assert archive.entries == [(b, a, size) for b, a, size, _ in expected]
        assert len(archive) == len(expected)
        for binary, arch, size, sha in expected:
            assert (binary, arch) in archive
            data = archive.get(binary, arch)
            assert isinstance(data, bytes) and len(data) == size
            assert hashlib.sha256(data).hexdigest()[:16] == sha, (binary, arch)
        archive.validate()


def test_archive_get_of_a_missing_entry_raises_archive_error_naming_it():
    with kpack.Archive(fixture("vectors/test_noop.kpack")) as archive:
        assert ("bin/testapp#0", "gfx906") not in archive
        with pytest.raises(kpack.ArchiveError, match="gfx906"):
            archive.get("bin/testapp#0", "gfx906")
        assert archive.get("lib/libtest.so#0", "gfx900").startswith(b"KERNEL1_GFX900_DATA")


def test_archive_closes_with_its_context_and_refuses_use_after_close():
    with kpack.Archive(fixture("vectors/test_noop.kpack")) as archive:
        assert not archive.closed
    assert archive.closed
    for use in (lambda: archive.binaries, lambda: archive.architectures,
                lambda: archive.get("bin/testapp#0", "gfx900"), lambda: len(archive)):
        with pytest.raises(ValueError, match="closed"):
            use()
    archive.close()  # closing twice is harmless
    with pytest.raises(ValueError):
        with archive:
            pass


def test_archive_of_a_truncated_or_missing_file_raises_naming_it(tmp_path):
    cut = truncated(tmp_path, "vectors/test_noop.kpack", 600)
    with pytest.raises(kpack.ArchiveError) as err:
        kpack.Archive(cut).validate()
    assert str(cut) in str(err.value)
    missing = tmp_path / "none.kpack"
    with pytest.raises(kpack.InputError, match="none.kpack"):
        kpack.Archive(missing)


def test_archive_of_a_damaged_file_raises_integrity_error_naming_file_entry_and_offset(tmp_path):
    intact = tmp_path / "intact.kpack"
    out = run_kpack("pack", fixture("modern/libmodern_wide_v3.so"), "-o", intact, "--compression", "none")
    assert out.returncode == 0, out.stderr
    with kpack.Archive(intact) as archive:
        binary, arch, _ = archive.entries[0]
        code_object = archive.get(binary, arch)
    # Scheme `none` stores the code object as it is: one bit flipped in its middle.
    data = bytearray(intact.read_bytes())
    at = data.find(code_object)
    assert at > 0 and data.find(code_object, at + 1) == -1
    data[at + len(code_object) // 2] ^= 0x10
    damaged = tmp_path / "damaged.kpack"
    damaged.write_bytes(data)
    with kpack.Archive(damaged) as archive:
        with pytest.raises(kpack.IntegrityError) as err:
            archive.get(binary, arch)
        # validate() reads every entry: the damage is found without asking for it.
        with pytest.raises(kpack.IntegrityError, match=f"at byte {at}"):
            archive.validate()
    for part in (str(damaged), binary, arch, f"at byte {at}"):
        assert part in str(err.value)
    assert isinstance(err.value, kpack.ArchiveError)

    # A bit flipped in the table of contents: the archive fails at open.
    data = bytearray(intact.read_bytes())
    data[int.from_bytes(data[8:16], "little") + 20] ^= 0x10
    damaged.write_bytes(data)
    with pytest.raises(kpack.IntegrityError, match="TOC at byte"):
        kpack.Archive(damaged)


def test_transform_writes_a_host_only_binary_and_archives_holding_every_code_object(tmp_path):
    source = fixture("bin/libtwo.so")
    output = tmp_path / "lib" / "libtwo.so"
    output.parent.mkdir()
    report = kpack.transform(source, output, tmp_path / "lib" / ".kpack")
    assert report["status"] == "transformed"
    assert report["code_objects"] > 0 and report["output_size"] < report["input_size"]
    [after] = kpack.inspect(output)
    assert after["details"]["state"] == "kpacked"

    # Every code object of the input is in the archive of its target, byte for byte.
    [before] = kpack.inspect(source)
    totals = {t["target"]: (t["count"], t["bytes"]) for t in before["totals"]}
    seen = {}
    for written in report["archives"]:
        with kpack.Archive(written["path"]) as archive:
            for binary, arch, size in archive.entries:
                assert len(archive.get(binary, arch)) == size
                count, total = seen.get(arch, (0, 0))
                seen[arch] = (count + 1, total + size)
    assert seen == totals

    again = kpack.transform(output, tmp_path / "again.so", tmp_path / "k2")
    assert again == {"status": "already-kpacked", "input": str(output)}
    assert not (tmp_path / "again.so").exists()


def test_transform_of_a_corrupt_binary_raises_naming_it_and_writes_nothing(tmp_path):
    cut = truncated(tmp_path, "bin/libone.so", 30000)
    out = tmp_path / "out.so"
    with pytest.raises(kpack.KpackError) as err:
        kpack.transform(cut, out, tmp_path / "k")
    assert str(cut) in str(err.value)
    assert not out.exists()


def test_transform_rejects_an_unknown_compression(tmp_path):
    with pytest.raises(kpack.UsageError, match="compression"):
        kpack.transform(fixture("bin/libone.so"), tmp_path / "o.so", tmp_path / "k", compression="lz4")
    with pytest.raises(kpack.UsageError, match="level"):
        kpack.transform(fixture("bin/libone.so"), tmp_path / "o.so", tmp_path / "k", level=30)
