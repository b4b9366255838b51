//! Installs librocm_kpack with its one documented command, builds kpack-capi's
//! `tests/c/kpack_c_test.c` against the installed package through CMake
//! `find_package(rocm-kpack)` (shared and static) and through pkg-config, runs each, and
//! checks what the library exports.
//! Needs gcc, cmake, pkg-config and nm (`scripts/setup.sh` installs them).

use std::path::Path;
use std::process::Command;

use kpack_archive::{ArchiveWriter, Compression};
use kpack_testkit::fixture;
use rmpv::Value;

/// `BIG_SIZE` of the C program.
const BIG_SIZE: usize = 80 << 20;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn write(
    path: &Path,
    entries: &[(&str, &str, &[u8])],
    compression: Compression,
    arches: Option<&[&str]>,
) {
    let mut w = ArchiveWriter::new("test", "test", compression);
    for (key, arch, bytes) in entries {
        w.add(key, arch, bytes.to_vec(), &[]).unwrap();
    }
    if let Some(a) = arches {
        w.set_gfx_arches(a.iter().map(|s| s.to_string()).collect())
            .unwrap();
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    w.write_file(path).unwrap();
}

/// `archive` with its TOC (the bytes from `toc_offset` to the end) edited.
fn edit_toc(archive: &[u8], edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    let toc_offset = u64::from_le_bytes(archive[8..16].try_into().unwrap()) as usize;
    let mut rest = &archive[toc_offset..];
    let Value::Map(mut toc) = rmpv::decode::read_value(&mut rest).unwrap() else {
        panic!("TOC is a map");
    };
    assert!(rest.is_empty(), "the TOC runs to the end of the file");
    edit(&mut toc);
    let mut out = archive[..toc_offset].to_vec();
    rmpv::encode::write_value(&mut out, &Value::Map(toc)).unwrap();
    out
}

fn field<'a>(map: &'a mut [(Value, Value)], key: &str) -> &'a mut Value {
    &mut map
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some(key))
        .unwrap()
        .1
}

fn make_data_dir(dir: &Path) {
    let gfx1030 = std::fs::read(fixture("modern/mk_gfx1030.co")).unwrap();
    let gfx90a = std::fs::read(fixture("modern/mk_gfx90a_xnackp.co")).unwrap();
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::create_dir_all(dir.join("a_directory.kpack")).unwrap();
    std::fs::write(dir.join("gfx1030.co"), &gfx1030).unwrap();
    std::fs::write(dir.join("gfx90a_xnackp.co"), &gfx90a).unwrap();
    for v in ["test_noop.kpack", "test_zstd.kpack"] {
        std::fs::copy(fixture(&format!("vectors/{v}")), dir.join(v)).unwrap();
    }
    let real: [(&str, &str, &[u8]); 2] = [
        ("lib/libreal.so#0", "gfx1030", &gfx1030),
        ("lib/libreal.so#0", "gfx90a:xnack+", &gfx90a),
    ];
    write(&dir.join("real.kpack"), &real, Compression::None, None);
    write(
        &dir.join("real_zstd.kpack"),
        &real,
        Compression::zstd(),
        None,
    );
    write(
        &dir.join("real_unified.kpack"),
        &real,
        Compression::unified(),
        None,
    );
    write(
        &dir.join("other.kpack"),
        &[("lib/libother.so#0", "gfx1030", &gfx1030)],
        Compression::None,
        None,
    );
    write(
        &dir.join(".kpack/split_gfx1030.kpack"),
        &real[..1],
        Compression::zstd(),
        None,
    );
    write(
        &dir.join("env/prefix_gfx1030.kpack"),
        &[("lib/libreal.so#0", "gfx1030", &gfx90a)],
        Compression::None,
        None,
    );
    write(
        &dir.join("big.kpack"),
        &[("lib/big.so#0", "gfx1030", &vec![0x5a; BIG_SIZE])],
        Compression::None,
        None,
    );

    let noop = std::fs::read(dir.join("test_noop.kpack")).unwrap();
    let mut bad_magic = noop.clone();
    bad_magic[0] = b'X';
    std::fs::write(dir.join("bad_magic.kpack"), bad_magic).unwrap();
    let mut bad_version = noop.clone();
    bad_version[4] = 2;
    std::fs::write(dir.join("bad_version.kpack"), bad_version).unwrap();
    std::fs::write(dir.join("truncated_toc.kpack"), &noop[..noop.len() - 10]).unwrap();
    std::fs::write(dir.join("empty.kpack"), b"").unwrap();
    let unknown = edit_toc(&noop, |toc| {
        *field(toc, "compression_scheme") = "lz4".into()
    });
    std::fs::write(dir.join("unknown_scheme.kpack"), unknown).unwrap();
    let wrong = edit_toc(&noop, |toc| {
        let Value::Map(binaries) = field(toc, "toc") else {
            panic!()
        };
        let Value::Map(arches) = field(binaries, "lib/libtest.so#0") else {
            panic!()
        };
        let Value::Map(entry) = field(arches, "gfx900") else {
            panic!()
        };
        *field(entry, "ordinal") = "zero".into();
    });
    std::fs::write(dir.join("wrong_type.kpack"), wrong).unwrap();

    write(
        &dir.join("corrupt_zstd.kpack"),
        &real[..1],
        Compression::zstd(),
        None,
    );
    let mut corrupt = std::fs::read(dir.join("corrupt_zstd.kpack")).unwrap();
    // After the frame count and size prefix (8 bytes) and the frame header: block data.
    for b in &mut corrupt[64 + 8 + 12..64 + 8 + 60] {
        *b ^= 0xa5;
    }
    std::fs::write(dir.join("corrupt_zstd.kpack"), corrupt).unwrap();
}

