//! `kpack prune` of a static library (an `ar` archive): each member holding OffloadBinary
//! device code ([`holds_offload`]: a relocatable object with `.llvm.offloading`) is
//! pruned as it would be alone ([`prune_offload_bytes`]), every other member is copied
//! byte for byte, and the archive is written again by [`kpack_ar::rebuild`] (same
//! variant, member order, names, header fields and symbols; the symbol table gets the new
//! member offsets). Members are small objects: the output is built in memory.

use std::collections::BTreeSet;

use crate::offload::{holds_offload, prune_offload_bytes};
use crate::{PruneError, PrunedFile, Selection};

/// Whether `bytes` are an `ar` archive with a member [`prune_archive_bytes`] rewrites.
pub fn holds_prunable_member(bytes: &[u8]) -> bool {
    kpack_ar::is_ar(bytes)
        && kpack_ar::members(bytes).is_ok_and(|m| m.iter().any(|m| holds_offload(m.data)))
}

/// Prunes the members of the archive `input` in memory. In the result, sizes and counts are
/// the sums over the pruned members and the targets their union.
pub fn prune_archive_bytes(
    input: &[u8],
    selection: &Selection,
) -> Result<(Vec<u8>, PrunedFile), PruneError> {
    let members = kpack_ar::members(input)?;
    let mut total = PrunedFile {
        input_size: input.len() as u64,
        output_size: 0,
        fatbin_size: 0,
        pruned_fatbin_size: 0,
        removed: 0,
        bundles_rewritten: 0,
        bundles: 0,
        wrappers: 0,
        kept: Vec::new(),
        dropped: Vec::new(),
    };
    let (mut kept, mut dropped) = (BTreeSet::new(), BTreeSet::new());
    let mut replaced = Vec::with_capacity(members.len());
    for m in &members {
        if !holds_offload(m.data) {
            replaced.push(None);
            continue;
        }
        let (bytes, p) =
            prune_offload_bytes(m.data, selection).map_err(|source| PruneError::Member {
                name: m.name.clone(),
                offset: m.header_offset,
                source: Box::new(source),
            })?;
        total.fatbin_size += p.fatbin_size;
        total.pruned_fatbin_size += p.pruned_fatbin_size;
        total.bundles += p.bundles;
        total.bundles_rewritten += p.bundles_rewritten;
        kept.extend(p.kept);
        dropped.extend(p.dropped);
        replaced.push((p.bundles_rewritten > 0).then_some(bytes));
    }
    let bytes = kpack_ar::rebuild(input, &replaced)?;
    total.output_size = bytes.len() as u64;
    total.removed = input.len().saturating_sub(bytes.len()) as u64;
    total.kept = kept.into_iter().collect();
    total.dropped = dropped.into_iter().collect();
    Ok((bytes, total))
}
