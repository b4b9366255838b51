//! `librocm_kpack`: the C ABI of the kpack runtime, a drop-in for ROCm's `rocm_kpack/kpack.h`
//! (the same 14 functions, types and error values; reference spec §4). The header
//! `include/rocm_kpack/kpack.h` is generated from this file by cbindgen (a test fails when it
//! is stale); the logic lives in `kpack-runtime`.
//!
//! Every entry point checks its pointer arguments, turns a panic into an error code (void
//! functions swallow it) so no unwind crosses into C, and returns buffers from `malloc`, so
//! `free()` and the `kpack_free_*` functions are interchangeable (on Windows only for a
//! caller using the same C runtime, msvcrt: others call the `kpack_free_*` functions).
//! Paths are bytes on Unix and UTF-8 on Windows.
//!
//! Differences a caller can observe, all where the reference misbehaves (spec §9 B14/B15):
//! malformed archives are rejected at open with `INVALID_FORMAT` (an empty file too, which
//! the reference reports as `IO_ERROR`) instead of crashing later; an archive name with a NUL
//! byte in `gfx_arches` or a binary key is rejected at open (C cannot represent it);
//! `kpack_load_code_object` falls through to the next archive and target when one lacks the
//! kernel (see `kpack-runtime`); output pointers are cleared on failure. A panic, which would
//! be a bug, is reported as `KPACK_ERROR_IO_ERROR`.
//!
//! Depends on `kpack-runtime` (the layering: docs/CONTRIBUTING.md).

#![allow(non_camel_case_types)]

use std::ffi::{CStr, CString, OsStr, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use kpack_runtime::{Archive, Cache, CompressionScheme, ErrorCode, LoadError, read_metadata};

/// Error codes; `KPACK_SUCCESS` is 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kpack_error_t {
    KPACK_SUCCESS = 0,
    KPACK_ERROR_INVALID_ARGUMENT = 1,
    KPACK_ERROR_FILE_NOT_FOUND = 2,
    KPACK_ERROR_INVALID_FORMAT = 3,
    KPACK_ERROR_UNSUPPORTED_VERSION = 4,
    KPACK_ERROR_KERNEL_NOT_FOUND = 5,
    KPACK_ERROR_DECOMPRESSION_FAILED = 6,
    KPACK_ERROR_OUT_OF_MEMORY = 7,
    KPACK_ERROR_NOT_IMPLEMENTED = 8,
    KPACK_ERROR_IO_ERROR = 9,
    KPACK_ERROR_MSGPACK_PARSE_FAILED = 10,
    KPACK_ERROR_PATH_DISCOVERY_FAILED = 11,
    KPACK_ERROR_INVALID_METADATA = 12,
    KPACK_ERROR_ARCHIVE_NOT_FOUND = 13,
    KPACK_ERROR_ARCH_NOT_FOUND = 14,
    /// kpack's addition: the archive's digest of the bytes read does not match (the file is
    /// damaged). Only archives that carry digests (written by kpack) report it.
    KPACK_ERROR_INTEGRITY_CHECK_FAILED = 15,
}

use kpack_error_t::*;

/// How an archive stores its kernels (the TOC's `compression_scheme`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kpack_compression_scheme_t {
    KPACK_COMPRESSION_NOOP = 0,
    KPACK_COMPRESSION_ZSTD_PER_KERNEL = 1,
    /// Scheme `unified`, archive format version 2 (a kpack extension).
    KPACK_COMPRESSION_UNIFIED = 2,
}

impl From<CompressionScheme> for kpack_compression_scheme_t {
    fn from(s: CompressionScheme) -> Self {
        match s {
            CompressionScheme::None => kpack_compression_scheme_t::KPACK_COMPRESSION_NOOP,
            CompressionScheme::ZstdPerKernel => {
                kpack_compression_scheme_t::KPACK_COMPRESSION_ZSTD_PER_KERNEL
            }
            CompressionScheme::Unified => kpack_compression_scheme_t::KPACK_COMPRESSION_UNIFIED,
        }
    }
}

// `KPACK_MAGIC` ("KPAK") is written into the header by cbindgen.toml: cbindgen emits no
// string constants.
/// Length of the archive header's magic, `KPACK_MAGIC`.
pub const KPACK_MAGIC_SIZE: u32 = 4;
/// The archive format version of the reference schemes (`none`, `zstd-per-kernel`); this
/// library also reads version 2 (scheme `unified`, `KPACK_COMPRESSION_UNIFIED`).
pub const KPACK_CURRENT_VERSION: u32 = 1;

