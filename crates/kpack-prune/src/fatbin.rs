//! `kpack prune`: a fat binary keeps only the device code of the targets asked for, and stays
//! a fat binary any stock HIP runtime loads (CUDA's `nvprune`, for ROCm).
//!
//! 1. Every bundle of `.hip_fatbin` is rewritten with only its host entry and the device
//!    entries [`Selection`] keeps, on worker threads, one bundle in flight per worker within
//!    [`ordered::IN_FLIGHT`] ([`ordered::for_each_ordered`]). An uncompressed bundle stays
//!    uncompressed, its entries at the alignment the input's have: only its new header is
//!    made ([`kpack_bundle::uncompressed_layout`]), the kept entries are copied from the input
//!    straight into the output when it is written, and dropped ones are never read beyond
//!    the code-object header checked against the entry's target. A CCOB is refused unless
//!    its stored hash is that of its decompressed bytes (recompressed, a damaged payload
//!    would get a new, valid hash); it stays a CCOB of the same version and method,
//!    recompressed ([`kpack_bundle::CcobWriter`]: zstd level [`ZSTD_LEVEL`], as
//!    clang-offload-bundler; zlib level [`ZLIB_LEVEL`]): its new entry table is made from
//!    the input's, then the kept entries are compressed as they are decoded (a CCOB above
//!    [`source::STREAM_ABOVE`] read as a stream), so neither bundle is ever held whole, and
//!    the hash check, at the end of the input's stream, fails the prune. A bundle that
//!    keeps every entry is copied as it is. Code objects are copied byte for byte.
//! 2. The pruned bundles are laid out, in file order and at the alignment the input's
//!    bundles have, as parts of the input, new headers and padding; recompressed CCOBs go to
//!    a spool (an anonymous temporary file, so memory never holds them all).
//! 3. The host rewrite ([`kpack_elf::rewrite::plan_edit`] with [`FatbinEdit::Move`], the
//!    layout `transform` writes) releases the whole pages of the old `.hip_fatbin`, puts the
//!    packed bundles as its new contents into the segment where `transform` puts the
//!    marker, and points every wrapper at its pruned bundle. When that would not make the
//!    file smaller (a section of a few pages), the bundles replace the old contents in place
//!    instead ([`FatbinEdit::Replace`]), and nothing else in the file moves. Its output is streamed from the mapped
//!    input (pages released once written) and the spool, checked by [`kpack_elf::verify()`] and inspected again (every
//!    wrapper leads to its bundle, every bundle is where it was planned).
//!
//! The caller stages the output ([`kpack_fs::Stage`]) and publishes it, so nothing partial
//! ever sits at a final path. The output is the same for any thread count.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::Path;

use kpack_bundle::{BundleFormat, CompressionMethod};
use kpack_concurrency::ordered;
use kpack_elf::FatBinaryKind;
use kpack_elf::rewrite::{FatbinEdit, RewriteError};
use kpack_pipeline::error::{SourceError, io_error};
use kpack_pipeline::source::{self, BundleSlot, DeviceCode, FoundBundle, Visitor};
use kpack_target::{BundleId, TargetId};

use crate::{PruneError, PrunedFile, Selection};

/// The zstd level of recompressed CCOBs: clang-offload-bundler's default (with its
/// long-distance matching), so a pruned bundle is what clang would have written for the kept
/// entries. Faster levels write larger bundles: librocblas.so.5.2's 65 bundles keeping
/// gfx90a and gfx1100 (144 MB uncompressed) take 36.6 MB at level 3, 38.3 MB (+5 %) at level
/// 1 and 42.5 MB (+16 %) at `--fast=1` (`zstd --long=27`), while compressing them is a small
/// part of the prune (decompressing and hashing the 1 GB of input bundles is most of it).
pub const ZSTD_LEVEL: i32 = 3;
/// The zlib level of recompressed CCOBs (zlib's default).
pub const ZLIB_LEVEL: i32 = 6;

