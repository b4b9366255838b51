//! `SHT_RELR` decoding (the compact relative-relocation format of
//! `-z pack-relative-relocs`).
//!
//! The section is a sequence of 64-bit words:
//! * an even word is an address: it is relocated, and the "next" address becomes
//!   `word + 8`;
//! * an odd word is a bitmap: bit `i` (1 ≤ i ≤ 63) set means `next + (i - 1) * 8`
//!   is relocated; afterwards `next` advances by `63 * 8` whether or not any bit
//!   was set.
//!
//! A bitmap before the first address word has no base and is rejected.

const WORD: u64 = 8;
const BITMAP_SPAN: u64 = 63 * WORD;

/// One address relocated by an `SHT_RELR` section (a relative relocation whose
/// addend is the value stored at `r_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelrEntry {
    /// The index of the RELR word (address or bitmap) that produced this address.
    pub word_index: usize,
    /// The relocated address.
    pub r_offset: u64,
}

/// A malformed RELR sequence; `word_index` is the offending word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelrError {
    /// A bitmap word with no address word before it to give it a base.
    #[error("RELR word {word_index} is a bitmap, but no address word precedes it")]
    BitmapFirst {
        /// The offending word.
        word_index: usize,
    },
    /// An address computed from this word does not fit in 64 bits.
    #[error("RELR word {word_index} makes the relocated address overflow 64 bits")]
    Overflow {
        /// The offending word.
        word_index: usize,
    },
}

impl RelrError {
    /// The index of the offending word.
    pub fn word_index(&self) -> usize {
        match *self {
            RelrError::BitmapFirst { word_index } | RelrError::Overflow { word_index } => {
                word_index
            }
        }
    }
}

/// Decodes RELR words into relocated addresses, in encoding order.
pub fn decode(words: &[u64]) -> Result<Vec<RelrEntry>, RelrError> {
    let mut out = Vec::with_capacity(words.len());
    // `None` before the first address word; `Some(None)` once the next address
    // would overflow, which only matters if a bitmap then uses it.
    let mut next: Option<Option<u64>> = None;
    for (word_index, &word) in words.iter().enumerate() {
        if word & 1 == 0 {
            out.push(RelrEntry {
                word_index,
                r_offset: word,
            });
            next = Some(word.checked_add(WORD));
            continue;
        }
        let base = next
            .ok_or(RelrError::BitmapFirst { word_index })?
            .ok_or(RelrError::Overflow { word_index })?;
        let mut bits = word >> 1;
        let mut slot = 0u64;
        while bits != 0 {
            if bits & 1 != 0 {
                let r_offset = base
                    .checked_add(slot * WORD)
                    .ok_or(RelrError::Overflow { word_index })?;
                out.push(RelrEntry {
                    word_index,
                    r_offset,
                });
            }
            bits >>= 1;
            slot += 1;
        }
        next = Some(base.checked_add(BITMAP_SPAN));
    }
    Ok(out)
}
