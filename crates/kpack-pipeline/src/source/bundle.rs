//! A bundle's entries handed to a visitor: decoded whole, or, a CCOB above [`STREAM_ABOVE`],
//! read as a stream in parts and pieces (see the parent module's doc).

use std::borrow::Cow;

use kpack_bundle::{
    BundleFormat, DecodedBundle, EntryHeader, EntryStream, MAX_STREAM_WINDOW, Piece,
};
use kpack_target::BundleId;

use super::{
    BundleSlot, CodePieces, Container, DeviceCode, FoundBundle, Visitor, check_code_object_target,
    decoded_size,
};
use crate::FileBytes;
use crate::error::SourceError;

/// Decodes the bundle at `slot` of `elf` (an ELF, or a raw bundle file) and visits it and its
/// entries; `base` is the absolute offset of `elf` in the file (an `ar` member's). A CCOB
/// decoding to more than [`STREAM_ABOVE`] is read as a stream (see the module doc). A CCOB
/// whose stored hash is not that of its decompressed bytes is an error, for every visitor
/// ([`DecodedBundle::decode`], [`EntryStream::next_entry`]). With `mapping` (the file mapping
/// `elf` lies in), the pages of a streamed CCOB are dropped as its decoder reads past them.
pub fn walk_bundle(
    elf: &[u8],
    slot: &BundleSlot,
    base: u64,
    member: Option<&str>,
    mapping: Option<&FileBytes>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
    let bytes = &elf[slot.range.clone()];
    let index = slot.index;
    let file_offset = base + slot.range.start as u64;
    let in_bundle = |in_payload: bool| {
        move |e: kpack_bundle::BundleError| SourceError::InBundle {
            index,
            file_offset,
            section_offset: slot.section_offset,
            in_payload,
            source: if in_payload {
                e
            } else {
                e.shifted(file_offset)
            },
        }
    };
    let decoded_size = decoded_size(bytes);
    let found = |format, uncompressed_size, entries| FoundBundle {
        member,
        index,
        file_offset,
        len: bytes.len() as u64,
        wrappers: &slot.wrappers,
        format,
        uncompressed_size,
        entries,
    };
    let place = Placed {
        member,
        slot,
        stored_at: None,
    };
    let _decoding = reserve_decoding(bytes);
    if decoded_size > STREAM_ABOVE {
        let mut stream = EntryStream::open(bytes).map_err(in_bundle(false))?.ok_or(
            SourceError::CannotStream {
                index,
                file_offset,
                decoded_size,
                limit: STREAM_ABOVE,
            },
        )?;
        let entries = stream.entry_headers().to_vec();
        visitor.bundle(&found(
            stream.format(),
            stream.uncompressed_size(),
            &entries,
        ))?;
        let mut index = 0;
        let next = |pieces: Option<Piece<'_>>| {
            let entry = match pieces {
                None => stream
                    .next_entry()
                    .map(|e| e.map(|e| (e.index, Cow::Owned(e.data)))),
                Some(pieces) => stream
                    .next_entry_in_pieces(pieces)
                    .map(|e| e.map(|_| (index, Cow::Borrowed(&[][..])))),
            }
            .map_err(in_bundle(true))?;
            index += 1;
            if let Some(map) = mapping {
                // A 380 MB CCOB would otherwise stay resident as it is read.
                map.release(stream.consumed_input());
            }
            Ok(entry)
        };
        return visit_entries(&place, &entries, PART_BUDGET, next, visitor);
    }
    let decoded = DecodedBundle::decode(bytes).map_err(in_bundle(false))?;
    let compressed = !matches!(decoded.format(), BundleFormat::Uncompressed);
    if let Some(map) = mapping.filter(|_| compressed) {
        // Decoded into a buffer of its own: the compressed pages (55 MB of a rocPRIM test's
        // 167 MB bundle) are not read again.
        map.release(bytes);
    }
    let bundle = decoded.bundle().map_err(in_bundle(compressed))?;
    let entries = bundle.entry_headers();
    visitor.bundle(&found(*decoded.format(), bundle.len(), &entries))?;
    let place = Placed {
        stored_at: (!compressed).then_some(file_offset),
        ..place
    };
    let mut data = bundle.entries().iter().enumerate();
    let next = |pieces: Option<Piece<'_>>| {
        Ok(data.next().map(|(i, e)| match pieces {
            None => (i, Cow::Borrowed(e.data)),
            Some(pieces) => {
                pieces(e.data);
                (i, Cow::Borrowed(&[][..]))
            }
        }))
    };
    visit_entries(&place, &entries, u64::MAX, next, visitor)
}