/// A run of the new `.hip_fatbin` contents, which are written straight into the output.
#[derive(Debug)]
enum Part {
    /// Input bytes: a bundle kept whole, or a kept entry of an uncompressed bundle.
    Input(Range<usize>),
    /// Zero bytes (alignment).
    Zeros(u64),
    /// These bytes: a rewritten bundle's header.
    Bytes(Vec<u8>),
    /// A recompressed CCOB's compressed stream: in its own temporary file (`file`) as its
    /// worker wrote it, then in the spool (`None`), where the pruned bundles are gathered.
    Compressed {
        /// Its own file, until it is spooled.
        file: Option<File>,
        /// Offset in its file.
        at: u64,
        /// Length.
        len: u64,
    },
}

impl Part {
    fn len(&self) -> u64 {
        match self {
            Part::Input(r) => (r.end - r.start) as u64,
            Part::Zeros(n) => *n,
            Part::Bytes(b) => b.len() as u64,
            Part::Compressed { len, .. } => *len,
        }
    }
}

/// One bundle after pruning: the parts its new bytes are made of, and the device targets it
/// kept and dropped.
struct PrunedBundle {
    parts: Vec<Part>,
    rewritten: bool,
    kept: BTreeSet<TargetId>,
    dropped: BTreeSet<TargetId>,
}

impl PrunedBundle {
    /// The memory it holds until it is gathered: its headers, and the input pages of what it
    /// keeps as it was (released once gathered); a recompressed stream waits in its file.
    fn held(&self) -> u64 {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Input(_) | Part::Bytes(_) => p.len(),
                Part::Zeros(_) | Part::Compressed { .. } => 0,
            })
            .sum()
    }
}

/// Prunes one bundle inside [`source::walk_bundle`], which decodes it (within the process's
/// decode budget; a large CCOB as a stream) and checks every code object against its entry's
/// target. The new bundle is planned from the input's entry table
/// ([`PruneBundle::bundle`]); a CCOB's kept entries are then written, as they arrive, through
/// a streaming compressor ([`kpack_bundle::CcobWriter`]) into a temporary file, so that
/// neither the input's nor the output's uncompressed bundle is ever held.
struct PruneBundle<'s> {
    selection: &'s Selection,
    /// Where the bundle is in the input.
    stored: Range<usize>,
    /// Where recompressed bundles are written (the output's directory).
    dir: &'s Path,
    out: Option<Result<Pruning, PruneError>>,
}

/// A bundle being pruned.
enum Pruning {
    /// Planned whole from its entry table.
    Planned(PrunedBundle),
    /// A CCOB whose kept entries are being written.
    Recompressing(Box<Recompressing>),
}

/// A CCOB's kept entries written, in entry order, into a new uncompressed bundle that is
/// compressed as it is written.
struct Recompressing {
    writer: kpack_bundle::CcobWriter<BufWriter<File>>,
    /// The kept entries (index in the input bundle) and their offsets in the new bundle, in
    /// entry order; `kept[next..]` are still to come.
    kept: Vec<(usize, u64)>,
    next: usize,
    /// Bytes of the new bundle written.
    written: u64,
    /// Where the input bundle is in the file and which it is, for errors.
    index: usize,
    file_offset: u64,
    bundle: PrunedBundle,
}

