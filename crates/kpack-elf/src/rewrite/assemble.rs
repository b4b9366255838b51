//! The output assembled from kept input and new bytes, and the last checks and summary.

use super::marker_segment::MarkerSegment;
use super::sections::{SectionNumbering, SectionTable, number_sections, patch_elf_header};
use super::split::KeptInput;
use super::{Cut, Rewrite, RewriteError, RewriteSummary, layout, shdr_bytes};
use crate::elf::{ElfFile, SHDR_SIZE};
use crate::fatbin::MARKER_SECTION;
use kpack_hostbin::splice::{Patches, Piece, Splice};

/// The last steps of a rewrite (and of a restore, [`crate::restore`]): the ELF header, the
/// output as pieces around the new segment's `payload`, the check that every edit lies in
/// kept input, and the summary.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish(
    elf: &ElfFile<'_>,
    cut: Cut,
    kept: &KeptInput,
    segment: &MarkerSegment,
    mut sections: SectionTable,
    mut patches: Patches,
    payload: Piece,
    wrappers: usize,
) -> Result<Rewrite, RewriteError> {
    let data = elf.data();
    let numbering = SectionNumbering {
        shoff: sections.table_offset,
        ..number_sections(elf, kept, &mut sections.headers)?
    };
    let sections = &sections;
    patch_elf_header(data, segment, numbering, &mut patches)?;
    let pieces = assemble(elf, cut, kept, segment, sections, &patches, payload)?;
    // The input the output leaves out: the cut, and the freed pages the segment fills.
    let dropped = match &segment.hole {
        Some(h) => Cut {
            at: h.at - h.gap,
            len: h.gap + h.len + cut.len,
        },
        None => cut,
    };
    check_patches_in_kept_input(&patches, dropped, kept.end)?;
    Ok(Rewrite {
        splice: Splice { pieces, patches },
        summary: RewriteSummary {
            input_len: data.len() as u64,
            output_len: sections.table_offset + sections.headers.len() as u64 * SHDR_SIZE,
            removed: cut.len,
            marker_vaddr: segment.marker_vaddr(),
            marker_offset: segment.marker_offset(),
            phdr_moved: segment.moved_table.is_some(),
            wrappers,
        },
    })
}

/// The output as pieces: the kept input around the cut, zero padding up to the new
/// segment, the segment (its payload streamed for new `.hip_fatbin` contents), the
/// re-emitted `.shstrtab` and the section header table.
fn assemble(
    elf: &ElfFile<'_>,
    cut: Cut,
    kept: &KeptInput,
    segment: &MarkerSegment,
    sections: &SectionTable,
    patches: &Patches,
    payload: Piece,
) -> Result<Vec<Piece>, RewriteError> {
    // Only the table and the padding before the marker: the payload is a piece of its own
    // (new `.hip_fatbin` contents can be a library's bundles, streamed).
    let mut segment_bytes = Vec::with_capacity(segment.marker_in_segment as usize);
    if let Some(table) = &segment.moved_table {
        segment_bytes.extend_from_slice(table);
    }
    segment_bytes.resize(segment.marker_in_segment as usize, 0);
    let segment_pieces = [Piece::Bytes(segment_bytes), payload];
    let mut pieces = Vec::new();
    match &segment.hole {
        Some(hole) => {
            pieces.push(Piece::Input {
                start: 0,
                end: hole.at - hole.gap,
            });
            if hole.gap > 0 {
                pieces.push(Piece::Zeros(hole.gap));
            }
            pieces.extend(segment_pieces);
            pieces.push(Piece::Zeros(hole.len - segment.len));
            pieces.push(Piece::Input {
                start: cut.at + cut.len,
                end: kept.end,
            });
        }
        None => {
            if cut.len > 0 {
                pieces.push(Piece::Input {
                    start: 0,
                    end: cut.at,
                });
                pieces.push(Piece::Input {
                    start: cut.at + cut.len,
                    end: kept.end,
                });
            } else {
                pieces.push(Piece::Input {
                    start: 0,
                    end: kept.end,
                });
            }
            pieces.push(Piece::Zeros(segment.offset - kept.len));
            pieces.extend(segment_pieces);
        }
    }
    // The input's names as a piece of input, not a copy: a test executable of rocPRIM has
    // 27 MB of them (its functions' sections), and a split holds the plans of the fat binaries
    // it writes (issue 38: 55 MiB allocated at the peak of a split of the distribution).
    // Names the edits of the input touch are copied as the input has them: restoring the
    // reference's `librelr.so` edits its `.shstrtab` where it lies, in the kept input
    // (`refmade` tests).
    let names = elf.section_data(&kept.shstr)?;
    let names_range = kept.shstr.sh_offset..kept.shstr.sh_offset + names.len() as u64;
    let edited = patches
        .iter()
        .any(|(p, bytes)| p < names_range.end && p + bytes.len() as u64 > names_range.start);
    let mut names_end = sections.names_offset + names.len() as u64;
    if edited {
        pieces.push(Piece::Bytes(names.to_vec()));
    } else if !names.is_empty() {
        pieces.push(Piece::Input {
            start: names_range.start,
            end: names_range.end,
        });
    }
    if sections.marker_added {
        let added = format!("{MARKER_SECTION}\0").into_bytes();
        names_end += added.len() as u64;
        pieces.push(Piece::Bytes(added));
    }
    pieces.push(Piece::Zeros(sections.table_offset - names_end));
    pieces.push(Piece::Bytes(
        sections.headers.iter().flat_map(shdr_bytes).collect(),
    ));
    Ok(pieces)
}

/// Every edit must lie inside kept input.
pub(super) fn check_patches_in_kept_input(
    patches: &Patches,
    cut: Cut,
    kept_end: u64,
) -> Result<(), RewriteError> {
    for (at, b) in patches.iter() {
        let e = at + b.len() as u64;
        if e > kept_end || cut.overlaps(at, b.len() as u64) {
            return Err(layout(format!(
                "an edit at file offset {at:#x} falls in removed bytes"
            )));
        }
    }
    Ok(())
}
