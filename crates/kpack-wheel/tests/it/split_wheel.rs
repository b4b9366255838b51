//! `split_wheel` on the fixture wheel (fixtures/wheels, built by build_wheel.sh from the
//! hipcc fixtures), checked by an independent reader (tests/support/check_wheels.py:
//! Python's zipfile + hashlib + csv), and on hostile or broken wheels.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_package::handlers::Handler;
use kpack_testkit::{fixture, run_tool};
use kpack_wheel::{OutputFormat, SplitOptions, Summary, WheelError, split_wheel};

const DEMO: &str = "wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl";

fn split(input: &Path, out: &Path, tweak: impl FnOnce(&mut SplitOptions)) -> Summary {
    let mut opts = SplitOptions::new(out);
    opts.handlers = vec![Handler::Rocblas, Handler::Aotriton];
    tweak(&mut opts);
    split_wheel(input, &opts).unwrap_or_else(|e| panic!("split_wheel: {e}"))
}

/// What the independent reader says of each wheel.
fn check(wheels: &[PathBuf]) -> Vec<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/check_wheels.py");
    let mut args = vec![script.to_str().unwrap().to_owned()];
    args.extend(wheels.iter().map(|w| w.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_tool("python3", &args);
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn zip_entries(wheel: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut z = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).unwrap();
            let mut data = Vec::new();
            std::io::copy(&mut f, &mut data).unwrap();
            (f.name().to_owned(), data)
        })
        .collect()
}

#[test]
fn fixture_wheel_splits_into_valid_host_and_device_wheels() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let s = split(&fixture(DEMO), &out, |_| {});
    let keys: Vec<&str> = s.devices.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "gfx1030", "gfx11", "gfx1100", "gfx110x", "gfx900", "gfx906", "gfx908", "gfx90a",
            "gfx942"
        ]
    );
    assert_eq!(s.fat_binaries.len(), 3);
    assert_eq!(s.database_files, 2);
    // xnack variants fold into their processor's wheel, each keeping its own archive.
    let gfx90a = s
        .devices
        .iter()
        .find(|d| d.key.as_str() == "gfx90a")
        .unwrap();
    assert_eq!(gfx90a.architectures, ["gfx90a:xnack+", "gfx90a:xnack-"]);

    let mut wheels = vec![s.host.path.clone()];
    wheels.extend(s.devices.iter().map(|d| d.wheel.path.clone()));
    wheels.push(fixture(DEMO));
    let reports = check(&wheels);
    for r in &reports {
        assert_eq!(r["record_ok"], true, "{r}");
    }
    assert_eq!(
        reports[0]["bundles"], 0,
        "the host wheel holds no device code"
    );
    assert!(
        reports.last().unwrap()["bundles"].as_u64().unwrap() >= 3,
        "the scan finds bundles in the fat wheel"
    );

    // Everything but the binaries, the databases moved out, METADATA and RECORD is byte
    // for byte the input's, with the same modes.
    let input = zip_entries(&fixture(DEMO));
    let host = zip_entries(&s.host.path);
    let modes_in = &reports.last().unwrap()["entries"];
    let modes_out = &reports[0]["entries"];
    let rewritten: Vec<&str> = s.fat_binaries.iter().map(|f| f.path.as_str()).collect();
    for (name, data) in &input {
        assert_eq!(
            modes_in.get(name),
            modes_out.get(name).or(modes_in.get(name)),
            "{name}"
        );
        if name.contains("TensileLibrary_gfx1030") || name.contains("aotriton.images") {
            assert!(!host.contains_key(name), "{name} moved to its device wheel");
            continue;
        }
        assert_eq!(modes_in[name], modes_out[name], "mode of {name}");
        if rewritten.contains(&name.as_str()) {
            assert_ne!(&host[name], data, "{name} is rewritten");
        } else if !name.ends_with("METADATA") && !name.ends_with("RECORD") {
            assert_eq!(&host[name], data, "{name} is unchanged");
        }
    }
    assert_eq!(modes_out["kpack_demo/bin/exe_pie"], 0o751);

    // Device wheels: their archives under the overlay root, the database at its path.
    let d1030 = zip_entries(&s.devices[0].wheel.path);
    assert!(d1030.contains_key("kpack_demo/.kpack/one_gfx1030.kpack"));
    assert_eq!(
        d1030["kpack_demo/lib/rocblas/library/TensileLibrary_gfx1030.co"],
        input["kpack_demo/lib/rocblas/library/TensileLibrary_gfx1030.co"]
    );
    let meta = String::from_utf8(d1030["kpack_demo_device_gfx1030-1.0.dist-info/METADATA"].clone())
        .unwrap();
    assert!(meta.contains("Name: kpack-demo-device-gfx1030\n"));
    assert!(meta.contains("Requires-Dist: kpack-demo == 1.0\n"));
    let wheel =
        String::from_utf8(d1030["kpack_demo_device_gfx1030-1.0.dist-info/WHEEL"].clone()).unwrap();
    assert!(wheel.contains("Tag: py3-none-linux_x86_64\n"));
}

