//! Installs librocm_kpack under a prefix:
//!
//! ```sh
//! cargo run --release -p kpack-capi-install -- --prefix /usr/local
//! ```
//!
//! Cargo builds the shared and static libraries with this program (`target/<profile>/`),
//! as they are `kpack-capi`'s, a dependency of this crate; it installs, under the prefix:
//!
//! * `lib/librocm_kpack.so.<version>` with the `librocm_kpack.so.0` (SONAME) and
//!   `librocm_kpack.so` links, and `lib/librocm_kpack.a`;
//! * on Windows instead: `bin/rocm_kpack.dll` (where Windows looks for a program's DLLs, on
//!   `PATH`), and in `lib/` its import libraries, `librocm_kpack.dll.a` (MinGW, made by the
//!   build) and `rocm_kpack.lib` (MSVC, made from `kpack-capi/rocm_kpack.def` by `dlltool`,
//!   as `scripts/windows.sh` does, beside this program), and `librocm_kpack.a`;
//! * `include/rocm_kpack/kpack.h`;
//! * `lib/cmake/rocm-kpack/` (`find_package(rocm-kpack)` → `rocm::rocm_kpack`,
//!   `rocm::rocm_kpack_static`) and `lib/pkgconfig/rocm-kpack.pc`.
//!
//! Files are written beside their destination and renamed over it ([`kpack_fs::write_atomic`],
//! [`kpack_fs::symlink_atomic`]), so processes using a previous install keep a consistent
//! mapping, and a killed install leaves no half-written file.
//!
//! # Why not `cargo-c`
//!
//! `cargo cinstall` (crates.io `cargo-c`) installs a Rust C library's `.so`/`.a`, header and
//! pkg-config file, and was considered for this job. We keep this installer because:
//! * the CMake package (`find_package(rocm-kpack)` with its `rocm::` targets), which ROCm's
//!   CMake builds consume, is not something `cargo-c` writes: we would still install it here;
//! * `cargo-c` embeds Cargo itself (0.10.24 is built on cargo 0.98 and needs rustc 1.95, above
//!   our MSRV of 1.87; it links libgit2, curl and OpenSSL): one `cargo install cargo-c` is a
//!   long build with system development packages, for every CI machine and packager, where this
//!   short program is part of the workspace and builds with it, offline;
//! * it generates the header with cbindgen at install time; ours is checked in and
//!   `tests/it/header.rs` keeps it equal to the sources, so the installed header is the reviewed
//!   one.
//!
//! The layout (`lib/` with the SONAME link chain, `include/<library>/`, `lib/pkgconfig/`) is
//! the one `cargo-c` uses, so switching later would change nothing for consumers.
//!
//! A crate of its own, so that the C library's dependencies stay the runtime and `libc`: what
//! installing needs (`kpack-fs`'s atomic publishing, symbolic links) is no loader's business,
//! and would otherwise be linked into librocm_kpack.
//!
//! Depends on `kpack-capi` and `kpack-fs` (the layering: docs/CONTRIBUTING.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const VERSION: &str = env!("CARGO_PKG_VERSION");
// The header and the package files are kpack-capi's, kept beside the sources they describe.
const HEADER: &str = include_str!("../../kpack-capi/include/rocm_kpack/kpack.h");
const CMAKE_CONFIG: &str = include_str!("../../kpack-capi/cmake/rocm-kpack-config.cmake");
const CMAKE_VERSION: &str = include_str!("../../kpack-capi/cmake/rocm-kpack-config-version.cmake");
const PKG_CONFIG: &str = include_str!("../../kpack-capi/cmake/rocm-kpack.pc");
/// `rustc --print native-static-libs` for the static library on Linux.
#[cfg(not(windows))]
const STATIC_LIBS: &[&str] = &["gcc_s", "util", "rt", "pthread", "m", "dl", "c"];
/// `rustc --print native-static-libs` for the static library on Windows (MinGW; the Win32
/// functions kpack's own crates call come from import libraries bundled into it).
#[cfg(windows)]
const STATIC_LIBS: &[&str] = &["kernel32", "ntdll", "userenv", "ws2_32", "dbghelp"];

