//! Sections of a relocatable object given new, shorter contents in place (`kpack prune` of
//! `.llvm.offloading`): everything after each such section (later sections, the section
//! header table) moves down by the bytes it saved, rounded down to the largest alignment
//! of the file's sections so that every section keeps its alignment (the remainder is zero
//! padding); the section headers and `e_shoff` say so.
//!
//! Only a relocatable object can be edited so: it has no program headers, and nothing
//! addresses a file offset. Whether a relocation or symbol points into a shortened section
//! is the caller's to check.

use object::LittleEndian as LE;
use object::elf::FileHeader64;
use object::pod::bytes_of;

use kpack_hostbin::bytes::{record, record_size};
use kpack_hostbin::splice::{Patches, Piece, Splice};

use crate::elf::{ElfFile, SHDR_SIZE};
use crate::error::ElfError;
use crate::rewrite::{RewriteError, layout, shdr_bytes};

/// The output of `elf` with each section of `edits` (section index, new contents no longer
/// than the old, in file order) shortened in place.
pub fn plan(elf: &ElfFile<'_>, edits: &[(usize, Vec<u8>)]) -> Result<Splice, RewriteError> {
    let data = elf.data();
    let headers = elf.section_headers();
    let align = headers
        .iter()
        .map(|s| s.sh_addralign)
        .chain([8])
        .filter(|a| a.is_power_of_two())
        .max()
        .unwrap_or(8);
    let h = elf.header();
    let table = h.e_shoff..h.e_shoff + headers.len() as u64 * SHDR_SIZE;
    // The headers are patched in the input's bytes, so no edit may replace them.
    let header_len = record_size::<FileHeader64<LE>>();
    // (end of the edited section in the input, bytes removed from there on).
    let mut moves: Vec<(u64, u64)> = Vec::with_capacity(edits.len());
    let mut pieces = Vec::with_capacity(edits.len() * 3 + 1);
    let mut cursor = 0;
    for (index, new) in edits {
        let s = elf.section(*index as u64, "shortened section")?;
        let (offset, old) = (s.sh_offset, s.sh_size);
        let Some(saved) = old.checked_sub(new.len() as u64) else {
            return Err(layout(format!(
                "section [{index}] {}: new contents of {} bytes are longer than its {old}",
                s.name,
                new.len()
            )));
        };
        let end = offset.saturating_add(old);
        if offset < cursor.max(header_len) || (offset < table.end && table.start < end) {
            return Err(layout(format!(
                "section [{index}] {} overlaps an earlier edit, the ELF header or the section header table",
                s.name
            )));
        }
        let removed = saved - saved % align;
        pieces.push(Piece::Input {
            start: cursor,
            end: offset,
        });
        pieces.push(Piece::Bytes(new.clone()));
        pieces.push(Piece::Zeros(saved - removed));
        cursor = end;
        moves.push((cursor, removed));
    }
    pieces.push(Piece::Input {
        start: cursor,
        end: data.len() as u64,
    });
    let moved = |at: u64| -> u64 {
        at - moves
            .iter()
            .filter(|(end, _)| *end <= at)
            .map(|(_, r)| r)
            .sum::<u64>()
    };
    let mut patches = Patches::default();
    let mut header: FileHeader64<LE> = *record(data, 0, "ELF header").map_err(ElfError::from)?;
    header.e_shoff.set(LE, moved(h.e_shoff));
    patches.add(0, bytes_of(&header).to_vec())?;
    for s in headers {
        let mut s = s.clone();
        if let Some((_, new)) = edits.iter().find(|(index, _)| *index == s.index) {
            s.sh_size = new.len() as u64;
        }
        s.sh_offset = moved(s.sh_offset);
        patches.add(
            table.start + s.index as u64 * SHDR_SIZE,
            shdr_bytes(&s).to_vec(),
        )?;
    }
    Ok(Splice { pieces, patches })
}