impl From<ErrorCode> for kpack_error_t {
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::InvalidArgument => KPACK_ERROR_INVALID_ARGUMENT,
            ErrorCode::FileNotFound => KPACK_ERROR_FILE_NOT_FOUND,
            ErrorCode::InvalidFormat => KPACK_ERROR_INVALID_FORMAT,
            ErrorCode::UnsupportedVersion => KPACK_ERROR_UNSUPPORTED_VERSION,
            ErrorCode::KernelNotFound => KPACK_ERROR_KERNEL_NOT_FOUND,
            ErrorCode::DecompressionFailed => KPACK_ERROR_DECOMPRESSION_FAILED,
            ErrorCode::OutOfMemory => KPACK_ERROR_OUT_OF_MEMORY,
            ErrorCode::NotImplemented => KPACK_ERROR_NOT_IMPLEMENTED,
            ErrorCode::IoError => KPACK_ERROR_IO_ERROR,
            ErrorCode::MsgpackParseFailed => KPACK_ERROR_MSGPACK_PARSE_FAILED,
            ErrorCode::PathDiscoveryFailed => KPACK_ERROR_PATH_DISCOVERY_FAILED,
            ErrorCode::InvalidMetadata => KPACK_ERROR_INVALID_METADATA,
            ErrorCode::ArchiveNotFound => KPACK_ERROR_ARCHIVE_NOT_FOUND,
            ErrorCode::ArchNotFound => KPACK_ERROR_ARCH_NOT_FOUND,
            ErrorCode::IntegrityCheckFailed => KPACK_ERROR_INTEGRITY_CHECK_FAILED,
        }
    }
}

/// An open archive: the reader, plus the C strings handed out, built at open so their
/// pointers stay valid until `kpack_close`.
pub struct kpack_archive {
    archive: Archive,
    arches: Vec<CString>,
    /// Binary keys in byte-wise sorted order.
    binaries: Vec<CString>,
}

/// A code-object cache: the environment read at creation and every archive opened through it.
pub struct kpack_cache {
    cache: Cache,
}

/// Opaque handle to an open archive.
pub type kpack_archive_t = *mut kpack_archive;
/// Opaque handle to a cache.
pub type kpack_cache_t = *mut kpack_cache;
/// Called by `kpack_enumerate_architectures` for each architecture; return false to stop.
pub type kpack_arch_callback_t =
    Option<unsafe extern "C" fn(arch: *const c_char, user_data: *mut c_void) -> bool>;

type Outcome = Result<(), kpack_error_t>;

/// Runs an entry point's body, mapping a panic to `KPACK_ERROR_IO_ERROR`.
fn guard(body: impl FnOnce() -> Outcome) -> kpack_error_t {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => KPACK_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => KPACK_ERROR_IO_ERROR,
    }
}

fn non_null<T>(p: *const T) -> Outcome {
    if p.is_null() {
        Err(KPACK_ERROR_INVALID_ARGUMENT)
    } else {
        Ok(())
    }
}

/// # Safety
/// `p` is NULL (rejected) or a NUL-terminated string that outlives `'a`.
unsafe fn c_str<'a>(p: *const c_char) -> Result<&'a CStr, kpack_error_t> {
    non_null(p)?;
    // SAFETY: non-NULL, and the caller guarantees NUL termination and lifetime.
    Ok(unsafe { CStr::from_ptr(p) })
}

/// A path from C: its bytes as they are on Unix; UTF-8 on Windows (C strings there have no
/// encoding of their own; the one that spells every name is UTF-8), where other bytes are
/// `KPACK_ERROR_INVALID_ARGUMENT`.
#[cfg(unix)]
fn c_path(s: &CStr) -> Result<&Path, kpack_error_t> {
    use std::os::unix::ffi::OsStrExt;
    Ok(Path::new(OsStr::from_bytes(s.to_bytes())))
}

#[cfg(not(unix))]
fn c_path(s: &CStr) -> Result<&Path, kpack_error_t> {
    s.to_str()
        .map(Path::new)
        .map_err(|_| KPACK_ERROR_INVALID_ARGUMENT)
}

