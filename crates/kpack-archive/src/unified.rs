//! Scheme `unified`, archive format version 2: one compression domain across the targets and
//! feature variants of a package, with per-entry random access kept.
//!
//! Per-kernel zstd (v1) compresses each code object alone, so the near-identical code of
//! `gfx90a:xnack-` and `gfx90a:xnack+`, or of gfx1100 and gfx1101, is paid for in full every
//! time. Here a frame may be coded against the decoded content of one other frame (zstd's
//! raw-content prefix, what `zstd --patch-from` does), so such a twin costs a few hundred bytes.
//!
//! # Layout (docs/archive-v2.md has the spec-style text)
//!
//! ```text
//! offset 0   "KPAK" | u32 version = 2 | u64 toc_offset      (little-endian, 16 bytes)
//! offset 16  zero bytes up to 64
//! offset 64  frames, back to back, in ordinal order
//! toc_offset msgpack TOC (one map) running to end of file
//! ```
//!
//! The TOC is version 1's with `format_version` 2, `compression_scheme` `"unified"`, and in
//! place of `blobs` / `zstd_offset` / `zstd_size` the key `frames`: per ordinal a map
//! `{offset, size}` (a *standalone* frame) or `{offset, size, ref}` (a *delta* frame).
//! Entries (`toc[binary][arch]`) are version 1's; identical code objects share one ordinal.
//!
//! * A standalone frame is one zstd frame recording its content size.
//! * A delta frame is one zstd frame recording its content size, coded with the decoded content
//!   of frame `ref` as a raw-content prefix (`ZSTD_CCtx_refPrefix`; the decoder loads the same
//!   bytes as a raw-content dictionary). `ref` is smaller than the frame's own ordinal and
//!   names a standalone frame, whose content does not begin with the zstd dictionary magic
//!   (`37 a4 30 ec`), so that it cannot be mistaken for a formatted dictionary. Every frame's
//!   window is at most 2^27 bytes, the decoders' default limit.
//!
//! **Chain bound: reading one entry decodes at most 2 frames** (its reference, then its own),
//! and touches only those frames' bytes and the TOC. The header's version 2 makes readers that
//! check `version == 1` (the reference C++ and Python readers, spec §1/§4) reject these
//! archives with `UNSUPPORTED_VERSION`; version 1 archives never use scheme `unified`, and
//! version 2 archives use nothing else.
//!
//! # Choosing references (the writer)
//!
//! For each new kernel the [`Coder`] considers at most two standalone frames it still holds:
//! the one of the same binary key whose target is most alike (same processor with other
//! features, `xnack+` against `xnack-`, then the longest common processor-name prefix,
//! gfx1101 against gfx1100, gfx906 against gfx900), and the latest one of the same target
//! (the kernels of one library resemble each other); failing either, the most alike of all. Trial compressions at level 1 pick the
//! smallest; a reference is used if it saves at least [`MIN_SAVING`] of the standalone size
//! for the same processor, [`MIN_SAVING_SUBFAMILY`] for another processor of the sub-family
//! and [`MIN_SAVING_FAR`] for another sub-family, and the kernel is then compressed once at
//! the archive's level. A kernel that is stored
//! standalone becomes a candidate itself. The choice depends only on the kernels and the
//! order they are added in, never on timing: the output is the same for any thread count.
//! The candidates are held in memory within [`RETAINED_BUDGET`] bytes (oldest dropped first),
//! so the streaming writer's memory stays bounded by that, not by the library.

use zstd::zstd_safe::{self, CCtx, CParameter};

use crate::ArchiveError;

/// The largest frame window (and so prefix plus content) a frame may use: zstd decoders
/// refuse larger windows unless told otherwise.
pub const MAX_WINDOW_LOG: u32 = 27;

/// A reference must shrink the kernel's trial frame by this fraction to be used: a kernel
/// stored standalone can in turn serve as a reference, which a delta cannot (the chain bound).
pub const MIN_SAVING: f64 = 0.10;

/// The saving a reference of another processor of the same sub-family (gfx900 for gfx90a)
/// must bring: short of it the kernel is stored standalone, so that its own feature variants
/// (gfx90a:xnack- after gfx90a:xnack+), which follow, can be coded against it for almost
/// nothing.
pub const MIN_SAVING_SUBFAMILY: f64 = 0.5;

