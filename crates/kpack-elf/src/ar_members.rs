//! The ELF members of an `ar` archive (a static library), inspected as fat binaries; the
//! archive format itself is `kpack-ar`'s.

use kpack_ar::{ArError, Member, members};
use thiserror::Error;

use crate::ElfError;
use crate::fatbin::{FatBinary, inspect};

/// Why an archive's members could not be inspected.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InspectArError {
    /// The archive does not read.
    #[error(transparent)]
    Ar(#[from] ArError),
    /// An ELF member that does not parse.
    #[error("member {name} at offset {offset:#x}: {source}")]
    Elf {
        /// The member's name.
        name: String,
        /// Offset of the member's header.
        offset: u64,
        /// Why it does not parse.
        #[source]
        source: ElfError,
    },
}

/// An archive member and, for ELF members, its inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedMember<'a> {
    /// The member.
    pub member: Member<'a>,
    /// `None` for members that are not ELF files.
    pub fat: Option<FatBinary>,
}

/// Every member of the archive `data`, with an inspection of those that are ELF files.
pub fn inspect_ar(data: &[u8]) -> Result<Vec<InspectedMember<'_>>, InspectArError> {
    members(data)?
        .into_iter()
        .map(|member| {
            let fat = if crate::is_elf(member.data) {
                Some(inspect(member.data).map_err(|source| InspectArError::Elf {
                    name: member.name.clone(),
                    offset: member.offset,
                    source,
                })?)
            } else {
                None
            };
            Ok(InspectedMember { member, fat })
        })
        .collect()
}