#[test]
fn host_metadata_gains_device_extras_before_the_body_for_every_target_a_device_wheel_serves() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(&fixture(DEMO), &dir.path().join("out"), |o| {
        o.device_requires_dist = vec![
            "rocm-sdk-device-@GFXARCH@ == 7.1".into(),
            "static-dep == 1.0".into(),
        ];
    });
    let host = zip_entries(&s.host.path);
    let meta = String::from_utf8(host["kpack_demo-1.0.dist-info/METADATA"].clone()).unwrap();
    let (headers, body) = meta.split_once("\n\n").unwrap();
    assert_eq!(body, "A description body.\n");
    assert!(headers.starts_with("Metadata-Version: 2.1\nName: kpack-demo\nVersion: 1.0\nSummary: kpack wheel test package\nProvides-Extra: device-gfx1030\n"));
    for line in [
        "Requires-Dist: kpack-demo-device-gfx1100 == 1.0; extra == \"device-gfx1100\"",
        "Requires-Dist: kpack-demo-device-gfx110x == 1.0; extra == \"device-gfx1100\"",
        "Requires-Dist: kpack-demo-device-gfx11 == 1.0; extra == \"device-gfx1100\"",
        "Provides-Extra: device-all",
        "Requires-Dist: kpack-demo-device-gfx11 == 1.0; extra == \"device-all\"",
    ] {
        assert!(
            headers.lines().any(|l| l == line),
            "{line} missing:\n{headers}"
        );
    }
    assert!(
        !headers.contains("Provides-Extra: device-gfx11\n"),
        "families get no extra"
    );
    // Targets without a wheel of their own get an extra of the wheels that serve them: the
    // gfx110x sub-family's and the gfx11 family's for gfx1101, the family's for gfx1151.
    let extra = |target: &str| -> Vec<&str> {
        headers
            .lines()
            .filter(|l| l.ends_with(&format!("; extra == \"device-{target}\"")))
            .collect()
    };
    assert_eq!(
        extra("gfx1101"),
        [
            "Requires-Dist: kpack-demo-device-gfx110x == 1.0; extra == \"device-gfx1101\"",
            "Requires-Dist: kpack-demo-device-gfx11 == 1.0; extra == \"device-gfx1101\"",
        ]
    );
    assert_eq!(
        extra("gfx1151"),
        ["Requires-Dist: kpack-demo-device-gfx11 == 1.0; extra == \"device-gfx1151\""]
    );
    assert!(headers.contains("Provides-Extra: device-gfx1151\n"));
    let dev = |key: &str| {
        let d = s.devices.iter().find(|d| d.key.as_str() == key).unwrap();
        let e = zip_entries(&d.wheel.path);
        let (_, m) = e.iter().find(|(n, _)| n.ends_with("/METADATA")).unwrap();
        String::from_utf8(m.clone()).unwrap()
    };
    let m1100 = dev("gfx1100");
    assert!(m1100.contains("Requires-Dist: rocm-sdk-device-gfx1100 == 7.1\n"));
    assert!(m1100.ends_with("Requires-Dist: kpack-demo-device-gfx110x == 1.0\nRequires-Dist: kpack-demo-device-gfx11 == 1.0\n"));
    let m11 = dev("gfx11");
    assert!(
        !m11.contains("rocm-sdk-device"),
        "no @GFXARCH@ deps on families"
    );
    assert!(m11.contains("Requires-Dist: static-dep == 1.0\n"));
    assert!(m11.contains("Summary: AMD device kernels (RDNA3) for kpack-demo\n"));
}