/// The same for a reference of another sub-family (gfx1030 for gfx1010, not gfx1031).
pub const MIN_SAVING_FAR: f64 = 0.75;

/// Bytes of candidate reference content the writer keeps in memory.
pub const RETAINED_BUDGET: usize = 96 << 20;

/// The first bytes of a formatted zstd dictionary; a reference never starts with them.
pub const DICTIONARY_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

/// Level of the trial compressions that pick a reference.
const TRIAL_LEVEL: i32 = 1;

/// A kernel as stored: its frame and the ordinal of the frame it was coded against.
pub(crate) struct Coded {
    pub(crate) frame: Vec<u8>,
    pub(crate) reference: Option<u32>,
}

/// A standalone frame's content, kept as a candidate reference.
struct Candidate {
    ordinal: u32,
    binary: String,
    arch: String,
    content: Vec<u8>,
}

/// Codes kernels for a `unified` archive, choosing references (see the module doc).
pub(crate) struct Coder {
    level: i32,
    /// Oldest first.
    candidates: Vec<Candidate>,
    retained: usize,
}

impl Coder {
    pub(crate) fn new(level: i32) -> Self {
        Coder {
            level,
            candidates: Vec::new(),
            retained: 0,
        }
    }

    /// Codes `data`, the kernel for `(binary, arch)`.
    pub(crate) fn code(
        &mut self,
        binary: &str,
        arch: &str,
        data: &[u8],
    ) -> Result<Coded, ArchiveError> {
        let mut best: Option<(usize, usize)> = None;
        let candidates = self.candidates_for(binary, arch, data.len());
        if !candidates.is_empty() {
            let alone = compress(data, None, TRIAL_LEVEL)?.len() as f64;
            for i in candidates {
                let c = &self.candidates[i];
                let size = compress(data, Some(&c.content), TRIAL_LEVEL)?.len();
                let saving = 1.0 - size as f64 / alone;
                let needed = needed_saving(arch, &c.arch);
                if saving >= needed && best.is_none_or(|(_, s)| size < s) {
                    best = Some((i, size));
                }
            }
        }
        match best {
            Some((i, _)) => {
                let c = &self.candidates[i];
                Ok(Coded {
                    frame: compress(data, Some(&c.content), self.level)?,
                    reference: Some(c.ordinal),
                })
            }
            None => Ok(Coded {
                frame: compress(data, None, self.level)?,
                reference: None,
            }),
        }
    }

    /// Records that `data` was stored standalone as `ordinal`: it may serve as a reference.
    pub(crate) fn standalone(&mut self, ordinal: u32, binary: &str, arch: &str, data: &[u8]) {
        if data.starts_with(&DICTIONARY_MAGIC) || data.len() > RETAINED_BUDGET {
            return;
        }
        // Of earlier binaries, only the latest frame of each target stays a candidate.
        let latest_of_arch =
            |cands: &[Candidate], i: usize| !cands[i + 1..].iter().any(|c| c.arch == cands[i].arch);
        let mut keep = Vec::with_capacity(self.candidates.len());
        for i in 0..self.candidates.len() {
            keep.push(self.candidates[i].binary == binary || latest_of_arch(&self.candidates, i));
        }
        let mut keep = keep.into_iter();
        self.candidates.retain(|_| keep.next().unwrap_or(false));
        self.candidates.push(Candidate {
            ordinal,
            binary: binary.to_owned(),
            arch: arch.to_owned(),
            content: data.to_vec(),
        });
        self.retained = self.candidates.iter().map(|c| c.content.len()).sum();
        while self.retained > RETAINED_BUDGET {
            let dropped = self.candidates.remove(0);
            self.retained -= dropped.content.len();
        }
    }