/// A CCOB decoding to more than this is read as a stream, never decoded whole: streaming
/// holds zstd's window (up to 128 MiB, what clang's long-distance matching uses) and a part
/// ([`PART_BUDGET`]), so it saves memory only above their sum ([`decode_memory`]). Below it,
/// a bundle decoded whole is within [`kpack_bundle::MAX_DECOMPRESSED`].
pub const STREAM_ABOVE: u64 = 192 << 20;

/// The most bytes of code objects one part of a streamed bundle holds: a code object larger
/// than this is a part alone, or goes in pieces to a visitor that takes them
/// ([`Visitor::code_pieces`]). Small, so that a streamed bundle holds little beside its
/// window and two fit in the working memory at once (each with the thread hashing it, four
/// threads' work: issue 38's cores busy).
pub const PART_BUDGET: u64 = 16 << 20;

/// What a streamed bundle holds beside its window and its part: the payload waiting for its
/// MD5 (4 MiB), the decoder's buffers, the coder of a code object taken in pieces and the
/// frame it codes.
const STREAM_SLACK: u64 = 8 << 20;

/// The memory decoding the bundle at `bytes[0]` takes: a CCOB's decompressed size and its
/// compressed bytes (the pages of a mapped file its decoding reads: a third of the decoded
/// size in a rocPRIM test's), or what reading it as a stream holds (above [`STREAM_ABOVE`]:
/// its zstd window, a part and [`STREAM_SLACK`]; the compressed pages are dropped as it is
/// read); 0 for a bundle that is not compressed (its entries are read where they are stored).
pub(super) fn decode_memory(bytes: &[u8]) -> u64 {
    match decoded_size(bytes) {
        0 => 0,
        size if size <= STREAM_ABOVE => size + bytes.len() as u64,
        size => {
            let window = kpack_bundle::stream_window(bytes).unwrap_or(MAX_STREAM_WINDOW);
            (window + PART_BUDGET + STREAM_SLACK).min(size)
        }
    }
}

/// Reserves the [`decode_memory`] of the bundle at `bytes[0]` in the process's decoding gate
/// until the reservation is dropped: whoever opens a bundle's decoder holds one, even to read
/// its header (a CCOB's decoder allocates its window, up to the decoded size, before the first
/// byte comes out).
pub(super) fn reserve_decoding(bytes: &[u8]) -> kpack_concurrency::Reservation<'static> {
    DECODING.reserve(decode_memory(bytes))
}

/// Where a bundle's entries are: its member and slot, and the file offset of the bundle
/// when its entries are stored there uncompressed.
struct Placed<'p> {
    member: Option<&'p str>,
    slot: &'p BundleSlot,
    stored_at: Option<u64>,
}

impl Placed<'_> {
    /// The device code object of entry `entry` (of `bundle_id`, among `entries`) with `data`;
    /// its range in the file when the bundle is stored there uncompressed.
    fn code<'c>(
        &'c self,
        entries: &[EntryHeader],
        entry: usize,
        bundle_id: &'c BundleId,
        data: &'c [u8],
    ) -> DeviceCode<'c> {
        DeviceCode {
            member: self.member,
            container: Container::Bundle,
            bundle: self.slot.index,
            wrappers: &self.slot.wrappers,
            entry,
            bundle_id,
            data,
            file_range: self.stored_at.map(|at| {
                let start = at + entries[entry].offset;
                start..start + data.len() as u64
            }),
        }
    }
}