#[test]
fn variant_wheel_has_variant_json_and_markers_as_the_spec_says() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(&fixture(DEMO), &dir.path().join("out"), |o| {
        o.variants = true
    });
    let v = s.variant.as_ref().unwrap();
    assert!(
        v.path
            .to_string_lossy()
            .ends_with("kpack_demo-1.0-py3-none-linux_x86_64-variant.whl")
    );
    let e = zip_entries(&v.path);
    let json: serde_json::Value =
        serde_json::from_slice(&e["kpack_demo-1.0.dist-info/variant.json"]).unwrap();
    // The targets of the extras: those with a wheel of their own, and those the gfx11
    // family wheel (gfx11-generic code) serves.
    let targets = [
        "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152",
        "gfx1153", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx942",
    ];
    assert_eq!(
        json["providers"]["amd"],
        serde_json::json!({"install-time": true, "plugin-api": "amd_variant_provider.plugin:AMDVariantPlugin", "requires": ["amd-variant-provider >= 1.0"]})
    );
    assert_eq!(
        json["default-priorities"]["namespace"],
        serde_json::json!(["amd"])
    );
    assert_eq!(
        json["default-priorities"]["property"]["amd"]["gfx_arch"],
        serde_json::json!(targets)
    );
    let variants = json["variants"].as_object().unwrap();
    assert_eq!(variants.keys().collect::<Vec<_>>(), targets);
    assert_eq!(
        variants["gfx90a"],
        serde_json::json!({"amd": {"gfx_arch": ["gfx90a"]}})
    );
    let meta = String::from_utf8(e["kpack_demo-1.0.dist-info/METADATA"].clone()).unwrap();
    let lines: Vec<&str> = meta.lines().collect();
    // Each target-extra line is followed by its variant twin; the chain lines get the
    // target's marker; device-all gets none.
    let at = lines
        .iter()
        .position(|l| {
            *l == "Requires-Dist: kpack-demo-device-gfx110x == 1.0; extra == \"device-gfx1100\""
        })
        .unwrap();
    assert_eq!(
        lines[at + 1],
        "Requires-Dist: kpack-demo-device-gfx110x == 1.0; \"amd :: gfx_arch :: gfx1100\" in variant_properties"
    );
    assert!(!meta.contains("gfx_arch :: all"));
    assert_eq!(check(std::slice::from_ref(&v.path))[0]["record_ok"], true);
}

#[test]
fn output_is_the_same_bytes_on_every_run_and_as_a_directory_holds_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = split(&fixture(DEMO), &dir.path().join("a"), |_| {});
    let b = split(&fixture(DEMO), &dir.path().join("b"), |_| {});
    let bytes = |s: &Summary| {
        let mut v = vec![std::fs::read(&s.host.path).unwrap()];
        v.extend(
            s.devices
                .iter()
                .map(|d| std::fs::read(&d.wheel.path).unwrap()),
        );
        v
    };
    assert!(bytes(&a) == bytes(&b), "two runs differ");
    let d = split(&fixture(DEMO), &dir.path().join("d"), |o| {
        o.output_format = OutputFormat::Directory
    });
    assert!(d.host.path.is_dir());
    for (name, data) in zip_entries(&a.host.path) {
        assert_eq!(
            std::fs::read(d.host.path.join(&name)).unwrap(),
            data,
            "{name}"
        );
    }
}

/// A wheel zip of `entries` (name, bytes, unix mode) written with Python's zipfile, which
/// (unlike the zip crate) writes whatever it is told: duplicates, `..`, symlinks.
fn hostile_wheel(dir: &Path, entries: &[(&str, &[u8], u32)]) -> PathBuf {
    let path = dir.join("bad-1.0-py3-none-any.whl");
    let spec: Vec<serde_json::Value> = entries
        .iter()
        .map(|(n, d, m)| serde_json::json!([n, String::from_utf8_lossy(d), m]))
        .collect();
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap()).unwrap();
    let script = "import json,sys,zipfile,warnings\nwarnings.simplefilter('ignore')\nz=zipfile.ZipFile(sys.argv[2],'w')\nfor n,d,m in json.load(open(sys.argv[1])):\n  i=zipfile.ZipInfo(n,(1980,1,1,0,0,0)); i.external_attr=m<<16; z.writestr(i,d)\nz.close()\n";
    run_tool(
        "python3",
        &[
            "-c",
            script,
            spec_path.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
    );
    path
}

fn good_dist_info(record_extra: &str) -> Vec<(String, Vec<u8>, u32)> {
    let meta = b"Metadata-Version: 2.1\nName: bad\nVersion: 1.0\n".to_vec();
    let wheel = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec();
    let h = |d: &[u8]| kpack_wheelfile::metadata::record_hash(&sha2_digest(d));
    let record = format!(
        "bad-1.0.dist-info/METADATA,{},{}\nbad-1.0.dist-info/WHEEL,{},{}\n{record_extra}bad-1.0.dist-info/RECORD,,\n",
        h(&meta),
        meta.len(),
        h(&wheel),
        wheel.len()
    );
    vec![
        ("bad-1.0.dist-info/METADATA".into(), meta, 0o100644),
        ("bad-1.0.dist-info/WHEEL".into(), wheel, 0o100644),
        (
            "bad-1.0.dist-info/RECORD".into(),
            record.into_bytes(),
            0o100644,
        ),
    ]
}

