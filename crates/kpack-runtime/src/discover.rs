//! Which file an address belongs to (spec §4.7): the HIP runtime passes a wrapper's address
//! and gets the path of the binary whose search paths it must resolve.

use std::ffi::OsString;

use crate::ErrorCode;

/// The mapping an address falls in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedAddress {
    /// The mapped file's path as `/proc/self/maps` prints it (a ` (deleted)` suffix kept); on
    /// Windows, the module's path as `GetModuleFileNameW` gives it.
    pub path: OsString,
    /// The address's offset in that file (on Windows, its RVA in the module).
    pub offset: u64,
}

/// Why the file behind an address could not be found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoverError {
    /// `/proc/self/maps` could not be read.
    #[error("reading /proc/self/maps: {0}")]
    Maps(std::io::Error),
    /// The address is not in a mapping of a file.
    #[error("address {0:#x} is not in a file-backed mapping")]
    NotMapped(usize),
    /// `GetModuleFileNameW` failed (Windows).
    #[error("GetModuleFileNameW: {0}")]
    ModuleName(std::io::Error),
    /// Neither Linux nor Windows.
    #[error("binary path discovery is only implemented on Linux and Windows")]
    Unsupported,
}

impl DiscoverError {
    /// The C error code: `PATH_DISCOVERY_FAILED`, or `NOT_IMPLEMENTED` off Linux and Windows.
    pub fn code(&self) -> ErrorCode {
        match self {
            DiscoverError::Maps(_) | DiscoverError::NotMapped(_) | DiscoverError::ModuleName(_) => {
                ErrorCode::PathDiscoveryFailed
            }
            DiscoverError::Unsupported => ErrorCode::NotImplemented,
        }
    }
}

/// The file mapped at `address` in this process, from `/proc/self/maps` (Linux; `dladdr`
/// cannot name data addresses such as a wrapper's).
#[cfg(not(windows))]
pub fn discover_binary_path(address: usize) -> Result<MappedAddress, DiscoverError> {
    if cfg!(target_os = "linux") {
        let maps = std::fs::read("/proc/self/maps").map_err(DiscoverError::Maps)?;
        find_in_maps(&maps, address).ok_or(DiscoverError::NotMapped(address))
    } else {
        Err(DiscoverError::Unsupported)
    }
}

/// The module (DLL or EXE) holding `address` in this process, as the reference loader finds
/// it: `GetModuleHandleExW` with `GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS` from any address
/// inside its image (a wrapper in `.hipFatB` included), `GetModuleFileNameW` for its path
/// (paths longer than `MAX_PATH` included). The offset is the address's RVA.
#[cfg(windows)]
pub fn discover_binary_path(address: usize) -> Result<MappedAddress, DiscoverError> {
    let (path, base) = crate::win::module_of(address)?;
    Ok(MappedAddress {
        path,
        offset: (address - base) as u64,
    })
}

/// The first line of a `/proc/<pid>/maps` text whose range holds `address` and that names a
/// file (not `[heap]`, `[vdso]`, ... nor an anonymous mapping). Malformed lines are skipped.
pub fn find_in_maps(maps: &[u8], address: usize) -> Option<MappedAddress> {
    maps.split(|&b| b == b'\n')
        .find_map(|line| parse_line(line, address as u64))
}

fn parse_line(line: &[u8], address: u64) -> Option<MappedAddress> {
    // lo-hi perms offset dev inode [path]; the path is everything after the inode's trailing
    // blanks, so blanks inside it and " (deleted)" are kept.
    let mut rest = line;
    let mut field = || -> Option<&[u8]> {
        let start = rest.iter().position(|&b| b != b' ')?;
        let len = rest[start..]
            .iter()
            .position(|&b| b == b' ')
            .unwrap_or(rest.len() - start);
        let f = &rest[start..start + len];
        rest = &rest[start + len..];
        Some(f)
    };
    let range = field()?;
    let (_perms, offset, _dev, _inode) = (field()?, field()?, field()?, field()?);
    let hex = |s: &[u8]| u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok();
    let dash = range.iter().position(|&b| b == b'-')?;
    let (lo, hi) = (hex(&range[..dash])?, hex(&range[dash + 1..])?);
    if !(lo <= address && address < hi) {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ' && b != b'\t')?;
    let path = &rest[start..];
    if path.starts_with(b"[") {
        return None;
    }
    Some(MappedAddress {
        path: os_string(path),
        offset: hex(offset).unwrap_or(0) + (address - lo),
    })
}

#[cfg(unix)]
fn os_string(bytes: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::OsStr::from_bytes(bytes).to_owned()
}

// `/proc/self/maps` is Linux's; elsewhere its text is parsed only by the tests, as UTF-8.
#[cfg(not(unix))]
fn os_string(bytes: &[u8]) -> OsString {
    String::from_utf8_lossy(bytes).into_owned().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &[u8] = b"\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 1234   /usr/bin/app
55d0c0001000-55d0c0005000 r-xp 00001000 08:01 1234   /usr/bin/app
7f0000000000-7f0000002000 rw-p 00000000 00:00 0      [heap]
7f0000002000-7f0000003000 rw-p 00000000 00:00 0
7f0000003000-7f0000004000 r--p 00002000 08:01 99     /opt/rocm/lib/lib with space.so (deleted)
garbage line
";

    #[test]
    fn addresses_map_to_the_file_and_offset_of_their_mapping() {
        let m = find_in_maps(MAPS, 0x55d0c0001010).unwrap();
        assert_eq!(m.path, "/usr/bin/app");
        assert_eq!(m.offset, 0x1010);
        let m = find_in_maps(MAPS, 0x7f0000003fff).unwrap();
        assert_eq!(m.path, "/opt/rocm/lib/lib with space.so (deleted)");
        assert_eq!(m.offset, 0x2fff);
    }

    #[test]
    fn pseudo_and_anonymous_mappings_and_unmapped_addresses_name_no_file() {
        assert_eq!(find_in_maps(MAPS, 0x7f0000000010), None);
        assert_eq!(find_in_maps(MAPS, 0x7f0000002010), None);
        assert_eq!(find_in_maps(MAPS, 0x55d0c0005000), None);
        assert_eq!(find_in_maps(MAPS, 0), None);
    }

    #[test]
    fn a_function_of_this_test_binary_is_found_in_the_test_binary_with_its_offset() {
        let address = a_function_of_this_test_binary_is_found_in_the_test_binary_with_its_offset
            as *const () as usize;
        let found = discover_binary_path(address).unwrap();
        let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(std::fs::canonicalize(&found.path).unwrap(), exe);
        // A static's address (data, as a wrapper is) lies in the same file, past the code.
        static DATA: [u8; 4] = *b"HIPK";
        let data = discover_binary_path(std::ptr::addr_of!(DATA) as usize).unwrap();
        assert_eq!(std::fs::canonicalize(&data.path).unwrap(), exe);
        assert_ne!(data.offset, found.offset);
        assert!(found.offset > 0);
        assert!(matches!(
            discover_binary_path(1),
            Err(DiscoverError::NotMapped(1))
        ));
    }
}
