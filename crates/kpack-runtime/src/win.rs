//! The Win32 calls of the loader (`windows-sys`): the only unsafe code of kpack-runtime.
//! Each call's contract is stated where it is made.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::os::windows::ffi::OsStringExt;

use windows_sys::Win32::Foundation::HMODULE;
use windows_sys::Win32::System::LibraryLoader::{
    GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
    GetModuleFileNameW, GetModuleHandleExW,
};

use crate::DiscoverError;

/// The longest path Windows has (`\\?\` paths: 32 767 UTF-16 units and the NUL).
const MAX_PATH_UNITS: usize = 32_768;

/// The path and base address of the module (DLL or EXE) whose image holds `address`.
pub(crate) fn module_of(address: usize) -> Result<(OsString, usize), DiscoverError> {
    let mut module: HMODULE = std::ptr::null_mut();
    // SAFETY: with FROM_ADDRESS the name argument is an address that is only compared with
    // the loaded images' ranges, never read; `module` is a valid out-pointer;
    // UNCHANGED_REFCOUNT takes no reference that would need releasing.
    let found = unsafe {
        GetModuleHandleExW(
            GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
            address as *const u16,
            &mut module,
        )
    };
    if found == 0 || module.is_null() {
        return Err(DiscoverError::NotMapped(address));
    }
    // MAX_PATH first; a path that does not fit is cut to fill the whole buffer (the length
    // returned is the buffer's), so the buffer grows until the path and its NUL fit.
    let mut name = vec![0u16; 260];
    loop {
        let size = u32::try_from(name.len()).unwrap_or(u32::MAX);
        // SAFETY: `module` is a loaded module (found above, and a module holding code that
        // runs now is not unloaded meanwhile); `name` is writable for `size` units, and the
        // call writes at most that many.
        let len = unsafe { GetModuleFileNameW(module, name.as_mut_ptr(), size) } as usize;
        if len == 0 {
            return Err(DiscoverError::ModuleName(std::io::Error::last_os_error()));
        }
        if len < name.len() {
            name.truncate(len);
            return Ok((OsString::from_wide(&name), module as usize));
        }
        if name.len() >= MAX_PATH_UNITS {
            return Err(DiscoverError::ModuleName(std::io::Error::other(
                "the module's path is longer than 32767 UTF-16 units",
            )));
        }
        name.resize((name.len() * 2).min(MAX_PATH_UNITS), 0);
    }
}