impl Recompressing {
    /// Writes the data of the input's entry `entry` if it is kept (the next kept one).
    fn entry(&mut self, entry: usize, data: &[u8]) -> Result<(), PruneError> {
        let Some(&(kept, at)) = self.kept.get(self.next).filter(|(k, _)| *k <= entry) else {
            return Ok(());
        };
        if kept != entry {
            return Err(PruneError::Unexpected(format!(
                "bundle {}: entry {entry} arrived before kept entry {kept}",
                self.index
            )));
        }
        static ZEROS: [u8; 4096] = [0; 4096];
        while self.written < at {
            let n = (at - self.written).min(ZEROS.len() as u64) as usize;
            self.write(&ZEROS[..n])?;
        }
        self.write(data)?;
        self.next += 1;
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), PruneError> {
        self.writer
            .write_all(bytes)
            .map_err(|e| PruneError::WriteBundle {
                index: self.index,
                file_offset: self.file_offset,
                source: self.writer.compress_error(e),
            })?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// The pruned bundle: the new CCOB's header and its compressed stream.
    fn finish(self) -> Result<PrunedBundle, PruneError> {
        let (index, file_offset) = (self.index, self.file_offset);
        let write_error = |source| PruneError::WriteBundle {
            index,
            file_offset,
            source,
        };
        if self.next != self.kept.len() {
            return Err(PruneError::Unexpected(format!(
                "bundle {index}: {} of its {} kept entries arrived",
                self.next,
                self.kept.len()
            )));
        }
        let (header, compressed) = self.writer.finish().map_err(write_error)?;
        let temp_error = |e| PruneError::Source(io_error("a recompressed bundle")(e));
        let file = compressed
            .into_inner()
            .map_err(|e| temp_error(e.into_error()))?;
        let len = file.metadata().map_err(temp_error)?.len();
        let mut bundle = self.bundle;
        let compressed = Part::Compressed {
            file: Some(file),
            at: 0,
            len,
        };
        bundle.parts = vec![Part::Bytes(header), compressed];
        Ok(bundle)
    }
}

impl PruneBundle<'_> {
    fn plan(&self, found: &FoundBundle<'_>) -> Result<Pruning, PruneError> {
        let mut kept_entries: Vec<(usize, &kpack_bundle::EntryHeader)> = Vec::new();
        let (mut kept, mut dropped) = (BTreeSet::new(), BTreeSet::new());
        for (i, e) in found.entries.iter().enumerate() {
            let id = BundleId::parse(&e.triple).map_err(SourceError::from)?;
            match id.target() {
                Some(t) if !self.selection.keeps(t) => {
                    dropped.insert(t.clone());
                }
                target => {
                    kept.extend(target.cloned());
                    kept_entries.push((i, e));
                }
            }
        }
        let mut bundle = PrunedBundle {
            rewritten: !dropped.is_empty(),
            parts: Vec::new(),
            kept,
            dropped,
        };
        if !bundle.rewritten {
            bundle.parts = vec![Part::Input(self.stored.clone())];
            return Ok(Pruning::Planned(bundle));
        }
        let align = entry_alignment(found.entries);
        let sized: Vec<(&str, u64)> = kept_entries
            .iter()
            .map(|(_, e)| (e.triple.as_str(), e.size))
            .collect();
        let (header, offsets) = kpack_bundle::uncompressed_layout(&sized, align);
        match found.format {
            // The kept entries are not copied here: the output reads them from the input.
            BundleFormat::Uncompressed => {
                let mut end = header.len() as u64;
                bundle.parts.push(Part::Bytes(header));
                for ((_, e), at) in kept_entries.iter().zip(offsets) {
                    bundle.parts.push(Part::Zeros(at - end));
                    let start = self.stored.start + e.offset as usize;
                    bundle
                        .parts
                        .push(Part::Input(start..start + e.size as usize));
                    end = at + e.size;
                }
                Ok(Pruning::Planned(bundle))
            }
            BundleFormat::Compressed {
                version, method, ..
            } => {
                let level = match method {
                    CompressionMethod::Zstd => ZSTD_LEVEL,
                    CompressionMethod::Zlib => ZLIB_LEVEL,
                };
                let size = match (offsets.last(), sized.last()) {
                    (Some(at), Some((_, len))) => at + len,
                    _ => header.len() as u64,
                };
                let file = tempfile::tempfile_in(self.dir).map_err(io_error(self.dir))?;
                let out = BufWriter::with_capacity(1 << 20, file);
                let writer = kpack_bundle::CcobWriter::new(out, version, method, level, size)
                    .map_err(|source| PruneError::WriteBundle {
                        index: found.index,
                        file_offset: found.file_offset,
                        source,
                    })?;
                let mut recompressing = Recompressing {
                    writer,
                    kept: kept_entries.iter().map(|(i, _)| *i).zip(offsets).collect(),
                    next: 0,
                    written: 0,
                    index: found.index,
                    file_offset: found.file_offset,
                    bundle,
                };
                recompressing.write(&header)?;
                Ok(Pruning::Recompressing(Box::new(recompressing)))
            }
        }
    }

    /// Hands the data of entry `entry` to the bundle being recompressed, if any.
    fn entry(&mut self, entry: usize, data: &[u8]) -> Result<(), SourceError> {
        if let Some(Ok(Pruning::Recompressing(r))) = &mut self.out
            && let Err(e) = r.entry(entry, data)
        {
            self.out = Some(Err(e));
        }
        Ok(())
    }