/// A path for C, as [`c_path`] reads them: on Windows a name that is not valid UTF-16 (a lone
/// surrogate) has no UTF-8 spelling and is `None`.
#[cfg(unix)]
fn path_for_c(path: &OsStr) -> Option<&[u8]> {
    use std::os::unix::ffi::OsStrExt;
    Some(path.as_bytes())
}

#[cfg(not(unix))]
fn path_for_c(path: &OsStr) -> Option<&[u8]> {
    path.to_str().map(str::as_bytes)
}

/// A `malloc` copy of `bytes` (never NULL on success, even for 0 bytes).
fn malloc_copy(bytes: &[u8]) -> Result<*mut c_void, kpack_error_t> {
    // SAFETY: malloc has no preconditions; asking for at least one byte makes NULL mean failure.
    let p = unsafe { libc::malloc(bytes.len().max(1)) };
    if p.is_null() {
        return Err(KPACK_ERROR_OUT_OF_MEMORY);
    }
    // SAFETY: `p` is a fresh allocation of at least `bytes.len()` bytes, disjoint from `bytes`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.cast::<u8>(), bytes.len()) };
    Ok(p)
}

/// Stores `value` through `out` if `out` is non-NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn set<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL and, by the caller's contract, writable.
        unsafe { out.write(value) };
    }
}

fn open_handle(path: &CStr) -> Result<kpack_archive, kpack_error_t> {
    let archive =
        Archive::open(c_path(path)?).map_err(|e| kpack_error_t::from(ErrorCode::from(&e)))?;
    let c_strings = |names: Vec<&str>| -> Result<Vec<CString>, kpack_error_t> {
        names
            .into_iter()
            .map(|n| CString::new(n).map_err(|_| KPACK_ERROR_INVALID_FORMAT))
            .collect()
    };
    let arches = c_strings(archive.gfx_arches().iter().map(String::as_str).collect())?;
    let binaries = c_strings(archive.binaries_sorted().collect())?;
    Ok(kpack_archive {
        archive,
        arches,
        binaries,
    })
}

