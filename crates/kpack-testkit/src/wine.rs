//! wine64 (Debian's, headless) running the PE fixtures: `loader.exe` `LoadLibraryA`s a DLL, an
//! EXE runs itself, and the stand-in `amdhip64.dll` (`fixtures/platforms/win/amdhip64.c`)
//! prints one `hipreg` line per `__hipRegisterFatBinary` call.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::Registration;

/// wine64 as installed by scripts/setup.sh (bookworm's `wine64` has no launcher on `PATH`).
const WINE64: &str = "/usr/lib/wine/wine64";

/// A wine prefix of the test binary's own. Its first start (creating the prefix) takes
/// seconds, so a test binary makes one and shares it.
pub struct Wine {
    prefix: PathBuf,
}

/// The prefixes already created in this process.
static CREATED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// One `__hipRegisterFatBinary` call as the Windows stand-in printed it.
#[derive(Debug, PartialEq, Eq)]
pub struct WineRegistration {
    /// The wrapper's address in the loaded image (tells whether it was rebased).
    pub wrapper: u64,
    /// Magic, version, `reserved1` and the bytes the pointer leads to.
    pub registration: Registration,
}

impl Wine {
    /// The prefix at `prefix` (a directory under the test's temporary space), created on
    /// first use in this process (`wineboot --init`, with Mono and Gecko disabled: nothing
    /// is downloaded).
    pub fn new(prefix: &Path) -> Wine {
        let wine = Wine {
            prefix: prefix.to_owned(),
        };
        let mut created = CREATED.lock().unwrap_or_else(|e| e.into_inner());
        if !created.iter().any(|p| p == prefix) {
            std::fs::create_dir_all(prefix).unwrap();
            let out = wine.command("wineboot").arg("--init").output();
            let out = out.unwrap_or_else(|e| panic!("{WINE64}: {e}; run scripts/setup.sh"));
            assert!(out.status.success(), "wineboot: {out:?}");
            created.push(prefix.to_owned());
        }
        wine
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(WINE64);
        c.arg(program)
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", "mscoree,mshtml=")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY");
        c
    }

    /// Runs `exe` (a file name in `dir`, the current directory, where the DLLs are found)
    /// with `args`; panics unless it exits with 0. Returns its registrations and stdout.
    pub fn run(&self, dir: &Path, exe: &str, args: &[&str]) -> (Vec<WineRegistration>, String) {
        let out = self
            .command(exe)
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("{WINE64}: {e}; run scripts/setup.sh"));
        let stdout = String::from_utf8_lossy(&out.stdout).replace('\r', "");
        assert!(
            out.status.success(),
            "wine64 {exe} {args:?} in {}: {}\nstdout: {stdout}\nstderr: {}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let regs = stdout.lines().filter_map(parse_line).collect();
        (regs, stdout)
    }
}

/// `hipreg <wrapper> <magic> <version> <reserved1> <hex bytes>`.
fn parse_line(line: &str) -> Option<WineRegistration> {
    let mut f = line.strip_prefix("hipreg ")?.split(' ');
    let mut hex = || u64::from_str_radix(f.next().unwrap_or(""), 16).unwrap();
    let wrapper = hex();
    let magic = match hex() as u32 {
        0x4849_5046 => "HIPF",
        0x4B50_4948 => "HIPK",
        _ => "other",
    };
    let version = hex() as u32;
    let reserved1 = hex();
    let digits = f.next().unwrap_or("");
    let bytes = (0..digits.len() / 2)
        .map(|i| u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    Some(WineRegistration {
        wrapper,
        registration: Registration {
            magic: magic.to_owned(),
            version,
            reserved1,
            bytes,
            code_object: None,
        },
    })
}