fn sha2_digest(d: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(d).into()
}

/// Splitting `wheel` fails with an error naming `needle`, and nothing appears at -o.
fn refused(wheel: &Path, needle: &str) -> String {
    let out = wheel.parent().unwrap().join("out");
    let err = split_wheel(wheel, &SplitOptions::new(&out)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(needle), "{text:?} does not name {needle:?}");
    assert!(!out.exists(), "output written for a refused wheel");
    text
}

fn with_payload(name: &str, data: &[u8], mode: u32) -> Vec<(String, Vec<u8>, u32)> {
    let mut e = vec![(name.to_owned(), data.to_vec(), mode)];
    e.extend(good_dist_info(""));
    e
}

fn write(dir: &Path, entries: &[(String, Vec<u8>, u32)]) -> PathBuf {
    let refs: Vec<(&str, &[u8], u32)> = entries
        .iter()
        .map(|(n, d, m)| (n.as_str(), d.as_slice(), *m))
        .collect();
    hostile_wheel(dir, &refs)
}

#[test]
fn zip_slip_absolute_backslash_and_symlink_entries_are_refused_by_name() {
    for (name, mode, why) in [
        ("../evil.py", 0o100644, "zip slip"),
        ("pkg/../../evil.py", 0o100644, "zip slip"),
        ("/etc/evil.py", 0o100644, "absolute path"),
        ("pkg\\..\\evil.py", 0o100644, "backslash"),
        ("pkg/link", 0o120777, "symlink entry"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let wheel = write(dir.path(), &with_payload(name, b"x", mode));
        let text = refused(&wheel, why);
        assert!(text.contains(&format!("{name:?}")), "{text}");
    }
}

#[test]
fn duplicate_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = with_payload("pkg/a.py", b"1", 0o100644);
    e.push(("pkg/a.py".into(), b"2".to_vec(), 0o100644));
    let wheel = write(dir.path(), &e);
    let out = dir.path().join("out");
    let err = split_wheel(&wheel, &SplitOptions::new(&out))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pkg/a.py") && err.contains("uplicate"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn an_entry_larger_than_declared_or_past_the_global_cap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = [b'a'; 4096];
    let h = kpack_wheelfile::metadata::record_hash(&sha2_digest(&data));
    let mut e = vec![("pkg/data.bin".to_owned(), data.to_vec(), 0o100644)];
    e.extend(good_dist_info(&format!("pkg/data.bin,{h},4096\n")));
    let wheel = write(dir.path(), &e);
    // Make the central directory and local header declare 100 bytes for 4096.
    let mut bytes = std::fs::read(&wheel).unwrap();
    let name = b"pkg/data.bin";
    let mut patched = 0;
    for sig in [&b"PK\x01\x02"[..], &b"PK\x03\x04"[..]] {
        let mut i = 0;
        while let Some(at) = bytes[i..].windows(4).position(|w| w == sig) {
            let h = i + at;
            let (size_at, name_at) = if sig[2] == 1 {
                (h + 24, h + 46)
            } else {
                (h + 22, h + 30)
            };
            if bytes[name_at..].starts_with(name) {
                bytes[size_at..size_at + 4].copy_from_slice(&100u32.to_le_bytes());
                patched += 1;
            }
            i = h + 4;
        }
    }
    assert_eq!(patched, 2);
    let lying = dir.path().join("lying-1.0-py3-none-any.whl");
    std::fs::write(&lying, &bytes).unwrap();
    refused(&lying, "pkg/data.bin");
    let text = refused(&lying, "more than its declared 100 bytes");
    assert!(text.contains("pkg/data.bin"));

    // The global cap is checked on the declared sizes, before anything is decompressed.
    let out = dir.path().join("out2");
    let mut opts = SplitOptions::new(&out);
    opts.limits.max_unpacked = 1000;
    let err = split_wheel(&wheel, &opts).unwrap_err().to_string();
    assert!(
        err.contains("pkg/data.bin") && err.contains("zip bomb"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn a_record_that_does_not_match_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = b"print('hi')\n";
    let wrong = kpack_wheelfile::metadata::record_hash(&sha2_digest(b"something else"));
    let mut e = vec![("pkg/a.py".to_owned(), data.to_vec(), 0o100644)];
    e.extend(good_dist_info(&format!(
        "pkg/a.py,{wrong},{}\n",
        data.len()
    )));
    let wheel = write(dir.path(), &e);
    let text = refused(&wheel, "pkg/a.py");
    assert!(text.contains("does not match its sha256 hash"), "{text}");

    let unlisted = write(dir.path(), &with_payload("pkg/b.py", b"b", 0o100644));
    refused(&unlisted, "not listed in bad-1.0.dist-info/RECORD");
}

#[test]
fn zips_that_are_not_wheels_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let no_dist_info = write(dir.path(), &[("pkg/a.py".into(), b"a".to_vec(), 0o100644)]);
    refused(&no_dist_info, "no top-level .dist-info directory");
    let not_zip = dir.path().join("x-1.0-py3-none-any.whl");
    std::fs::File::create(&not_zip)
        .unwrap()
        .write_all(b"not a zip at all")
        .unwrap();
    refused(&not_zip, "not a readable zip archive");
    // A valid wheel without device code: nothing to split.
    let h = kpack_wheelfile::metadata::record_hash(&sha2_digest(b"a"));
    let mut e = vec![("pkg/a.py".to_owned(), b"a".to_vec(), 0o100644)];
    e.extend(good_dist_info(&format!("pkg/a.py,{h},1\n")));
    let pure = write(dir.path(), &e);
    let err = split_wheel(&pure, &SplitOptions::new(dir.path().join("o"))).unwrap_err();
    assert!(matches!(err, WheelError::NoFatBinaries { .. }), "{err}");
}

/// The fixture wheel unzipped into `dir/unpacked`.
fn unpack_demo(dir: &Path) -> PathBuf {
    let unpacked = dir.join("unpacked");
    run_tool(
        "unzip",
        &[
            "-q",
            fixture(DEMO).to_str().unwrap(),
            "-d",
            unpacked.to_str().unwrap(),
        ],
    );
    unpacked
}

#[test]
fn an_unpacked_wheel_directory_splits_to_the_same_bytes_and_its_symlinks_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let unpacked = unpack_demo(dir.path());
    let from_zip = split(&fixture(DEMO), &dir.path().join("a"), |_| {});
    let from_dir = split(&unpacked, &dir.path().join("b"), |_| {});
    let names = |s: &Summary| {
        let mut v = vec![s.host.path.file_name().unwrap().to_owned()];
        v.extend(
            s.devices
                .iter()
                .map(|d| d.wheel.path.file_name().unwrap().to_owned()),
        );
        v
    };
    assert_eq!(names(&from_zip), names(&from_dir));
    for (a, b) in [(&from_zip.host, &from_dir.host)].into_iter().chain(
        from_zip
            .devices
            .iter()
            .map(|d| &d.wheel)
            .zip(from_dir.devices.iter().map(|d| &d.wheel)),
    ) {
        assert!(
            std::fs::read(&a.path).unwrap() == std::fs::read(&b.path).unwrap(),
            "{}",
            a.path.display()
        );
    }
    kpack_fs::symlink(
        Path::new("version.py"),
        &unpacked.join("kpack_demo/alias.py"),
    )
    .unwrap();
    let out = dir.path().join("c");
    let err = split_wheel(&unpacked, &SplitOptions::new(&out))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("kpack_demo/alias.py") && err.contains("symlink"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn multi_target_archives_hold_each_device_wheels_targets_and_the_host_indexes_them() {
    let dir = tempfile::tempdir().unwrap();
    let multi = |o: &mut SplitOptions| o.multi_target_archives = true;
    let s = split(&fixture(DEMO), &dir.path().join("a"), multi);
    let again = split(&fixture(DEMO), &dir.path().join("b"), multi);
    for (x, y) in std::iter::once((&s.host, &again.host)).chain(
        s.devices
            .iter()
            .map(|d| &d.wheel)
            .zip(again.devices.iter().map(|d| &d.wheel)),
    ) {
        assert!(
            std::fs::read(&x.path).unwrap() == std::fs::read(&y.path).unwrap(),
            "{} differs between runs",
            x.path.display()
        );
    }
    let mut wheels = vec![s.host.path.clone()];
    wheels.extend(s.devices.iter().map(|d| d.wheel.path.clone()));
    for report in check(&wheels) {
        assert_eq!(report["record_ok"], true, "{report}");
        assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    }
    // One archive per module in each device wheel, holding all of its targets.
    let gfx90a = s
        .devices
        .iter()
        .find(|d| d.key.as_str() == "gfx90a")
        .unwrap();
    assert_eq!(gfx90a.archives, 1);
    let entries = zip_entries(&gfx90a.wheel.path);
    let kpacks: Vec<&String> = entries.keys().filter(|n| n.ends_with(".kpack")).collect();
    assert_eq!(kpacks, ["kpack_demo/.kpack/one_gfx90a.kpack"]);
    let archive =
        kpack_archive::Archive::from_bytes(entries["kpack_demo/.kpack/one_gfx90a.kpack"].clone())
            .unwrap();
    assert_eq!(archive.gfx_arches(), ["gfx90a:xnack+", "gfx90a:xnack-"]);
    assert_eq!(archive.gfx_arch_family(), "gfx90a");
    // The host wheel's index of libmodern_v3: every target, its archive and device wheel.
    let host = zip_entries(&s.host.path);
    let kpm =
        kpack_archive::kpm::KpmManifest::decode(&host["kpack_demo/.kpack/modern_v3.kpm"]).unwrap();
    assert_eq!(kpm.prefix, "kpack_demo");
    let listed: Vec<(&str, &str, &str)> = kpm
        .kpack_files
        .iter()
        .map(|(t, e)| (t.as_str(), e.file.as_str(), e.package.as_deref().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "gfx11-generic",
                "modern_v3_gfx11.kpack",
                "kpack-demo-device-gfx11"
            ),
            (
                "gfx1100",
                "modern_v3_gfx1100.kpack",
                "kpack-demo-device-gfx1100"
            ),
            (
                "gfx942:sramecc+:xnack-",
                "modern_v3_gfx942.kpack",
                "kpack-demo-device-gfx942"
            ),
        ]
    );
}

#[test]
fn a_windows_dll_in_a_wheel_is_split_like_a_shared_library() {
    // The fixture wheel, unpacked, with a PE32+ DLL (fixtures/platforms) added to its payload
    // and RECORD.
    let dir = tempfile::tempdir().unwrap();
    let unpacked = unpack_demo(dir.path());
    let dll = std::fs::read(fixture("platforms/hipapp2.dll")).unwrap();
    add_to_payload(&unpacked, "kpack_demo/hipapp2.dll", &dll);

    let s = split(&unpacked, &dir.path().join("out"), |_| {});
    assert!(
        s.fat_binaries
            .iter()
            .any(|f| f.path == "kpack_demo/hipapp2.dll"),
        "{:?}",
        s.fat_binaries
    );
    let host = zip_entries(&s.host.path);
    let out = &host["kpack_demo/hipapp2.dll"];
    kpack_pe::verify(out).unwrap_or_else(|i| panic!("{i:?}"));
    assert_eq!(
        kpack_pipeline::transform::check(out).unwrap(),
        kpack_pipeline::transform::HostState::Kpacked
    );
    // Its code objects are in the device wheels of their targets.
    let gfx1100 = s
        .devices
        .iter()
        .find(|d| d.key.as_str() == "gfx1100")
        .unwrap();
    let device = zip_entries(&gfx1100.wheel.path);
    assert!(
        device
            .keys()
            .any(|k| k.contains("hipapp2") && k.ends_with(".kpack")),
        "{:?}",
        device.keys().collect::<Vec<_>>()
    );
    assert_every_record_ok(&s);
}

/// Adds `data` at `rel` to the payload of the unpacked wheel `unpacked` and to its RECORD.
fn add_to_payload(unpacked: &Path, rel: &str, data: &[u8]) {
    let path = unpacked.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, data).unwrap();
    let record = unpacked.join("kpack_demo-1.0.dist-info/RECORD");
    let mut text = std::fs::read_to_string(&record).unwrap();
    let hash = kpack_wheelfile::metadata::record_hash(&sha2_digest(data));
    text.insert_str(0, &format!("{rel},{hash},{}\n", data.len()));
    std::fs::write(&record, text).unwrap();
}