/// The libraries as Cargo builds them, each with where it is installed (relative to the
/// prefix); then the links of the SONAME chain (link, target), in `lib/`.
#[cfg(not(windows))]
const LIBRARIES: &[(&str, &str)] = &[
    ("librocm_kpack.so", "lib/librocm_kpack.so.@VERSION@"),
    ("librocm_kpack.a", "lib/librocm_kpack.a"),
];
#[cfg(not(windows))]
const LINKS: &[(&str, &str)] = &[
    ("librocm_kpack.so.0", "librocm_kpack.so.@VERSION@"),
    ("librocm_kpack.so", "librocm_kpack.so.0"),
];
#[cfg(windows)]
const LIBRARIES: &[(&str, &str)] = &[
    ("rocm_kpack.dll", "bin/rocm_kpack.dll"),
    ("librocm_kpack.dll.a", "lib/librocm_kpack.dll.a"),
    ("rocm_kpack.lib", "lib/rocm_kpack.lib"),
    ("librocm_kpack.a", "lib/librocm_kpack.a"),
];
#[cfg(windows)]
const LINKS: &[(&str, &str)] = &[];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let prefix = match args.as_slice() {
        [flag, prefix] if flag == "--prefix" => PathBuf::from(prefix),
        _ => {
            eprintln!("usage: install-rocm-kpack --prefix DIR");
            return ExitCode::from(2);
        }
    };
    match install(&prefix) {
        Ok(files) => {
            for f in files {
                println!("installed {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("install-rocm-kpack: {e}");
            ExitCode::FAILURE
        }
    }
}

fn install(prefix: &Path) -> Result<Vec<PathBuf>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("locating this program: {e}"))?;
    let built = exe.parent().ok_or("this program has no directory")?;
    // Cargo leaves the libraries in `deps/` when it builds them for this program (`cargo run`,
    // `cargo test`) and copies them up only for `cargo build`: take the newer.
    let read = |name: &str| {
        let newest = [built.join(name), built.join("deps").join(name)]
            .into_iter()
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
            .max();
        let (_, p) = newest.ok_or_else(|| {
            format!(
                "{name} not found beside {}: run `cargo run -p kpack-capi-install`{}",
                exe.display(),
                if name.ends_with(".lib") {
                    " and make it from kpack-capi's rocm_kpack.def with dlltool"
                } else {
                    ""
                }
            )
        })?;
        std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let prefix = if prefix.is_absolute() {
        prefix.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|e| e.to_string())?
            .join(prefix)
    };
    let lib = prefix.join("lib");
    let fill = |template: &str| {
        template
            .replace("@VERSION@", VERSION)
            .replace("@PREFIX@", &prefix.display().to_string())
            .replace("@STATIC_LIBS@", &STATIC_LIBS.join(";"))
            .replace(
                "@STATIC_FLAGS@",
                &STATIC_LIBS
                    .iter()
                    .map(|l| format!("-l{l}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            )
    };
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for (built, installed) in LIBRARIES {
        files.push((prefix.join(fill(installed)), read(built)?));
    }
    files.extend([
        (prefix.join("include/rocm_kpack/kpack.h"), HEADER.into()),
        (
            lib.join("cmake/rocm-kpack/rocm-kpack-config.cmake"),
            fill(CMAKE_CONFIG).into(),
        ),
        (
            lib.join("cmake/rocm-kpack/rocm-kpack-config-version.cmake"),
            fill(CMAKE_VERSION).into(),
        ),
        (lib.join("pkgconfig/rocm-kpack.pc"), fill(PKG_CONFIG).into()),
    ]);
    let mut installed = Vec::new();
    for (path, bytes) in files {
        make_dir(&path)?;
        kpack_fs::write_atomic(
            &path,
            |file| {
                std::io::Write::write_all(file, &bytes)
                    .map_err(|e| format!("{}: {e}", path.display()))
            },
            |at, e| format!("{}: {e}", at.display()),
        )?;
        installed.push(path);
    }
    for (link, target) in LINKS {
        let path = lib.join(link);
        make_dir(&path)?;
        kpack_fs::symlink_atomic(Path::new(&fill(target)), &path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        installed.push(path);
    }
    Ok(installed)
}

/// Creates the directory of `path`, sweeping what a killed install left there.
fn make_dir(path: &Path) -> Result<(), String> {
    let dir = path.parent().expect("installed paths have a directory");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let _ = kpack_fs::sweep(dir);
    Ok(())
}