    /// The pruned bundle, once the walk has visited every entry.
    fn finish(self, i: usize) -> Result<PrunedBundle, PruneError> {
        match self.out {
            Some(Ok(Pruning::Planned(bundle))) => Ok(bundle),
            Some(Ok(Pruning::Recompressing(r))) => r.finish(),
            Some(Err(e)) => Err(e),
            None => Err(PruneError::Unexpected(format!("bundle {i} not visited"))),
        }
    }
}

impl Visitor for PruneBundle<'_> {
    fn bundle(&mut self, found: &FoundBundle<'_>) -> Result<(), SourceError> {
        self.out = Some(self.plan(found));
        Ok(())
    }

    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        self.entry(code.entry, code.data)
    }

    fn other_entry(&mut self, entry: usize, data: &[u8]) -> Result<(), SourceError> {
        self.entry(entry, data)
    }
}

/// The alignment clang-offload-bundler wrote the entries at: the largest power of two, up
/// to its default 4096, dividing every entry's offset.
fn entry_alignment(entries: &[kpack_bundle::EntryHeader]) -> u64 {
    power_of_two_dividing(entries.iter().map(|e| e.offset))
}

/// The largest power of two up to 4096 that divides every value.
fn power_of_two_dividing(values: impl Iterator<Item = u64>) -> u64 {
    values.fold(4096, |align: u64, v| {
        if v == 0 {
            align
        } else {
            align.min(1 << v.trailing_zeros())
        }
    })
}

/// Prunes the fat binary `input` (mapped from `mapping`, whose pages are released as its
/// bundles are done) into the new file `output` (a staged path: on failure the caller's
/// stage removes it) with the permission bits `mode` ([`kpack_fs::set_mode`]). A result without device code is written too:
/// whether that is allowed is the caller's to decide ([`PrunedFile::check_not_empty`]), after
/// [`check_named`], which names the likelier mistake.
pub fn prune_elf(
    input: &[u8],
    mapping: Option<&kpack_pipeline::FileBytes>,
    output: &Path,
    mode: Option<u32>,
    selection: &Selection,
) -> Result<PrunedFile, PruneError> {
    let fat = kpack_elf::inspect(input)?;
    match fat.kind {
        _ if fat.is_relocatable() => {
            return Err(PruneError::NotFat(
                "a relocatable object: its device code is linked into the final binary later; prune that",
            ));
        }
        FatBinaryKind::Fat => {}
        FatBinaryKind::Kpacked => {
            return Err(PruneError::NotFat(
                "already kpacked: its device code is in .kpack archives (`kpack restore` makes it fat again)",
            ));
        }
        FatBinaryKind::Rdc | FatBinaryKind::HostOnly => {
            return Err(PruneError::NotFat(
                "no device code: the file has no .hip_fatbin section",
            ));
        }
        // Its own error, not `NotFat`: a debug file beside its library is copied, not refused.
        FatBinaryKind::DebugOnly => return Err(RewriteError::DebugOnly.into()),
    }
    let section = fat
        .fatbin
        .clone()
        .ok_or(PruneError::NotFat("no .hip_fatbin section"))?;
    let slots = source::bundle_slots(&fat);
    let current: Vec<u64> = fat
        .wrappers
        .iter()
        .map(|w| {
            w.bundle
                .map(|b| fat.bundles[b].offset)
                .ok_or(PruneError::WrapperWithoutBundle(w.index))
        })
        .collect::<Result<_, _>>()?;
    // Whatever the rewrite refuses, it refuses before any bundle is decoded.
    kpack_elf::rewrite::plan_edit(
        input,
        &FatbinEdit::Move {
            contents_len: section.size,
            bundle_offsets: current,
        },
    )?;

    let dir = kpack_fs::parent_dir(output);
    let mut spool = tempfile::tempfile_in(dir).map_err(io_error(dir))?;
    let packed = pack_pruned_bundles(input, mapping, &slots, selection, &mut spool, dir)?;
    let bundle_offsets: Vec<u64> = fat
        .wrappers
        .iter()
        .map(|w| w.bundle.map_or(0, |b| packed.offsets[b]))
        .collect();
    let mut rewrite = kpack_elf::rewrite::plan_edit(
        input,
        &FatbinEdit::Move {
            contents_len: packed.len,
            bundle_offsets: bundle_offsets.clone(),
        },
    )?;
    // A small section frees fewer whole pages than moving costs: prune it in place.
    if rewrite.summary.output_len >= rewrite.summary.input_len && packed.len <= section.size {
        rewrite = kpack_elf::rewrite::plan_edit(
            input,
            &FatbinEdit::Replace {
                contents_len: packed.len,
                bundle_offsets,
            },
        )?;
    }
    write_checked(input, mapping, &rewrite, &packed, &spool, output, &fat)?;
    if let Some(mode) = mode {
        kpack_fs::set_mode(output, mode).map_err(io_error(output))?;
    }
    let s = &rewrite.summary;
    Ok(PrunedFile {
        input_size: s.input_len,
        output_size: s.output_len,
        fatbin_size: section.size,
        pruned_fatbin_size: packed.len,
        removed: s.removed,
        bundles_rewritten: packed.rewritten,
        bundles: slots.len(),
        wrappers: s.wrappers,
        dropped: packed.dropped.iter().map(ToString::to_string).collect(),
        kept: packed.kept.iter().map(ToString::to_string).collect(),
    })
}