/// The independent reader finds every RECORD of a split's wheels right.
fn assert_every_record_ok(s: &Summary) {
    let all: Vec<PathBuf> = std::iter::once(s.host.path.clone())
        .chain(s.devices.iter().map(|d| d.wheel.path.clone()))
        .collect();
    for report in check(&all) {
        assert_eq!(report["record_ok"], true, "{report}");
    }
}

/// The fixture wheel zipped again at `dir/<its name>` with every RECORD hash field emptied
/// (and the size fields of the `.py` files), as some wheels on PyPI list their files.
fn unhashed_demo(dir: &Path) -> PathBuf {
    let wheel = dir.join("kpack_demo-1.0-py3-none-linux_x86_64.whl");
    kpack_testkit::rezip_wheel(&fixture(DEMO), &wheel, &[], |name, data| {
        if name == "kpack_demo-1.0.dist-info/RECORD" {
            *data = kpack_testkit::unhashed_record(data, |p| p.ends_with(".py"));
        }
    });
    wheel
}

#[test]
fn a_record_without_hashes_splits_into_wheels_whose_records_hash_every_member() {
    let dir = tempfile::tempdir().unwrap();
    let input = unhashed_demo(dir.path());
    let s = split(&input, &dir.path().join("out"), |o| {
        o.variants = true;
        o.multi_target_archives = true;
    });
    // Every member but RECORD itself was unhashed, in wheel order.
    let members: Vec<String> = zip_entries(&input).into_keys().collect();
    let mut unhashed = s.unhashed_members.clone();
    unhashed.sort();
    let expected: Vec<&String> = members
        .iter()
        .filter(|m| !m.ends_with("dist-info/RECORD"))
        .collect();
    assert_eq!(unhashed.iter().collect::<Vec<_>>(), expected);

    let mut wheels = vec![s.host.path.clone(), s.variant.clone().unwrap().path];
    wheels.extend(s.devices.iter().map(|d| d.wheel.path.clone()));
    // The independent reader recomputes every member's SHA-256 and size, as pip does, and
    // requires a sha256 hash and a size on every row but RECORD's own.
    for r in check(&wheels) {
        assert_eq!(r["record_ok"], true, "{r}");
    }
    for w in &wheels {
        for (name, data) in zip_entries(w) {
            if !name.ends_with(".dist-info/RECORD") {
                continue;
            }
            let rows = kpack_wheelfile::metadata::parse_record(&data).unwrap();
            for row in rows.iter().filter(|r| r.path != name) {
                assert!(
                    row.hash.starts_with("sha256=") && row.hash.len() == 7 + 43,
                    "{}: {} has {:?}",
                    w.display(),
                    row.path,
                    row.hash
                );
                assert!(row.size.is_some(), "{}: {}", w.display(), row.path);
            }
        }
    }
    // The same split as of the fixture, whose RECORD hashes everything.
    let hashed = split(&fixture(DEMO), &dir.path().join("hashed"), |o| {
        o.variants = true;
        o.multi_target_archives = true;
    });
    assert!(hashed.unhashed_members.is_empty());
    assert_eq!(
        std::fs::read(&s.host.path).unwrap(),
        std::fs::read(&hashed.host.path).unwrap()
    );
}