/// Opens a kpack archive: maps the file and indexes its table of contents (kernels are read
/// only by `kpack_get_kernel`).
///
/// Returns:
///   KPACK_SUCCESS, with `*archive` set (release it with `kpack_close`)
///   KPACK_ERROR_INVALID_ARGUMENT if `path` or `archive` is NULL
///   KPACK_ERROR_FILE_NOT_FOUND if the file does not exist
///   KPACK_ERROR_IO_ERROR if it cannot be read (a directory, no permission)
///   KPACK_ERROR_INVALID_FORMAT for a bad magic, a short file, a TOC offset out of range, or a
///                              TOC field missing, mistyped or inconsistent with the file
///   KPACK_ERROR_UNSUPPORTED_VERSION if the header or TOC version is not 1
///   KPACK_ERROR_MSGPACK_PARSE_FAILED if the TOC is not one msgpack map
///   KPACK_ERROR_INTEGRITY_CHECK_FAILED if the file ends with a TOC digest and its header or
///     TOC is invalid or does not match it (the file is damaged)
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `archive` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_open(
    path: *const c_char,
    archive: *mut kpack_archive_t,
) -> kpack_error_t {
    guard(|| {
        non_null(archive)?;
        // SAFETY: `archive` is non-NULL and writable by the caller's contract.
        unsafe { archive.write(std::ptr::null_mut()) };
        // SAFETY: the caller's contract on `path`.
        let path = unsafe { c_str(path) }?;
        let handle = Box::new(open_handle(path)?);
        // SAFETY: as above.
        unsafe { archive.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Closes an archive and frees everything it owns, including the strings it handed out.
/// NULL is ignored. Must not race with any other use of the handle.
///
/// # Safety
/// `archive` is NULL or a handle from `kpack_open` not yet closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_close(archive: kpack_archive_t) {
    if !archive.is_null() {
        // SAFETY: the handle came from Box::into_raw in kpack_open and is closed only once.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(archive) })));
    }
}

/// # Safety
/// `archive` is NULL or an open handle, used for `'a`.
unsafe fn handle<'a>(archive: kpack_archive_t) -> Result<&'a kpack_archive, kpack_error_t> {
    non_null(archive)?;
    // SAFETY: non-NULL, and an open handle by the caller's contract.
    Ok(unsafe { &*archive })
}

/// Writes the length of one of the archive's string lists to `count`.
///
/// # Safety
/// `archive` is NULL or an open handle; `count` is NULL or writable.
unsafe fn write_count(
    archive: kpack_archive_t,
    count: *mut usize,
    list: impl FnOnce(&kpack_archive) -> &[CString],
) -> kpack_error_t {
    guard(|| {
        // SAFETY: the caller's contract on `archive`.
        let a = unsafe { handle(archive) }?;
        non_null(count)?;
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { count.write(list(a).len()) };
        Ok(())
    })
}

/// Writes the `index`-th string of one of the archive's lists (owned by the archive) to `out`.
///
/// # Safety
/// `archive` is NULL or an open handle; `out` is NULL or writable.
unsafe fn write_item(
    archive: kpack_archive_t,
    index: usize,
    out: *mut *const c_char,
    list: impl FnOnce(&kpack_archive) -> &[CString],
) -> kpack_error_t {
    guard(|| {
        // SAFETY: the caller's contract on `archive`.
        let a = unsafe { handle(archive) }?;
        non_null(out)?;
        let s = list(a).get(index).ok_or(KPACK_ERROR_INVALID_ARGUMENT)?;
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { out.write(s.as_ptr()) };
        Ok(())
    })
}

/// The number of architectures the archive declares (its `gfx_arches`).
///
/// Returns KPACK_SUCCESS, or KPACK_ERROR_INVALID_ARGUMENT if a pointer is NULL.
///
/// # Safety
/// `archive` is NULL or an open handle; `count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_get_architecture_count(
    archive: kpack_archive_t,
    count: *mut usize,
) -> kpack_error_t {
    // SAFETY: forwarded caller contract.
    unsafe { write_count(archive, count, |a| &a.arches) }
}

/// The `index`-th architecture, in the archive's order. The string belongs to the archive and
/// stays valid until `kpack_close`.
///
/// Returns KPACK_SUCCESS, or KPACK_ERROR_INVALID_ARGUMENT if a pointer is NULL or `index` is
/// out of range.
///
/// # Safety
/// `archive` is NULL or an open handle; `arch` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_get_architecture(
    archive: kpack_archive_t,
    index: usize,
    arch: *mut *const c_char,
) -> kpack_error_t {
    // SAFETY: forwarded caller contract.
    unsafe { write_item(archive, index, arch, |a| &a.arches) }
}

/// The number of distinct binaries (TOC keys `name#index`) in the archive.
///
/// Returns KPACK_SUCCESS, or KPACK_ERROR_INVALID_ARGUMENT if a pointer is NULL.
///
/// # Safety
/// `archive` is NULL or an open handle; `count` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_get_binary_count(
    archive: kpack_archive_t,
    count: *mut usize,
) -> kpack_error_t {
    // SAFETY: forwarded caller contract.
    unsafe { write_count(archive, count, |a| &a.binaries) }
}

/// The `index`-th binary key in byte-wise sorted order. The string belongs to the archive and
/// stays valid until `kpack_close`.
///
/// Returns KPACK_SUCCESS, or KPACK_ERROR_INVALID_ARGUMENT if a pointer is NULL or `index` is
/// out of range.
///
/// # Safety
/// `archive` is NULL or an open handle; `binary` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_get_binary(
    archive: kpack_archive_t,
    index: usize,
    binary: *mut *const c_char,
) -> kpack_error_t {
    // SAFETY: forwarded caller contract.
    unsafe { write_item(archive, index, binary, |a| &a.binaries) }
}

