use thiserror::Error;

/// Why a PE file (or its fat-binary parts) could not be read.
///
/// Every variant names the absolute file offset (and the section, when there is one) and
/// what was expected there.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PeError {
    /// The file does not start with `MZ`.
    #[error("not a PE file: bytes 0..2 are {found:02x?}, expected 4d 5a (\"MZ\")")]
    NotMz {
        /// Up to the first two bytes.
        found: Vec<u8>,
    },
    /// `e_lfanew` does not lead to the NT headers.
    #[error(
        "e_lfanew at offset 0x3c is {e_lfanew:#x}: expected an offset in 0x40..{limit:#x} (the file has {file_len:#x} bytes)"
    )]
    BadLfanew {
        /// The value found.
        e_lfanew: u64,
        /// The largest acceptable value (exclusive).
        limit: u64,
        /// The length of the file.
        file_len: u64,
    },
    /// The NT headers do not start with `PE\0\0`.
    #[error(
        "NT headers at offset {offset:#x}: signature is {found:02x?}, expected 50 45 00 00 (\"PE\\0\\0\")"
    )]
    NotPe {
        /// `e_lfanew`.
        offset: u64,
        /// The four bytes found.
        found: Vec<u8>,
    },
    /// A range the file refers to extends beyond its end.
    #[error(
        "{what}: bytes {offset:#x}..+{len:#x} lie beyond the end of the file ({file_len:#x} bytes)"
    )]
    OutOfBounds {
        /// What was being read.
        what: String,
        /// The range's file offset.
        offset: u64,
        /// The range's length.
        len: u64,
        /// The length of the file.
        file_len: u64,
    },
    /// A header field with a value the reader cannot accept.
    #[error("{header} at offset {offset:#x}: {field} is {found:#x}, expected {expected}")]
    BadField {
        /// Which header or record.
        header: &'static str,
        /// The field's absolute file offset.
        offset: u64,
        /// The field's name.
        field: &'static str,
        /// The value found.
        found: u64,
        /// What was expected.
        expected: &'static str,
    },
    /// A section header is malformed (name, raw data range).
    #[error("section [{index}] {name} (header at offset {header_offset:#x}): {problem}")]
    Section {
        /// Section index (from 0).
        index: usize,
        /// Its name as far as it could be read.
        name: String,
        /// File offset of its 40-byte header.
        header_offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// An RVA that should lie in a section's file bytes does not.
    #[error("{what}: RVA {rva:#x}..+{len:#x} is not inside the file bytes of any one section")]
    UnmappedRva {
        /// What was being read.
        what: String,
        /// The RVA.
        rva: u64,
        /// The length.
        len: u64,
    },
    /// A base relocation block is malformed.
    #[error("base relocation block at offset {offset:#x}: {problem}")]
    BaseRelocation {
        /// The block's file offset.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// The wrapper section is not a whole number of 24-byte wrappers, or not in the file.
    #[error("section [{index}] {name} at offset {offset:#x}: {problem}")]
    WrapperSection {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// `PointerToRawData`.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// A bundle inside the fat-binary section is malformed (offsets absolute in the file).
    #[error("section [{section}] .hip_fatbin at offset {offset:#x}: {source}")]
    Bundle {
        /// Section index.
        section: usize,
        /// `PointerToRawData`.
        offset: u64,
        /// The bundle error.
        source: kpack_bundle::BundleError,
    },
}

impl From<kpack_hostbin::bytes::OutOfBounds> for PeError {
    fn from(e: kpack_hostbin::bytes::OutOfBounds) -> Self {
        PeError::OutOfBounds {
            what: e.what,
            offset: e.offset,
            len: e.len,
            file_len: e.file_len,
        }
    }
}
