//! The stand-in HIP runtime (`standin/libamdhip64.c`): a `libamdhip64.so.5` that logs every
//! `__hipRegisterFatBinary` call, and, built against an installed librocm_kpack, loads each
//! HIPK wrapper's code object exactly as a kpack-aware HIP runtime (CLR) does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::run_tool;

/// A built stand-in: `libamdhip64.so.5` and the `load` driver that `dlopen`s libraries.
#[derive(Debug)]
pub struct Standin {
    dir: PathBuf,
    runtime: bool,
}

/// The stand-in, built once per process and variant with gcc. With `runtime`, the prefix of
/// an installed librocm_kpack (`install-rocm-kpack --prefix`), it is compiled with
/// `-DKPACK_STANDIN_RUNTIME` against that library (found through an rpath) and built inside
/// the prefix; without, it only logs, and is built beside the test executable.
pub fn standin(runtime: Option<&Path>) -> &'static Standin {
    static BUILT: Mutex<BTreeMap<Option<PathBuf>, &'static Standin>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let key = runtime.map(Path::to_owned);
    if let Some(s) = built.get(&key) {
        return s;
    }
    let s: &'static Standin = Box::leak(Box::new(build(runtime)));
    built.insert(key, s);
    s
}

fn build(runtime: Option<&Path>) -> Standin {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("standin");
    let dir = match runtime {
        Some(prefix) => prefix.join("kpack-standin"),
        // Test and bench executables live in `target/<profile>/deps/`: one stand-in per
        // checkout and profile.
        None => {
            let exe = std::env::current_exe().unwrap();
            exe.parent()
                .and_then(Path::parent)
                .unwrap()
                .join("kpack-standin")
        }
    };
    std::fs::create_dir_all(&dir).unwrap();
    let s = |p: &Path| p.display().to_string();
    let mut lib_args = vec![
        "-shared".to_owned(),
        "-fPIC".into(),
        "-O1".into(),
        "-Wall".into(),
        "-Werror".into(),
        "-Wl,-soname,libamdhip64.so.5".into(),
        format!("-Wl,--version-script={}", s(&src.join("libamdhip64.map"))),
        s(&src.join("libamdhip64.c")),
    ];
    if let Some(prefix) = runtime {
        let lib = prefix.join("lib");
        lib_args.extend([
            "-DKPACK_STANDIN_RUNTIME".to_owned(),
            format!("-I{}", s(&prefix.join("include"))),
            format!("-L{}", s(&lib)),
            format!("-Wl,-rpath,{}", s(&lib)),
            "-lrocm_kpack".into(),
        ]);
    }
    // Built under a temporary name and renamed into place, so concurrent test processes
    // sharing the directory never see a half-written file.
    let place = |name: &str, args: &[String]| {
        let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = s(&tmp);
        all.extend(["-o", &out]);
        run_tool("gcc", &all);
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    };
    place("libamdhip64.so.5", &lib_args);
    place(
        "load",
        &[
            s(&src.join("load.c")),
            "-Wall".into(),
            "-Werror".into(),
            "-ldl".into(),
        ],
    );
    Standin {
        dir,
        runtime: runtime.is_some(),
    }
}

/// One `__hipRegisterFatBinary` call as the stand-in logged it.
#[derive(Debug, PartialEq, Eq)]
pub struct Registration {
    /// `HIPF`, `HIPK` or `other`.
    pub magic: String,
    pub version: u32,
    pub reserved1: u64,
    /// The msgpack marker a HIPK wrapper leads to; otherwise the first 24 bytes there.
    pub bytes: Vec<u8>,
    /// What `kpack_load_code_object` returned, when the stand-in has a runtime and the
    /// wrapper is HIPK version 1: the file holding the code object, or the `kpack_error_t`
    /// (-1 when the stand-in itself failed to save the object).
    pub code_object: Option<Result<PathBuf, i32>>,
}

impl Standin {
    /// Loads `binary` under the stand-in (runs it if it is an executable, else `dlopen`s it
    /// with `RTLD_LAZY` from the `load` driver) and returns its registrations in order.
    /// `arches` is the agent's ISA list for the runtime (`amdgcn-amd-amdhsa--gfx90a:xnack-`,
    /// …; empty without a runtime). The log and the loaded code objects go to `work`, whose
    /// previous log and objects are removed first. The `ROCM_KPACK_*` variables that redirect
    /// or disable loading are cleared.
    pub fn load(&self, binary: &Path, arches: &[&str], work: &Path) -> Vec<Registration> {
        assert!(
            self.runtime || arches.is_empty(),
            "the stand-in without a runtime loads no code objects"
        );
        let log = work.join("standin.log");
        let objects = work.join("objects");
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_dir_all(&objects);
        std::fs::create_dir_all(&objects).unwrap();
        let name = binary.file_name().unwrap().to_string_lossy().into_owned();
        let mut cmd = if name.contains(".so") {
            let mut c = Command::new(self.dir.join("load"));
            c.arg(binary);
            c
        } else {
            Command::new(binary)
        };
        let out = cmd
            .env("LD_LIBRARY_PATH", &self.dir)
            .env("KPACK_STANDIN_LOG", &log)
            .env("KPACK_STANDIN_ARCHES", arches.join(","))
            .env("KPACK_STANDIN_OBJECTS", &objects)
            .env_remove("ROCM_KPACK_PATH")
            .env_remove("ROCM_KPACK_PATH_PREFIX")
            .env_remove("ROCM_KPACK_DISABLE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{} failed to load: {}{}",
            binary.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines()
            .enumerate()
            .map(|(n, l)| {
                let f: Vec<&str> = l.split(' ').collect();
                let hex = f[3];
                Registration {
                    magic: f[0].to_owned(),
                    version: f[1].parse().unwrap(),
                    reserved1: f[2].parse().unwrap(),
                    bytes: (0..hex.len() / 2)
                        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                        .collect(),
                    code_object: f.get(4).map(|e| match e.parse().unwrap() {
                        0 => Ok(objects.join(format!("{n}.co"))),
                        err => Err(err),
                    }),
                }
            })
            .collect()
    }
}