/// A copy of the kernel stored for `binary_name` (a TOC key such as `lib/libfoo.so#0`) and
/// `arch` (exactly as the archive spells it). Thread-safe on one handle, without a lock.
/// The caller frees `*kernel_data` with `kpack_free_kernel` (or `free`).
///
/// Returns:
///   KPACK_SUCCESS, with `*kernel_data` and `*kernel_size` set
///   KPACK_ERROR_INVALID_ARGUMENT if a pointer is NULL
///   KPACK_ERROR_KERNEL_NOT_FOUND if the archive has no such entry
///   KPACK_ERROR_DECOMPRESSION_FAILED if the entry's zstd frame does not decode to its size
///   KPACK_ERROR_INTEGRITY_CHECK_FAILED if the archive carries digests and the code object
///     read does not match its own, or its frame does not decode (the file is damaged)
///   KPACK_ERROR_OUT_OF_MEMORY if the copy cannot be allocated
///
/// # Safety
/// `archive` is NULL or an open handle; the strings are NULL or NUL-terminated; the outputs
/// are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_get_kernel(
    archive: kpack_archive_t,
    binary_name: *const c_char,
    arch: *const c_char,
    kernel_data: *mut *mut c_void,
    kernel_size: *mut usize,
) -> kpack_error_t {
    guard(|| {
        non_null(kernel_data)?;
        non_null(kernel_size)?;
        // SAFETY: both outputs are non-NULL and writable by the caller's contract.
        unsafe {
            kernel_data.write(std::ptr::null_mut());
            kernel_size.write(0);
        }
        // SAFETY: the caller's contracts on `archive` and the strings.
        let (a, binary_name, arch) =
            unsafe { (handle(archive)?, c_str(binary_name)?, c_str(arch)?) };
        // TOC keys are UTF-8: a name that is not cannot be in the archive.
        let (Ok(binary_name), Ok(arch)) = (binary_name.to_str(), arch.to_str()) else {
            return Err(KPACK_ERROR_KERNEL_NOT_FOUND);
        };
        let bytes = a
            .archive
            .get(binary_name, arch)
            .map_err(|e| kpack_error_t::from(ErrorCode::from(&e)))?;
        let copy = malloc_copy(&bytes)?;
        // SAFETY: as above.
        unsafe {
            kernel_data.write(copy);
            kernel_size.write(bytes.len());
        }
        Ok(())
    })
}

/// Frees a kernel from `kpack_get_kernel`. NULL is ignored.
///
/// # Safety
/// `kernel_data` is NULL or a pointer from `kpack_get_kernel` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_free_kernel(kernel_data: *mut c_void) {
    // SAFETY: the pointer came from libc::malloc (malloc_copy), or is NULL, which free ignores.
    unsafe { libc::free(kernel_data) }
}

/// Creates a cache for `kpack_load_code_object`, reading the environment now and never again:
///   ROCM_KPACK_PATH         `:`-separated archive paths that replace all search paths
///   ROCM_KPACK_PATH_PREFIX  `:`-separated archive paths searched before the embedded ones
///                           (both may contain @GFXARCH@; relative paths are relative to the
///                           working directory)
///   ROCM_KPACK_DISABLE      when set, non-empty and not starting with '0': loads return
///                           KPACK_ERROR_NOT_IMPLEMENTED
///   ROCM_KPACK_DEBUG        same rule: log the search to stderr as `kpack: ...` lines
/// Not thread-safe itself (it reads the environment); the cache it returns is.
///
/// Returns KPACK_SUCCESS, or KPACK_ERROR_INVALID_ARGUMENT if `cache` is NULL.
///
/// # Safety
/// `cache` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_cache_create(cache: *mut kpack_cache_t) -> kpack_error_t {
    guard(|| {
        non_null(cache)?;
        let handle = Box::new(kpack_cache {
            cache: Cache::from_env(),
        });
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { cache.write(Box::into_raw(handle)) };
        Ok(())
    })
}

/// Destroys a cache and closes every archive it opened. NULL is ignored. Must not race with
/// loads through the cache.
///
/// # Safety
/// `cache` is NULL or a handle from `kpack_cache_create` not yet destroyed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_cache_destroy(cache: kpack_cache_t) {
    if !cache.is_null() {
        // SAFETY: the handle came from Box::into_raw in kpack_cache_create, destroyed once.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(cache) })));
    }
}

