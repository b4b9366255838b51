use thiserror::Error;

/// Everything that can go wrong while parsing target IDs, bundle IDs or
/// code-object headers. Offsets are byte offsets into the string or buffer
/// that was being parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TargetError {
    /// A target ID (either spelling) is malformed.
    #[error("invalid target id {input:?}: at byte {offset}: expected {expected}")]
    TargetId {
        /// The text that was parsed.
        input: String,
        /// Byte offset of the problem.
        offset: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// The same feature name appears twice in one target ID.
    #[error("invalid target id {input:?}: at byte {offset}: feature {name:?} is repeated")]
    DuplicateFeature {
        /// The text that was parsed.
        input: String,
        /// Byte offset of the problem.
        offset: usize,
        /// The repeated feature name.
        name: String,
    },
    /// More features than [`crate::MAX_FEATURES`]; rejected because the
    /// candidate list grows as 2^n.
    #[error("invalid target id {input:?}: at byte {offset}: more than {max} features")]
    TooManyFeatures {
        /// The text that was parsed.
        input: String,
        /// Byte offset of the problem.
        offset: usize,
        /// [`crate::MAX_FEATURES`].
        max: usize,
    },
    /// A bundle ID is malformed outside its target-ID part.
    #[error("invalid bundle id {input:?}: at byte {offset}: expected {expected}")]
    BundleId {
        /// The text that was parsed.
        input: String,
        /// Byte offset of the problem.
        offset: usize,
        /// What was expected there.
        expected: &'static str,
    },
    /// The target-ID part of a bundle ID (starting at `offset`) is malformed.
    #[error("invalid bundle id {input:?}: target id at byte {offset} is malformed")]
    BundleTarget {
        /// The text that was parsed.
        input: String,
        /// Byte offset of the problem.
        offset: usize,
        #[source]
        /// The underlying error.
        source: Box<TargetError>,
    },
    /// Host entries describe the host object and must not name a GPU target.
    #[error("invalid bundle id {input:?}: at byte {offset}: a host entry has no target id")]
    HostWithTarget {
        /// The text that was parsed.
        input: String,
        /// Byte offset of the problem.
        offset: usize,
    },
    /// The buffer does not start with the ELF magic `\x7fELF`.
    #[error("not an ELF file: bytes 0..4 are not \\x7fELF")]
    NotElf,
    /// The buffer ends before the 64-byte ELF64 header does.
    #[error("truncated ELF header: {len} bytes, the ELF64 header needs {needed}")]
    Truncated {
        /// Length of the buffer, in bytes.
        len: usize,
        /// Bytes the header needs.
        needed: usize,
    },
    /// An ELF header field holds a value that an AMDGPU HSA code object never has.
    #[error(
        "not an AMDGPU HSA code object: {field} at byte {offset} is {found:#x}, expected {expected}"
    )]
    HeaderField {
        /// The ELF header field.
        field: &'static str,
        /// Byte offset of the problem.
        offset: usize,
        /// What the input holds there.
        found: u32,
        /// What was expected there.
        expected: &'static str,
    },
    /// `e_flags & EF_AMDGPU_MACH` names no known AMDGCN processor.
    #[error(
        "unknown AMDGPU processor: EF_AMDGPU_MACH (e_flags at byte 48, mask 0xff) is {mach:#04x}"
    )]
    UnknownMach {
        /// The `EF_AMDGPU_MACH` value.
        mach: u8,
    },
}