/// Hands the data of a bundle's `entries` to `visitor`, as `next` gives it (entry index and
/// bytes, in header order; given a taker of pieces, the bytes go there and it gives none):
/// device code objects in parts of at most `part_budget` bytes ([`Visitor::device_bundle`])
/// or, a code object over it, in pieces if the visitor takes them
/// ([`Visitor::code_pieces`]), each checked against its entry's target, and the other
/// entries one by one ([`Visitor::other_entry`]), between the parts.
fn visit_entries<'d>(
    place: &Placed<'_>,
    entries: &[EntryHeader],
    part_budget: u64,
    mut next: impl FnMut(Option<Piece<'_>>) -> Result<Option<(usize, Cow<'d, [u8]>)>, SourceError>,
    visitor: &mut dyn Visitor,
) -> Result<(), SourceError> {
    let mut part: Vec<(usize, BundleId, Cow<'d, [u8]>)> = Vec::new();
    let mut part_bytes = 0u64;
    let hand_over = |part: &mut Vec<(usize, BundleId, Cow<'d, [u8]>)>,
                     visitor: &mut dyn Visitor| {
        if part.is_empty() {
            return Ok(());
        }
        let codes: Vec<DeviceCode<'_>> = part
            .iter()
            .map(|(entry, id, data)| place.code(entries, *entry, id, data))
            .collect();
        let result = visitor.device_bundle(&codes);
        part.clear();
        result
    };
    // The part is handed over before the entry that would not fit in it is read (its size is
    // in the header): a streamed bundle then holds one part, not a part and the next entry
    // (RCCL's entries are 120-200 MB each).
    let mut coming = 0;
    loop {
        if let Some(header) = entries.get(coming) {
            let id = BundleId::parse(&header.triple)?;
            let device = id.target().is_some();
            if !device || part_bytes + header.size > part_budget {
                hand_over(&mut part, visitor)?;
                part_bytes = 0;
            }
            if device && header.size > part_budget {
                let code = place.code(entries, coming, &id, &[]);
                if let Some(pieces) = visitor.code_pieces(&code, header.size)? {
                    visit_in_pieces(place.slot.index, coming, &id, pieces, &mut next)?;
                    coming += 1;
                    continue;
                }
            }
        }
        let Some((entry, data)) = next(None)? else {
            break;
        };
        coming = entry + 1;
        let id = BundleId::parse(&entries[entry].triple)?;
        if id.target().is_none() {
            visitor.other_entry(entry, &data)?;
            continue;
        }
        check_code_object_target(&id, &data, place.slot.index, entry)?;
        part_bytes += data.len() as u64;
        part.push((entry, id, data));
    }
    hand_over(&mut part, visitor)
}

/// Has `next` hand entry `entry` of bundle `bundle` (a device code object of `id`) to
/// `pieces`; checks its target from its ELF header, kept as it passes, before `finish`.
fn visit_in_pieces<'d>(
    bundle: usize,
    entry: usize,
    id: &BundleId,
    mut pieces: Box<dyn CodePieces + '_>,
    next: &mut impl FnMut(Option<Piece<'_>>) -> Result<Option<(usize, Cow<'d, [u8]>)>, SourceError>,
) -> Result<(), SourceError> {
    let mut head = Vec::with_capacity(ELF_HEADER_LEN);
    let mut failed = None;
    let mut take = |bytes: &[u8]| {
        if failed.is_some() {
            return;
        }
        let wanted = (ELF_HEADER_LEN - head.len()).min(bytes.len());
        head.extend_from_slice(&bytes[..wanted]);
        failed = pieces.piece(bytes).err();
    };
    if next(Some(&mut take))?.is_none() {
        unreachable!("the entries a bundle's header lists are all read");
    }
    if let Some(e) = failed {
        return Err(e);
    }
    check_code_object_target(id, &head, bundle, entry)?;
    pieces.finish()
}

/// What the target check of a code object reads: its ELF header.
const ELF_HEADER_LEN: usize = 64;

/// The bytes of decompressed bundles alive at once in this process, across every thread and
/// walk: a bundle is decoded only while those of the others fit (or when none is), so
/// parallel walks (verify's workers, transform's) cannot each hold a 160 MB bundle at the
/// same time. A bundle is released once visited. Its budget is the working memory's, so that
/// two bundles read as streams ([`decode_memory`]) decode at once.
static DECODING: kpack_concurrency::MemoryGate =
    kpack_concurrency::MemoryGate::new(kpack_concurrency::WORKING_BUDGET);