#[test]
fn installed_library_passes_the_c_test_program_via_cmake_and_pkg_config() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    // The documented install command runs this same program after cargo built it.
    run(Command::new(env!("CARGO_BIN_EXE_install-rocm-kpack"))
        .arg("--prefix")
        .arg(&prefix));
    let data = tmp.path().join("data");
    make_data_dir(&data);

    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kpack-capi/tests/c");
    let build = tmp.path().join("build");
    run(Command::new("cmake")
        .arg("-S")
        .arg(&source)
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())));
    run(Command::new("cmake").arg("--build").arg(&build));
    for variant in ["shared", "static"] {
        let out = run(Command::new(build.join(format!("kpack_c_test_{variant}"))).arg(&data));
        assert!(out.contains(" passed, 0 failed"), "{variant}: {out}");
    }

    let pc = run(Command::new("pkg-config")
        .args(["--cflags", "--libs", "rocm-kpack"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")));
    let exe = tmp.path().join("kpack_c_test_pkgconfig");
    run(Command::new("gcc")
        .args(["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(source.join("kpack_c_test.c"))
        .args(pc.split_whitespace())
        .arg("-lpthread")
        .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display())));
    let out = run(Command::new(&exe).arg(&data));
    assert!(out.contains(" passed, 0 failed"), "pkg-config build: {out}");
}

#[test]
fn the_shared_library_exports_exactly_the_14_api_functions() {
    let tmp = tempfile::tempdir().unwrap();
    run(Command::new(env!("CARGO_BIN_EXE_install-rocm-kpack"))
        .arg("--prefix")
        .arg(tmp.path()));
    let lib = tmp.path().join("lib/librocm_kpack.so.0");
    let out = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&lib));
    let mut symbols: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    symbols.sort_unstable();
    assert_eq!(
        symbols,
        [
            "kpack_cache_create",
            "kpack_cache_destroy",
            "kpack_close",
            "kpack_discover_binary_path",
            "kpack_enumerate_architectures",
            "kpack_free_code_object",
            "kpack_free_kernel",
            "kpack_get_architecture",
            "kpack_get_architecture_count",
            "kpack_get_binary",
            "kpack_get_binary_count",
            "kpack_get_kernel",
            "kpack_load_code_object",
            "kpack_open",
        ]
    );
    let dynamic = run(Command::new("readelf").arg("-d").arg(&lib));
    assert!(
        dynamic.contains("Library soname: [librocm_kpack.so.0]"),
        "{dynamic}"
    );
}
