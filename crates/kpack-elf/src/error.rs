use thiserror::Error;

/// Why an ELF file (or its fat-binary parts) could not be read.
///
/// Every variant names the file offset and/or the section it is about, and what was
/// expected there.
#[derive(Debug, Error)]
pub enum ElfError {
    #[error("not an ELF file: bytes 0..4 are {found:02x?}, expected 7f 45 4c 46")]
    NotElf { found: Vec<u8> },
    #[error("ELF32 file (EI_CLASS at offset 4 is 1): only ELF64 is supported")]
    Elf32,
    #[error("big-endian ELF file (EI_DATA at offset 5 is 2): only little-endian is supported")]
    BigEndian,
    #[error("invalid EI_CLASS {0} at offset 4: expected 2 (ELF64)")]
    InvalidClass(u8),
    #[error("invalid EI_DATA {0} at offset 5: expected 1 (little-endian)")]
    InvalidDataEncoding(u8),
    #[error(
        "{what}: bytes {offset:#x}..+{len:#x} lie beyond the end of the file ({file_len:#x} bytes)"
    )]
    OutOfBounds {
        what: String,
        offset: u64,
        len: u64,
        file_len: u64,
    },
    #[error("ELF header at offset {offset:#x}: {field} is {found}, expected {expected}")]
    BadHeaderField {
        offset: u64,
        field: &'static str,
        found: u64,
        expected: &'static str,
    },
    #[error(
        "section [{index}] {name} at offset {offset:#x}: sh_entsize is {found}, expected {expected}"
    )]
    BadEntsize {
        index: usize,
        name: String,
        offset: u64,
        found: u64,
        expected: u64,
    },
    #[error(
        "section [{index}] {name} at offset {offset:#x}: sh_size {size:#x} is not a multiple of the entry size {entsize}"
    )]
    SizeNotMultiple {
        index: usize,
        name: String,
        offset: u64,
        size: u64,
        entsize: u64,
    },
    #[error("{what} refers to section index {index}, but the file has {count} sections")]
    BadSectionIndex {
        what: String,
        index: u64,
        count: usize,
    },
    #[error("section [{index}] {name}: expected {expected}, found sh_type {found:#x}")]
    BadSectionType {
        index: usize,
        name: String,
        found: u32,
        expected: &'static str,
    },
    #[error(
        "string table [{table}] at offset {table_offset:#x}: no NUL-terminated string at index {index:#x} (table size {size:#x}) for {what}"
    )]
    BadString {
        table: usize,
        table_offset: u64,
        index: u64,
        size: u64,
        what: String,
    },
    #[error("symbol table [{section}] {name}: symbol index {index} out of range ({count} symbols)")]
    BadSymbolIndex {
        section: usize,
        name: String,
        index: u64,
        count: u64,
    },
    #[error("SHT_RELR section [{section}] {name}, word at offset {offset:#x}: {source}")]
    Relr {
        section: usize,
        name: String,
        offset: u64,
        #[source]
        source: crate::relr::RelrError,
    },
    #[error(
        ".hipFatBinSegment [{section}] at offset {offset:#x}: size {size:#x} is not a multiple of 24 (one __CudaFatBinaryWrapper)"
    )]
    WrapperSectionSize {
        section: usize,
        offset: u64,
        size: u64,
    },
    #[error(
        ".hipFatBinSegment [{section}] at offset {offset:#x} is SHT_NOBITS: expected wrapper bytes in the file"
    )]
    WrapperSectionNobits { section: usize, offset: u64 },
    /// `source`'s offsets are absolute in the file.
    #[error(".hip_fatbin [{section}] at file offset {offset:#x}: {source}")]
    Bundle {
        section: usize,
        offset: u64,
        #[source]
        source: kpack_bundle::BundleError,
    },
}