/// The path of the file mapped at `address_in_binary` (any address inside a loaded library
/// or executable, such as a fat-binary wrapper's), from /proc/self/maps, as a NUL-terminated
/// string in `path_out`; and, if `offset_out` is not NULL, the address's offset in that file.
/// On Windows: the DLL or EXE whose image holds the address (`GetModuleHandleExW`,
/// `GetModuleFileNameW`), its path in UTF-8, the offset the address's RVA.
///
/// Returns:
///   KPACK_SUCCESS
///   KPACK_ERROR_INVALID_ARGUMENT if `address_in_binary` or `path_out` is NULL,
///                                `path_out_size` is 0, or the path does not fit
///   KPACK_ERROR_PATH_DISCOVERY_FAILED if no file is mapped there (on Windows, also a module
///                                     path that is not valid UTF-16, which UTF-8 cannot spell)
///   KPACK_ERROR_NOT_IMPLEMENTED on platforms other than Linux and Windows
///
/// # Safety
/// `path_out` is NULL or writable for `path_out_size` bytes; `offset_out` is NULL or
/// writable. `address_in_binary` is only compared, never read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_discover_binary_path(
    address_in_binary: *const c_void,
    path_out: *mut c_char,
    path_out_size: usize,
    offset_out: *mut usize,
) -> kpack_error_t {
    guard(|| {
        non_null(address_in_binary)?;
        non_null(path_out)?;
        if path_out_size == 0 {
            return Err(KPACK_ERROR_INVALID_ARGUMENT);
        }
        let found = kpack_runtime::discover_binary_path(address_in_binary as usize)
            .map_err(|e| kpack_error_t::from(e.code()))?;
        let path = path_for_c(&found.path).ok_or(KPACK_ERROR_PATH_DISCOVERY_FAILED)?;
        if path.len() >= path_out_size {
            return Err(KPACK_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: `path_out` has `path_out_size` > `path.len()` writable bytes, room for the
        // path and its NUL; the source is our own buffer, disjoint from the caller's.
        unsafe {
            std::ptr::copy_nonoverlapping(path.as_ptr(), path_out.cast::<u8>(), path.len());
            path_out.add(path.len()).write(0);
        }
        let offset =
            usize::try_from(found.offset).map_err(|_| KPACK_ERROR_PATH_DISCOVERY_FAILED)?;
        // SAFETY: the caller's contract on `offset_out`.
        unsafe { set(offset_out, offset) };
        Ok(())
    })
}

/// Loads the code object of wrapper `co_index` of a kpack'd binary for the first
/// architecture of `arch_list` any archive provides.
///
/// `hipk_metadata` is the msgpack map a HIPK wrapper points at (`kpack_search_paths`,
/// `kernel_name`); it is read only as far as its encoding goes, at most 64 KiB.
/// `binary_path` (from `kpack_discover_binary_path`) anchors the relative search paths.
/// `arch_list` holds `arch_count` ISA names in priority order, e.g.
/// `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-` then its generic target; NULL entries are
/// skipped.
///
/// For each architecture, each of its feature subsets (most specific first, any feature
/// order), each archive in search-path order: the first archive that lists the target and
/// holds `kernel_name#co_index` provides it. An archive that lists the target but lacks the
/// kernel does not end the search. Archives and path resolutions are cached in `cache`, so a
/// repeated load makes no file-system call. The caller frees `*code_object_out` with
/// `kpack_free_code_object` (or `free`). Thread-safe on one cache.
///
/// Returns:
///   KPACK_SUCCESS, with the outputs set
///   KPACK_ERROR_INVALID_ARGUMENT if a pointer is NULL or `arch_count` is 0
///   KPACK_ERROR_NOT_IMPLEMENTED if ROCM_KPACK_DISABLE was set when the cache was created
///   KPACK_ERROR_INVALID_METADATA if `hipk_metadata` is not HIPK metadata
///   KPACK_ERROR_ARCHIVE_NOT_FOUND if no search path leads to an archive
///   KPACK_ERROR_ARCH_NOT_FOUND if no archive lists any of the architectures
///   KPACK_ERROR_KERNEL_NOT_FOUND if archives list an architecture but none has the kernel
///   KPACK_ERROR_INVALID_FORMAT, _UNSUPPORTED_VERSION, _MSGPACK_PARSE_FAILED, _IO_ERROR if
///     nothing was found and an archive on the path failed to open;
///   KPACK_ERROR_DECOMPRESSION_FAILED if nothing was found and an entry failed to decode
///   KPACK_ERROR_INTEGRITY_CHECK_FAILED if nothing was found and an archive on the path is
///     damaged (reported over every other failure: an intact copy of that file would load)
///   KPACK_ERROR_OUT_OF_MEMORY if the copy cannot be allocated
///
/// # Safety
/// `cache` is NULL or a live cache; `hipk_metadata` is NULL or points at a msgpack value
/// readable to its end; `binary_path` is NULL or NUL-terminated; `arch_list` is NULL or holds
/// `arch_count` pointers, each NULL or NUL-terminated; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_load_code_object(
    cache: kpack_cache_t,
    hipk_metadata: *const c_void,
    binary_path: *const c_char,
    co_index: u32,
    arch_list: *const *const c_char,
    arch_count: usize,
    code_object_out: *mut *mut c_void,
    code_object_size_out: *mut usize,
) -> kpack_error_t {
    guard(|| {
        non_null(code_object_out)?;
        non_null(code_object_size_out)?;
        // SAFETY: both outputs are non-NULL and writable by the caller's contract.
        unsafe {
            code_object_out.write(std::ptr::null_mut());
            code_object_size_out.write(0);
        }
        non_null(cache)?;
        non_null(hipk_metadata)?;
        non_null(arch_list)?;
        if arch_count == 0 {
            return Err(KPACK_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: the caller's contract on `binary_path`.
        let binary_path = c_path(unsafe { c_str(binary_path) }?)?;
        // SAFETY: non-NULL, and a live cache by the caller's contract.
        let cache = unsafe { &(*cache).cache };
        if cache.config().disabled {
            return Err(KPACK_ERROR_NOT_IMPLEMENTED);
        }
        let base = hipk_metadata.cast::<u8>();
        // SAFETY: the reader asks for bytes in order and only while the msgpack value is not
        // complete, so every byte read is part of the value the caller vouches for.
        let (metadata, _) = read_metadata(|i| Some(unsafe { base.add(i).read() }))
            .map_err(|e| kpack_error_t::from(e.code()))?;
        let isas: Vec<&str> = (0..arch_count)
            // SAFETY: `arch_list` holds `arch_count` readable pointers.
            .map(|i| unsafe { arch_list.add(i).read() })
            .filter(|p| !p.is_null())
            // SAFETY: each non-NULL entry is NUL-terminated and outlives this call.
            .filter_map(|p| unsafe { CStr::from_ptr(p) }.to_str().ok())
            .collect();
        let copy = cache
            .load_with(&metadata, binary_path, co_index, &isas, |found| {
                malloc_copy(found.bytes).map(|p| (p, found.bytes.len()))
            })
            .map_err(|e: LoadError| kpack_error_t::from(e.code()))??;
        // SAFETY: as above.
        unsafe {
            code_object_out.write(copy.0);
            code_object_size_out.write(copy.1);
        }
        Ok(())
    })
}

/// Frees a code object from `kpack_load_code_object`. NULL is ignored.
///
/// # Safety
/// `code_object` is NULL or a pointer from `kpack_load_code_object` not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_free_code_object(code_object: *mut c_void) {
    // SAFETY: the pointer came from libc::malloc (malloc_copy), or is NULL, which free ignores.
    unsafe { libc::free(code_object) }
}

/// Opens the archive at `archive_path` (without a cache), calls `callback(arch, user_data)`
/// for each of its architectures in order until it returns false, and closes it. `arch` is
/// valid only during the call.
///
/// Returns KPACK_SUCCESS (also after an early stop), KPACK_ERROR_INVALID_ARGUMENT if
/// `archive_path` or `callback` is NULL, or the error `kpack_open` would return.
///
/// # Safety
/// `archive_path` is NULL or NUL-terminated; `callback` is safe to call with `user_data`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kpack_enumerate_architectures(
    archive_path: *const c_char,
    callback: kpack_arch_callback_t,
    user_data: *mut c_void,
) -> kpack_error_t {
    guard(|| {
        let callback = callback.ok_or(KPACK_ERROR_INVALID_ARGUMENT)?;
        // SAFETY: the caller's contract on `archive_path`.
        let handle = open_handle(unsafe { c_str(archive_path) }?)?;
        for arch in &handle.arches {
            // SAFETY: the caller vouches for the callback; `arch` lives until the handle drops.
            if !unsafe { callback(arch.as_ptr(), user_data) } {
                break;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_code_instead_of_unwinding_into_c() {
        let code = guard(|| panic!("a bug"));
        assert_eq!(code, KPACK_ERROR_IO_ERROR);
        assert_eq!(guard(|| Ok(())), KPACK_SUCCESS);
        assert_eq!(
            guard(|| Err(KPACK_ERROR_ARCH_NOT_FOUND)),
            KPACK_ERROR_ARCH_NOT_FOUND
        );
    }

    #[test]
    fn every_runtime_error_code_maps_to_the_c_value_of_the_same_number() {
        for (code, n) in ErrorCode::ALL.into_iter().zip(1u32..) {
            assert_eq!(kpack_error_t::from(code) as u32, n);
            assert_eq!(code as u32, n);
        }
    }
}