/// The pruned bundles, packed: the parts of the new contents (recompressed CCOBs in the
/// spool, everything else from the input).
struct Packed {
    parts: Vec<Part>,
    /// Offset of each bundle in the packed contents.
    offsets: Vec<u64>,
    /// Length of the packed contents.
    len: u64,
    /// Bundles rewritten.
    rewritten: usize,
    kept: BTreeSet<TargetId>,
    dropped: BTreeSet<TargetId>,
}

/// Prunes every bundle on worker threads and lays them out, in file order and at the
/// input's bundle alignment; recompressed CCOBs go to `spool` as they come.
fn pack_pruned_bundles(
    input: &[u8],
    mapping: Option<&kpack_pipeline::FileBytes>,
    slots: &[BundleSlot],
    selection: &Selection,
    spool: &mut File,
    dir: &Path,
) -> Result<Packed, PruneError> {
    let align = power_of_two_dividing(slots.iter().filter_map(|s| s.section_offset));
    let threads = kpack_concurrency::threads::count(0);
    let mut out = BufWriter::with_capacity(1 << 20, &mut *spool);
    let mut spooled = 0u64;
    let mut packed = Packed {
        parts: Vec::new(),
        offsets: Vec::with_capacity(slots.len()),
        len: 0,
        rewritten: 0,
        kept: BTreeSet::new(),
        dropped: BTreeSet::new(),
    };
    let spool_error = |e| PruneError::Source(io_error("the prune spool")(e));
    ordered::for_each_ordered(
        slots.len(),
        threads,
        &ordered::IN_FLIGHT,
        |i| slots[i].decode_cost(input),
        || (),
        |(), i| {
            let mut visitor = PruneBundle {
                selection,
                stored: slots[i].range.clone(),
                dir,
                out: None,
            };
            source::walk_bundle(input, &slots[i], 0, None, None, &mut visitor)?;
            let bundle = visitor.finish(i)?;
            let held = bundle.held();
            Ok((bundle, held))
        },
        |i, bundle| {
            let at = packed.len.next_multiple_of(align);
            packed.parts.push(Part::Zeros(at - packed.len));
            packed.offsets.push(at);
            packed.len = at;
            for part in bundle.parts {
                packed.parts.push(match part {
                    // A header stays in memory; a compressed stream goes to the spool.
                    Part::Compressed {
                        file: Some(mut file),
                        at,
                        len,
                    } => {
                        file.seek(SeekFrom::Start(at)).map_err(spool_error)?;
                        let copied = std::io::copy(&mut (&mut file).take(len), &mut out)
                            .map_err(spool_error)?;
                        if copied != len {
                            return Err(spool_error(std::io::ErrorKind::UnexpectedEof.into()));
                        }
                        spooled += len;
                        Part::Compressed {
                            file: None,
                            at: spooled - len,
                            len,
                        }
                    }
                    part => part,
                });
                packed.len += packed.parts.last().map_or(0, Part::len);
            }
            packed.rewritten += usize::from(bundle.rewritten);
            packed.kept.extend(bundle.kept);
            packed.dropped.extend(bundle.dropped);
            if let Some(map) = mapping {
                map.release(&input[slots[i].range.clone()]);
            }
            Ok::<(), PruneError>(())
        },
    )?;
    out.flush().map_err(spool_error)?;
    Ok(packed)
}