#[test]
fn a_record_size_present_and_wrong_is_refused_even_without_a_hash() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = vec![("pkg/a.py".to_owned(), b"a".to_vec(), 0o100644)];
    e.extend(good_dist_info("pkg/a.py,,2\n"));
    let wheel = write(dir.path(), &e);
    let text = refused(&wheel, "pkg/a.py");
    assert!(
        text.contains("1 bytes, but bad-1.0.dist-info/RECORD says 2"),
        "{text}"
    );
}

#[test]
fn a_record_hash_that_is_not_a_hash_is_refused_naming_the_member() {
    for (field, why) in [
        ("sha256", "is not <algorithm>=<urlsafe base64 digest>"),
        ("md5=abc", "unsupported hash algorithm \"md5\""),
        ("sha256=!!!", "is not urlsafe base64"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut e = vec![("pkg/a.py".to_owned(), b"a".to_vec(), 0o100644)];
        e.extend(good_dist_info(&format!("pkg/a.py,{field},1\n")));
        let wheel = write(dir.path(), &e);
        let text = refused(&wheel, "pkg/a.py");
        assert!(text.contains(why), "{field}: {text}");
    }
}

#[test]
fn a_flipped_byte_in_a_stored_or_deflated_member_is_refused_by_its_crc_naming_wheel_and_member() {
    let member = "kpack_demo/lib/libone.so";
    // Stored: the flip changes one byte of the content. Deflated (as in the fixture): it
    // leaves a valid deflate stream of the declared length, whose content the CRC tells.
    for stored in [&[member][..], &[]] {
        let dir = tempfile::tempdir().unwrap();
        let wheel = dir.path().join("kpack_demo-1.0-py3-none-linux_x86_64.whl");
        kpack_testkit::rezip_wheel(&fixture(DEMO), &wheel, stored, |_, _| {});
        kpack_testkit::flip_member_byte(&wheel, member);
        let text = refused(&wheel, member);
        assert!(text.contains(&wheel.display().to_string()), "{text}");
        assert!(
            text.contains("CRC-32 is 0x") && text.contains("central directory expects 0x3eafb278"),
            "{stored:?}: {text}"
        );
    }
}

#[test]
fn metadata_that_would_name_outputs_wrongly_is_refused() {
    for (meta, why) in [
        (
            "Name: bad\nVersion: 1.0/../../../x\n",
            "Version \"1.0/../../../x\" is not a valid Version",
        ),
        (
            "Name: bad\nName: other\nVersion: 1.0\n",
            "2 Name headers, expected one",
        ),
        (
            "Name: other\nVersion: 1.0\n",
            "is not the .dist-info of \"other\"",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut e = good_dist_info("");
        e[0].1 = format!("Metadata-Version: 2.1\n{meta}").into_bytes();
        // An empty hash field: RECORD accepts the METADATA, the identity check refuses it.
        e[2].1 = b"bad-1.0.dist-info/METADATA,,\nbad-1.0.dist-info/WHEEL,,\nbad-1.0.dist-info/RECORD,,\n".to_vec();
        let wheel = write(dir.path(), &e);
        refused(&wheel, why);
    }
}

#[test]
fn a_debug_file_in_a_wheel_goes_unchanged_to_the_host_wheel() {
    // The fixture wheel, unpacked, with libone.so's separated debug file (fixtures/debug)
    // beside it as distributions lay them out, in its payload and RECORD.
    let dir = tempfile::tempdir().unwrap();
    let unpacked = unpack_demo(dir.path());
    let debug = std::fs::read(fixture("debug/libone.so.debug")).unwrap();
    let rel = "kpack_demo/lib/.debug/libone.so.debug";
    add_to_payload(&unpacked, rel, &debug);

    let s = split(&unpacked, &dir.path().join("out"), |_| {});
    let fat: Vec<&str> = s.fat_binaries.iter().map(|f| f.path.as_str()).collect();
    assert!(!fat.contains(&rel), "{fat:?}");
    assert_eq!(
        fat.len(),
        3,
        "the wheel's fat binaries are still split: {fat:?}"
    );
    assert_eq!(zip_entries(&s.host.path)[rel], debug);
    for d in &s.devices {
        assert!(!zip_entries(&d.wheel.path).contains_key(rel), "{}", d.key);
    }
    assert_every_record_ok(&s);
}

/// The demo wheel's members, with `extra` added, as a new wheel named `name` in `dir`.
fn demo_as(dir: &Path, name: &str, extra: &[(&str, &[u8])]) -> PathBuf {
    let path = dir.join(name);
    let mut zip = kpack_wheelfile::writer::WheelZip::create(&path, &path).unwrap();
    let entries = zip_entries(&fixture(DEMO));
    let mut dist_info = String::new();
    let members = entries
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .chain(extra.iter().copied());
    for (member, data) in members {
        if let Some(di) = member.strip_suffix("/RECORD") {
            dist_info = di.to_owned();
            continue;
        }
        let mut content = data;
        zip.add(member, 0o644, true, data.len() as u64, &path, &mut content)
            .unwrap();
    }
    zip.finish(&dist_info).unwrap();
    path
}

#[test]
fn a_windows_wheel_with_a_member_named_after_a_device_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = demo_as(
        dir.path(),
        "kpack_demo-1.0-py3-none-win_amd64.whl",
        &[("kpack_demo/Nul.py", b"# a device on Windows\n")],
    );
    let out = dir.path().join("out");
    let err = split_wheel(&input, &SplitOptions::new(&out)).unwrap_err();
    let WheelError::Name(e) = &err else {
        panic!("not a name error: {err}");
    };
    assert_eq!(
        (e.output.as_path(), e.member.as_str()),
        (input.as_path(), "kpack_demo/Nul.py")
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: member kpack_demo/Nul.py is named after the device NUL, which Windows reserves",
            input.display()
        )
    );
    assert_eq!(
        kpack_testkit::listing(dir.path()),
        ["kpack_demo-1.0-py3-none-win_amd64.whl"]
    );
}

#[test]
fn a_windows_wheel_splits_with_archive_names_windows_can_hold() {
    let dir = tempfile::tempdir().unwrap();
    let input = demo_as(dir.path(), "kpack_demo-1.0-py3-none-win_amd64.whl", &[]);
    let s = split(&input, &dir.path().join("out"), |_| {});
    let names: Vec<String> = s
        .devices
        .iter()
        .flat_map(|d| zip_entries(&d.wheel.path).into_keys())
        .filter(|n| n.ends_with(".kpack"))
        .collect();
    assert!(names.iter().any(|n| n.contains('@')), "{names:?}");
    assert!(names.iter().all(|n| !n.contains(':')), "{names:?}");
    // The same wheel for Linux keeps the reference's `:`.
    let linux = split(&fixture(DEMO), &dir.path().join("linux"), |_| {});
    let linux_names: Vec<String> = linux
        .devices
        .iter()
        .flat_map(|d| zip_entries(&d.wheel.path).into_keys())
        .filter(|n| n.ends_with(".kpack"))
        .collect();
    let respelled: Vec<String> = linux_names.iter().map(|n| n.replace(':', "@")).collect();
    assert_eq!(names, respelled);
}
