//! The stand-in HIP runtime (`standin/libamdhip64.c`): a `libamdhip64.so.5` that logs every
//! `__hipRegisterFatBinary` call, and, built against an installed librocm_kpack, loads each
//! HIPK wrapper's code object exactly as a kpack-aware HIP runtime (CLR) does.
//!
//! For a [`Foreign`] machine (aarch64, ppc64le) the stand-in is cross-compiled with that
//! machine's gcc and binaries load under qemu-user through the cross libc's dynamic loader.

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
    foreign: Option<&'static Foreign>,
}

/// A machine other than the host's whose binaries run under qemu-user with the cross libc
/// (`scripts/setup.sh` installs qemu-user-static, the cross gcc, binutils and libc).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Foreign {
    /// The GNU triple: the cross tools' prefix and the cross libc's root `/usr/<triple>`.
    pub triple: &'static str,
    /// The qemu-user emulator.
    pub qemu: &'static str,
    /// The dynamic loader's file name in `/usr/<triple>/lib`.
    pub ld_so: &'static str,
    /// `e_machine`.
    pub e_machine: u16,
}

/// aarch64 (arm64) Linux.
pub const AARCH64: Foreign = Foreign {
    triple: "aarch64-linux-gnu",
    qemu: "qemu-aarch64-static",
    ld_so: "ld-linux-aarch64.so.1",
    e_machine: 183,
};

/// Little-endian ppc64 (ppc64el) Linux.
pub const PPC64LE: Foreign = Foreign {
    triple: "powerpc64le-linux-gnu",
    qemu: "qemu-ppc64le-static",
    ld_so: "ld64.so.2",
    e_machine: 21,
};

impl Foreign {
    /// The cross binutils tool `name` (`strip`, `readelf` …).
    pub fn tool(&self, name: &str) -> String {
        format!("{}-{name}", self.triple)
    }
    fn sysroot(&self) -> PathBuf {
        Path::new("/usr").join(self.triple)
    }
}

/// The stand-in, built once per process and variant with gcc. With `runtime`, the prefix of
/// an installed librocm_kpack (`install-rocm-kpack --prefix`), it is compiled with
/// `-DKPACK_STANDIN_RUNTIME` against that library (found through an rpath) and built inside
/// the prefix; without, it only logs, and is built beside the test executable.
pub fn standin(runtime: Option<&Path>) -> &'static Standin {
    built(runtime, None)
}

/// The logging stand-in for `machine`, cross-compiled with its gcc and run under qemu-user;
/// built once per process and machine, beside the test executable.
pub fn foreign_standin(machine: &'static Foreign) -> &'static Standin {
    built(None, Some(machine))
}

type Variant = (Option<PathBuf>, Option<&'static Foreign>);

fn built(runtime: Option<&Path>, foreign: Option<&'static Foreign>) -> &'static Standin {
    static BUILT: Mutex<BTreeMap<Variant, &'static Standin>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let key = (runtime.map(Path::to_owned), foreign);
    if let Some(s) = built.get(&key) {
        return s;
    }
    let s: &'static Standin = Box::leak(Box::new(build(runtime, foreign)));
    built.insert(key, s);
    s
}

fn build(runtime: Option<&Path>, foreign: Option<&'static Foreign>) -> Standin {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("standin");
    let dir = match runtime {
        Some(prefix) => prefix.join("kpack-standin"),
        // Test and bench executables live in `target/<profile>/deps/`: one stand-in per
        // checkout, profile and machine.
        None => {
            let exe = std::env::current_exe().unwrap();
            let name = match foreign {
                Some(m) => format!("kpack-standin-{}", m.triple),
                None => "kpack-standin".to_owned(),
            };
            exe.parent().and_then(Path::parent).unwrap().join(name)
        }
    };
    let gcc = foreign.map_or_else(|| "gcc".to_owned(), |m| m.tool("gcc"));
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
        run_tool(&gcc, &all);
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
        foreign,
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
    /// The bundle that registration `n` of the last [`Standin::load`] into `work` handed the
    /// runtime through a HIPF wrapper, as the runtime reads it (its length from its header),
    /// or `None` for a HIPK wrapper.
    pub fn registered_bundle(&self, work: &Path, n: usize) -> Option<Vec<u8>> {
        std::fs::read(work.join("objects").join(format!("{n}.bundle"))).ok()
    }

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
        let mut argv = vec![binary.as_os_str().to_owned()];
        if name.contains(".so") {
            argv.insert(0, self.dir.join("load").into_os_string());
        }
        let mut cmd = match self.foreign {
            // qemu-user runs the cross libc's loader, which runs the program; -L makes the
            // guest's absolute paths (/lib/…) resolve in the cross libc's root.
            Some(m) => {
                let root = m.sysroot();
                let mut c = Command::new(m.qemu);
                c.arg("-L")
                    .arg(&root)
                    .arg(root.join("lib").join(m.ld_so))
                    .arg("--library-path")
                    .arg(format!(
                        "{}:{}",
                        root.join("lib").display(),
                        self.dir.display()
                    ))
                    .args(&argv);
                c
            }
            None => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        let program = cmd.get_program().to_owned();
        let out = cmd
            .env("LD_LIBRARY_PATH", &self.dir)
            .env("KPACK_STANDIN_LOG", &log)
            .env("KPACK_STANDIN_ARCHES", arches.join(","))
            .env("KPACK_STANDIN_OBJECTS", &objects)
            .env_remove("ROCM_KPACK_PATH")
            .env_remove("ROCM_KPACK_PATH_PREFIX")
            .env_remove("ROCM_KPACK_DISABLE")
            .output()
            .unwrap_or_else(|e| panic!("running {program:?} (scripts/setup.sh installs it): {e}"));
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