    /// Indices of the (at most two) candidates worth a trial for a kernel of `len` bytes: the
    /// most alike target of the same binary, and the latest of the same target; failing
    /// either, the most alike target of the latest binaries.
    fn candidates_for(&self, binary: &str, arch: &str, len: usize) -> Vec<usize> {
        let cands = &self.candidates;
        let usable = |i: &usize| {
            cands[*i].content.len() + len <= 1 << MAX_WINDOW_LOG && cands[*i].arch != arch
        };
        // Highest likeness first; among equals, the latest.
        let most_alike = |filter: &dyn Fn(&Candidate) -> bool| {
            (0..cands.len())
                .filter(|i| usable(i) && filter(&cands[*i]))
                .max_by_key(|&i| (likeness(arch, &cands[i].arch), i))
        };
        let mut out = Vec::with_capacity(2);
        out.extend(most_alike(&|c| c.binary == binary));
        let fits = |i: &usize| cands[*i].content.len() + len <= 1 << MAX_WINDOW_LOG;
        out.extend(
            (0..cands.len())
                .rev()
                .find(|i| cands[*i].arch == arch && fits(i)),
        );
        if out.len() < 2
            && let Some(i) = most_alike(&|_| true).filter(|i| !out.contains(i))
        {
            out.push(i);
        }
        out
    }
}

/// How alike two target IDs are: the same processor (other features) first, then the length
/// of the processors' common name prefix (gfx1101 and gfx1100 share 6 bytes, gfx906 and gfx90a
/// 5).
fn likeness(a: &str, b: &str) -> (bool, usize) {
    let processor = |t: &str| t.split(':').next().unwrap_or(t).to_owned();
    let (pa, pb) = (processor(a), processor(b));
    let common = pa
        .bytes()
        .zip(pb.bytes())
        .take_while(|(x, y)| x == y)
        .count();
    (pa == pb, common)
}

/// The saving a reference of target `b` must bring to a kernel of target `a`: the less alike
/// the targets, the more (see [`MIN_SAVING`], [`MIN_SAVING_SUBFAMILY`], [`MIN_SAVING_FAR`]).
/// Processors of one sub-family differ in their last character only (gfx1100 and gfx1101,
/// gfx900 and gfx90a).
fn needed_saving(a: &str, b: &str) -> f64 {
    let (same, common) = likeness(a, b);
    let processor_len = |t: &str| t.split(':').next().unwrap_or(t).len();
    if same {
        MIN_SAVING
    } else if common + 1 >= processor_len(a).min(processor_len(b)) {
        MIN_SAVING_SUBFAMILY
    } else {
        MIN_SAVING_FAR
    }
}

/// One zstd frame of `data` at `level`, recording its content size, coded against `prefix`
/// if given (its window then covers prefix and content).
pub(crate) fn compress(
    data: &[u8],
    prefix: Option<&[u8]>,
    level: i32,
) -> Result<Vec<u8>, ArchiveError> {
    let fail = |code: usize| ArchiveError::Io {
        context: "zstd compression",
        source: std::io::Error::other(zstd_safe::get_error_name(code)),
    };
    let mut cctx = CCtx::try_create().ok_or_else(|| ArchiveError::Io {
        context: "zstd compression",
        source: std::io::Error::other("cannot allocate a zstd context"),
    })?;
    cctx.set_parameter(CParameter::CompressionLevel(level))
        .map_err(fail)?;
    cctx.set_parameter(CParameter::ContentSizeFlag(true))
        .map_err(fail)?;
    if let Some(prefix) = prefix {
        let total = prefix.len() + data.len();
        let window_log = (usize::BITS - total.saturating_sub(1).leading_zeros()).clamp(10, 27);
        cctx.set_parameter(CParameter::WindowLog(window_log))
            .map_err(fail)?;
        if total >= 1 << 23 {
            cctx.set_parameter(CParameter::EnableLongDistanceMatching(true))
                .map_err(fail)?;
        }
        cctx.ref_prefix(prefix).map_err(fail)?;
    }
    let mut frame = Vec::with_capacity(zstd_safe::compress_bound(data.len()));
    cctx.compress2(&mut frame, data).map_err(fail)?;
    if u32::try_from(frame.len()).is_err() {
        return Err(ArchiveError::InvalidArgument(format!(
            "zstd frame of {} bytes exceeds the format's u32 frame size",
            frame.len()
        )));
    }
    Ok(frame)
}
