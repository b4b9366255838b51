use thiserror::Error;

/// Why an ELF file (or its fat-binary parts) could not be read.
///
/// Every variant names the file offset and/or the section it is about, and what was
/// expected there.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ElfError {
    /// The file does not start with the ELF magic.
    #[error("not an ELF file: bytes 0..4 are {found:02x?}, expected 7f 45 4c 46")]
    NotElf {
        /// Up to the first four bytes of the file.
        found: Vec<u8>,
    },
    /// A 32-bit ELF file.
    #[error("ELF32 file (EI_CLASS at offset 4 is 1): only ELF64 is supported")]
    Elf32,
    /// A big-endian ELF file.
    #[error(
        "big-endian ELF file (EI_DATA at offset 5 is 2): only little-endian files (x86-64, aarch64, ppc64le) are supported; big-endian ppc64 is not"
    )]
    BigEndian,
    /// `EI_CLASS` is neither ELF32 nor ELF64.
    #[error("invalid EI_CLASS {0} at offset 4: expected 2 (ELF64)")]
    InvalidClass(u8),
    /// `EI_DATA` is neither little- nor big-endian.
    #[error("invalid EI_DATA {0} at offset 5: expected 1 (little-endian)")]
    InvalidDataEncoding(u8),
    /// A range the file refers to extends beyond its end.
    #[error(
        "{what}: bytes {offset:#x}..+{len:#x} lie beyond the end of the file ({file_len:#x} bytes)"
    )]
    OutOfBounds {
        /// What was being read (a table, a section, a record).
        what: String,
        /// The range's file offset.
        offset: u64,
        /// The range's length.
        len: u64,
        /// The length of the file.
        file_len: u64,
    },
    /// An ELF header field with a value the parser cannot accept.
    #[error("ELF header at offset {offset:#x}: {field} is {found}, expected {expected}")]
    BadHeaderField {
        /// The header's file offset (0).
        offset: u64,
        /// The field's name.
        field: &'static str,
        /// The value found.
        found: u64,
        /// What was expected.
        expected: &'static str,
    },
    /// A table section whose `sh_entsize` is not its standard entry size.
    #[error(
        "section [{index}] {name} at offset {offset:#x}: sh_entsize is {found}, expected {expected}"
    )]
    BadEntsize {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// Section file offset.
        offset: u64,
        /// The `sh_entsize` found.
        found: u64,
        /// The standard entry size.
        expected: u64,
    },
    /// A table section whose size is not a whole number of entries.
    #[error(
        "section [{index}] {name} at offset {offset:#x}: sh_size {size:#x} is not a multiple of the entry size {entsize}"
    )]
    SizeNotMultiple {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// Section file offset.
        offset: u64,
        /// The `sh_size` found.
        size: u64,
        /// The entry size.
        entsize: u64,
    },
    /// A reference to a section index the file does not have.
    #[error("{what} refers to section index {index}, but the file has {count} sections")]
    BadSectionIndex {
        /// What holds the reference.
        what: String,
        /// The index referred to.
        index: u64,
        /// The number of sections.
        count: usize,
    },
    /// A section of another type than its use requires.
    #[error("section [{index}] {name}: expected {expected}, found sh_type {found:#x}")]
    BadSectionType {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// The `sh_type` found.
        found: u32,
        /// The types expected.
        expected: &'static str,
    },
    /// A string-table index with no NUL-terminated string there.
    #[error(
        "string table [{table}] at offset {table_offset:#x}: no NUL-terminated string at index {index:#x} (table size {size:#x}) for {what}"
    )]
    BadString {
        /// The string table's section index.
        table: usize,
        /// The string table's file offset.
        table_offset: u64,
        /// The index into the table.
        index: u64,
        /// The table's size.
        size: u64,
        /// What the string names.
        what: String,
    },
    /// A symbol index beyond the end of its symbol table.
    #[error("symbol table [{section}] {name}: symbol index {index} out of range ({count} symbols)")]
    BadSymbolIndex {
        /// The symbol table's section index.
        section: usize,
        /// The symbol table's name.
        name: String,
        /// The index asked for.
        index: u64,
        /// The number of symbols.
        count: u64,
    },
    /// A malformed `SHT_RELR` section.
    #[error("SHT_RELR section [{section}] {name}, word at offset {offset:#x}: {source}")]
    Relr {
        /// Section index.
        section: usize,
        /// Section name.
        name: String,
        /// File offset of the offending word.
        offset: u64,
        /// What is wrong with it.
        #[source]
        source: crate::relr::RelrError,
    },
    /// A `.hipFatBinSegment` that is not a whole number of wrappers.
    #[error(
        ".hipFatBinSegment [{section}] at offset {offset:#x}: size {size:#x} is not a multiple of 24 (one __CudaFatBinaryWrapper)"
    )]
    WrapperSectionSize {
        /// Section index.
        section: usize,
        /// Section file offset.
        offset: u64,
        /// Section size.
        size: u64,
    },
    /// A `.hipFatBinSegment` without file bytes.
    #[error(
        ".hipFatBinSegment [{section}] at offset {offset:#x} is SHT_NOBITS: expected wrapper bytes in the file"
    )]
    WrapperSectionNobits {
        /// Section index.
        section: usize,
        /// Section file offset.
        offset: u64,
    },
    /// `.hip_fatbin` whose bundles do not parse (`source`'s offsets are absolute in the file).
    #[error(".hip_fatbin [{section}] at file offset {offset:#x}: {source}")]
    Bundle {
        /// Section index.
        section: usize,
        /// Section file offset.
        offset: u64,
        /// Why the bundles do not parse.
        #[source]
        source: kpack_bundle::BundleError,
    },
}

impl From<kpack_hostbin::bytes::OutOfBounds> for ElfError {
    fn from(e: kpack_hostbin::bytes::OutOfBounds) -> Self {
        ElfError::OutOfBounds {
            what: e.what,
            offset: e.offset,
            len: e.len,
            file_len: e.file_len,
        }
    }
}