/// The packed contents, handed to the output as slices of the input (whose pages are
/// released once written), the parts' bytes and the spool.
struct PackedContents<'a> {
    input: &'a [u8],
    mapping: Option<&'a kpack_pipeline::FileBytes>,
    spool: &'a File,
    parts: std::slice::Iter<'a, Part>,
    current: Option<&'a Part>,
    /// Bytes of `current` already written.
    done: u64,
}

impl kpack_elf::splice::Contents for PackedContents<'_> {
    fn write_next(
        &mut self,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        static ZEROS: [u8; 4096] = [0; 4096];
        let mut spooled = Vec::new();
        let mut left = len;
        while left > 0 {
            let Some(part) = self.current else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the pruned bundles end {left} bytes short of {len}"),
                ));
            };
            let remaining = part.len() - self.done;
            if remaining == 0 {
                if let (Part::Input(r), Some(map)) = (part, self.mapping) {
                    map.release(&self.input[r.clone()]);
                }
                self.current = self.parts.next();
                self.done = 0;
                continue;
            }
            let from = self.done as usize;
            let n = match part {
                Part::Input(r) => {
                    let n = remaining.min(left) as usize;
                    sink(&self.input[r.start + from..][..n])?;
                    n
                }
                Part::Zeros(_) => {
                    let n = remaining.min(left).min(ZEROS.len() as u64) as usize;
                    sink(&ZEROS[..n])?;
                    n
                }
                Part::Bytes(b) => {
                    let n = remaining.min(left) as usize;
                    sink(&b[from..from + n])?;
                    n
                }
                Part::Compressed { file, at, .. } => {
                    let n = remaining.min(left).min(1 << 20) as usize;
                    spooled.resize(n, 0);
                    kpack_fs::read_exact_at(
                        file.as_ref().unwrap_or(self.spool),
                        &mut spooled,
                        at + self.done,
                    )?;
                    sink(&spooled)?;
                    n
                }
            };
            self.done += n as u64;
            left -= n as u64;
        }
        Ok(())
    }
}

/// Streams the output into the new file `path`, verifies it, and checks that every wrapper
/// leads to its bundle at the planned offset.
fn write_checked(
    input: &[u8],
    mapping: Option<&kpack_pipeline::FileBytes>,
    rewrite: &kpack_elf::Rewrite,
    packed: &Packed,
    spool: &File,
    path: &Path,
    fat: &kpack_elf::FatBinary,
) -> Result<(), PruneError> {
    let mut parts = packed.parts.iter();
    let mut contents = PackedContents {
        input,
        mapping,
        spool,
        current: parts.next(),
        parts,
        done: 0,
    };
    let map = kpack_pipeline::write_rewrite(path, |out| {
        rewrite.write_with_contents(input, &mut contents, out)
    })?;
    kpack_elf::verify(&map).map_err(PruneError::Verify)?;
    let pruned = kpack_elf::inspect(&map)?;
    let planned: Vec<Option<usize>> = fat.wrappers.iter().map(|w| w.bundle).collect();
    let found: Vec<Option<usize>> = pruned.wrappers.iter().map(|w| w.bundle).collect();
    let bundle_offsets: Vec<u64> = pruned.bundles.iter().map(|b| b.offset).collect();
    let offsets = &packed.offsets;
    if found != planned || bundle_offsets != *offsets || pruned.kind != FatBinaryKind::Fat {
        return Err(PruneError::Unexpected(format!(
            "wrappers lead to bundles {found:?} at {bundle_offsets:?}, planned {planned:?} at {offsets:?}"
        )));
    }
    Ok(())
}
