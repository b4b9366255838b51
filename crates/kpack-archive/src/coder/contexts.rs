//! zstd compression for the coder within the process's memory gate: how each frame and
//! trial searches for matches (window, long-distance matching, the wide trials' `fast`
//! match finder), what its context costs, and the context itself, kept between the
//! compressions of a group while it is small ([`Contexts`]).

use std::sync::{Mutex, PoisonError};

use zstd::zstd_safe::{self, CCtx, CParameter, ResetDirective};

use crate::ArchiveError;
use crate::prefix_template::{self, PrefixTemplate, TemplateContexts};
use crate::unified::MAX_WINDOW_LOG;

/// Level of the trial compressions that pick references. Levels 1 and 2 (zstd's `fast`
/// strategy) and even 3 hardly use a raw-content prefix, so their trials hide the twins the
/// final level finds: `gfx906` against `gfx900` of a rocBLAS kernel is 84 KB at level 1 and
/// 138 bytes at level 19, and on rocBLAS's largest bundles level-3 trials chose forests 9%
/// larger at level 19 than level-4 trials did (librocblas.so.5.2 whole: 0.94x its CCOB
/// instead of 1.04x). Level 4 costs about twice level 1's trial time. Its trials run zstd's
/// `dfast` match finder ([`Search::Trial`]).
const TRIAL_LEVEL: i32 = 4;

/// The largest hash table (log2 of its 4-byte entries) of a trial against a large prefix
/// ([`Search::WideTrial`]): 16 MB, indexing up to the last 32 MB of the prefix.
const WIDE_TRIAL_MAX_HASH_LOG: u32 = 22;

/// Bytes of zstd compression contexts alive at once in this process (see the module doc):
/// two level-19 contexts over kernels of up to 8 MB fit at once, and one over the largest
/// kernels (a 250 MB bundle's, 18 MB each, with their reference) runs alone, so that a
/// process holding such a decoded bundle stays within 512 MB.
pub const CONTEXT_BUDGET: u64 = 192 << 20;

pub(super) static CONTEXTS: kpack_concurrency::MemoryGate =
    kpack_concurrency::MemoryGate::new(CONTEXT_BUDGET);

/// The window of a frame coded against a prefix: prefix and content, at most 2^27.
pub(super) fn prefixed_window_log(total: usize) -> u32 {
    ceil_log2(total).clamp(10, MAX_WINDOW_LOG)
}

/// Prefix and content from this size on make a large pair: a trial against the prefix is a
/// [`Search::WideTrial`], and a final frame may need long-distance matching.
const LARGE_PAIR: usize = 1 << 23;

/// Whether the final frame of `len` bytes at `level` against a prefix of `prefix_len` bytes
/// uses long-distance matching: prefix and content reach 8 MB and the level's match finder
/// does not reach back over the whole prefix by itself. Where it does (a level-19 tree holds
/// the last 8 MB), long-distance matching only slowed the frame down: on cupy's thrust module
/// (8 MB kernels against a 7.5 MB reference) it took 20% longer for frames 0.1% smaller.
pub(super) fn long_distance_matching(level: i32, len: usize, prefix_len: usize) -> bool {
    let total = len + prefix_len;
    total >= LARGE_PAIR
        && !prefix_template::tree_reaches(
            &prefix_template::parameters(level, len, prefix_len, prefixed_window_log(total)),
            prefix_len,
        )
}

fn ceil_log2(n: usize) -> u32 {
    usize::BITS - n.saturating_sub(1).leading_zeros()
}

/// How a compression looks for matches.
#[derive(Clone, Copy, Debug)]
pub(super) enum Search {
    /// The level's match finder; against a prefix, a window covering prefix and content, and
    /// long-distance matching once they reach 8 MB (`long_distance_matching`); standalone at
    /// a level of zstd's `btultra2`, its `btultra` (see [`configure`]).
    Level(i32),
    /// A trial, alone or against a prefix where prefix and content stay under 8 MB: level 4
    /// ([`TRIAL_LEVEL`]) with zstd's `dfast` match finder, the one level 4 uses on up to 128 KB.
    /// On 128-256 KB (a 64 KB kernel and its reference) level 4 switches to a row-hashed
    /// `greedy`, whose tables cost more to load and search: on jax's plugin (27 targets,
    /// 1,000 trials of 64 KB kernels) `dfast` trials took 10 % fewer of the pack's
    /// instructions, and the forest they chose was 0.16 % larger.
    Trial,
    /// A trial against a prefix where prefix and content reach 8 MB. Level 4's tables index
    /// only the last 2 MB of a prefix (zstd loads at most 2^(hashLog+3) bytes of it), so at
    /// level 4 such a trial found its matches in the rest through long-distance matching, whose
    /// rolling hash over prefix and content, redone for every pair, took half of the trials'
    /// time (cupy's thrust module: 72 pair trials of 8 MB kernels). Here zstd's `fast` match
    /// finder runs without it, its one hash table sized to cover the prefix (up to
    /// [`WIDE_TRIAL_MAX_HASH_LOG`]): on thrust the pair trials take 1.7x less CPU, their sizes
    /// are 3% smaller, and the forest they choose is 1.7% smaller at level 19.
    WideTrial,
}

/// The search of a trial of `len` bytes, alone or against a prefix of `prefix_len` bytes.
pub(super) fn trial_search(len: usize, prefix_len: usize) -> Search {
    if prefix_len > 0 && prefix_len + len >= LARGE_PAIR {
        Search::WideTrial
    } else {
        Search::Trial
    }
}

/// The hash log of a [`Search::WideTrial`] against a prefix of `prefix_len` bytes: its table
/// covers the prefix, and is no smaller than level 4's.
fn wide_trial_hash_log(prefix_len: usize) -> u32 {
    ceil_log2(prefix_len)
        .saturating_sub(3)
        .clamp(18, WIDE_TRIAL_MAX_HASH_LOG)
}

/// An upper bound of the memory of the context that [`context`] creates for `len` bytes with
/// `search` against a prefix of `prefix_len` bytes. zstd sizes its match tables by the level's
/// chain and hash logs (its table for inputs over 256 KB, below), each cut to the window
/// plus one, and the window to the input; long-distance matching adds half a window; the
/// `fast` match finder of a wide trial has a hash table only. The estimate's margin covers
/// the rest (the optimal parser's and sequence buffers);
/// `context_estimates_bound_the_real_contexts` checks it against `ZSTD_sizeof_CCtx`.
pub(super) fn context_estimate(search: Search, len: usize, prefix_len: usize) -> u64 {
    /// (windowLog, chainLog, hashLog) of levels 1 to 22 for inputs over 256 KB
    /// (`ZSTD_defaultCParameters[0]`, zstd 1.5).
    const LOGS: [(u32, u32, u32); 22] = [
        (19, 13, 14),
        (20, 15, 16),
        (21, 16, 17),
        (21, 18, 18),
        (21, 18, 19),
        (21, 18, 19),
        (21, 19, 20),
        (21, 19, 20),
        (22, 20, 21),
        (22, 21, 22),
        (22, 21, 22),
        (22, 22, 23),
        (22, 22, 22),
        (22, 22, 23),
        (22, 23, 23),
        (22, 22, 22),
        (23, 23, 22),
        (23, 23, 22),
        (23, 24, 22),
        (25, 25, 23),
        (26, 26, 24),
        (27, 27, 25),
    ];
    let level = match search {
        Search::Level(level) => level,
        Search::Trial => TRIAL_LEVEL,
        Search::WideTrial => return (4u64 << wide_trial_hash_log(prefix_len)) + (3 << 20),
    };
    let (level_window, chain, hash) = LOGS[(level.clamp(1, 22) - 1) as usize];
    let total = len + prefix_len;
    let window = if prefix_len > 0 {
        prefixed_window_log(total)
    } else {
        level_window.min(ceil_log2(len).max(10))
    };
    let tables = (4u64 << chain.min(window + 1)) + (4u64 << hash.min(window + 1));
    let ldm = if prefix_len > 0 && long_distance_matching(level, len, prefix_len) {
        1u64 << (window - 1)
    } else {
        0
    };
    tables + ldm + (3 << 20)
}

/// Bytes of a context from which it is freed after its compression instead of kept in
/// [`Contexts`]: a level-19 context over a 64 KB kernel and its reference holds 5.2 MB, over
/// the kernel alone 2.6 MB, a trial's 1.1 MB.
const KEPT_CONTEXT_MAX: usize = 6 << 20;

/// Bytes of idle contexts one [`Contexts`] keeps at most, and the coder keeps for its next
/// template: two level-19 contexts of 64 KB kernels against their references.
pub(super) const KEPT_CONTEXTS_BUDGET: usize = 12 << 20;

/// The compression contexts of one group, kept between its compressions while they are small
/// ([`KEPT_CONTEXT_MAX`], [`KEPT_CONTEXTS_BUDGET`]) and reused, reset, by the next one on any
/// thread. A context made for each compression costs as much as the compression of a small
/// kernel: in perf samples of a one-core pack of jax's plugin (27 targets, 64 KB kernels,
/// about a thousand compressions) making contexts, zeroing their tables, the page faults of
/// touching them and the templates' copies were a fifth of the CPU. A
/// reused context keeps its tables and their contents, which zstd ignores (they index
/// positions below the new frame's window), so that the frames are the same bytes.
/// The idle contexts sit outside the memory gate, which a compression reserves while it runs:
/// they are bounded by [`KEPT_CONTEXTS_BUDGET`] per group being coded instead, and freed with
/// the group; a large kernel's context (over [`KEPT_CONTEXT_MAX`]) is never kept.
#[derive(Default)]
pub(super) struct Contexts<'p> {
    idle: Idle<CCtx<'p>>,
}

impl<'p> Contexts<'p> {
    /// An idle context, or a new one; an error is 0 (no context could be allocated).
    fn take(&self) -> Result<CCtx<'p>, usize> {
        match self.idle.pop() {
            Some(cctx) => Ok(cctx),
            None => CCtx::try_create().ok_or(0usize),
        }
    }

    /// Keeps `cctx`, reset, for the next compression if it is small and the idle ones leave
    /// room for it; frees it otherwise.
    fn put_back(&self, mut cctx: CCtx<'p>) {
        if cctx.sizeof() > KEPT_CONTEXT_MAX
            || cctx.reset(ResetDirective::SessionAndParameters).is_err()
        {
            return;
        }
        self.idle.keep(cctx, CCtx::sizeof);
    }

    /// Whether no context is kept.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.idle.is_empty()
    }
}

/// Idle [`TemplateContexts`], kept from one [`PrefixTemplate`] to the next (of trials and of
/// final frames, of this group and the next ones) while they hold at most
/// [`KEPT_CONTEXTS_BUDGET`] bytes together, so that a template's contexts are allocated and
/// first touched once, not once per template. Made afresh for each template and freed back to
/// the system after it, the two contexts' first touches were half of the page faults of a
/// one-core pack of jax's plugin (27 targets, about 30 templates: 12,700 of 25,400, the faults
/// a tenth of its CPU time). Outside the memory gate while idle, like [`Contexts`]' idle ones.
#[derive(Default)]
pub(super) struct TemplatePool {
    idle: Idle<TemplateContexts>,
}

impl TemplatePool {
    /// Idle contexts, or new ones.
    pub(super) fn take(&self) -> Result<TemplateContexts, ArchiveError> {
        match self.idle.pop() {
            Some(contexts) => Ok(contexts),
            None => TemplateContexts::new().map_err(zstd_failure),
        }
    }

    /// Keeps `contexts` for the next template if the idle ones leave room for them; frees
    /// them otherwise.
    pub(super) fn put_back(&self, contexts: TemplateContexts) {
        self.idle.keep(contexts, TemplateContexts::sizeof);
    }

    /// Whether no contexts are kept.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.idle.is_empty()
    }
}

/// Idle zstd contexts of one kind, any thread's to take, holding at most
/// [`KEPT_CONTEXTS_BUDGET`] bytes together.
struct Idle<T> {
    items: Mutex<Vec<T>>,
}

impl<T> Default for Idle<T> {
    fn default() -> Self {
        Idle {
            items: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Idle<T> {
    fn pop(&self) -> Option<T> {
        self.lock().pop()
    }

    /// Keeps `item` if the idle ones leave room for its `sizeof`; drops it otherwise.
    fn keep(&self, item: T, sizeof: impl Fn(&T) -> usize) {
        let mut items = self.lock();
        if items.iter().map(&sizeof).sum::<usize>() + sizeof(&item) <= KEPT_CONTEXTS_BUDGET {
            items.push(item);
        }
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Nothing is left inconsistent by a panic while the lock is held (a push or a pop).
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One zstd frame of `data` at `level`, recording its content size, coded against `prefix`
/// if given (its window then covers prefix and content), in a context of `contexts`.
pub(crate) fn compress<'p>(
    contexts: &Contexts<'p>,
    data: &[u8],
    prefix: Option<&'p [u8]>,
    level: i32,
) -> Result<Vec<u8>, ArchiveError> {
    frame(contexts, data, prefix, Search::Level(level))
}

/// The size of the trial frame of `data`, alone or against `prefix` (see [`TRIAL_LEVEL`],
/// [`Search::WideTrial`]), in a context of `contexts`.
pub(super) fn trial<'p>(
    contexts: &Contexts<'p>,
    data: &[u8],
    prefix: Option<&'p [u8]>,
) -> Result<usize, ArchiveError> {
    let search = trial_search(data.len(), prefix.map_or(0, <[u8]>::len));
    Ok(frame(contexts, data, prefix, search)?.len())
}

/// Bytes of tables a template's copy may carry per byte of the reference whose loading it
/// saves (see [`trials_against`]): timed on kernels of the fixtures' content, 6 each tried
/// against each other, templates were 45 % slower on 64 KB references (1 MB of tables), even
/// on 100 KB (0.75 MB), 20 % faster on 300 KB (2 MB) and on 1 MB.
const TEMPLATE_TABLE_BYTES_PER_REFERENCE_BYTE: usize = 8;

/// The trial sizes of `kernels` against `prefix`, each what [`trial`] gives. Where loading the
/// prefix costs more than copying the tables it fills ([`TEMPLATE_TABLE_BYTES_PER_REFERENCE_BYTE`]),
/// it is loaded once for the kernels whose trials share their parameters (a [`PrefixTemplate`]
/// of zstd's `dfast` finder, whose tables a copy carries whole), not once per kernel. Other
/// trials, wide ones and a kernel alone with its parameters are each a [`trial`] of its own.
pub(super) fn trials_against<'p>(
    contexts: &Contexts<'p>,
    templates: &TemplatePool,
    kernels: &[&[u8]],
    prefix: &'p [u8],
) -> Result<Vec<usize>, ArchiveError> {
    let mut sizes = vec![0usize; kernels.len()];
    let mut sets: Vec<(zstd_sys::ZSTD_compressionParameters, Vec<usize>)> = Vec::new();
    for (k, kernel) in kernels.iter().enumerate() {
        let (len, prefix_len) = (kernel.len(), prefix.len());
        if len == 0 || matches!(trial_search(len, prefix_len), Search::WideTrial) {
            sizes[k] = trial(contexts, kernel, Some(prefix))?;
            continue;
        }
        let params = prefix_template::parameters_with_strategy(
            TRIAL_LEVEL,
            zstd_sys::ZSTD_strategy::ZSTD_dfast,
            len,
            prefix_len,
            prefixed_window_log(len + prefix_len),
        );
        let tables = (4usize << params.hashLog) + (4usize << params.chainLog);
        if prefix_len * TEMPLATE_TABLE_BYTES_PER_REFERENCE_BYTE < tables {
            sizes[k] = trial(contexts, kernel, Some(prefix))?;
            continue;
        }
        match sets
            .iter_mut()
            .find(|(p, _)| prefix_template::same_parameters(p, &params))
        {
            Some((_, set)) => set.push(k),
            None => sets.push((params, vec![k])),
        }
    }
    for (params, set) in sets {
        if let [k] = set[..] {
            sizes[k] = trial(contexts, kernels[k], Some(prefix))?;
            continue;
        }
        let largest = set.iter().map(|&k| kernels[k].len()).max().unwrap_or(0);
        // The template and its copy, reserved together before either is made.
        let _contexts =
            CONTEXTS.reserve(2 * context_estimate(Search::Trial, largest, prefix.len()));
        let mut template =
            PrefixTemplate::new(templates.take()?, prefix, params).map_err(zstd_failure)?;
        for &k in &set {
            sizes[k] = template.compress(kernels[k]).map_err(zstd_failure)?.len();
        }
        templates.put_back(template.into_contexts());
    }
    Ok(sizes)
}

/// One zstd frame of `data` with `search`, within the memory gate, in a context of `contexts`.
pub(super) fn frame<'p>(
    contexts: &Contexts<'p>,
    data: &[u8],
    prefix: Option<&'p [u8]>,
    search: Search,
) -> Result<Vec<u8>, ArchiveError> {
    let _context = CONTEXTS.reserve(context_estimate(
        search,
        data.len(),
        prefix.map_or(0, <[u8]>::len),
    ));
    let mut cctx = contexts.take().map_err(zstd_failure)?;
    configure(&mut cctx, data.len(), prefix, search).map_err(zstd_failure)?;
    let mut frame = Vec::with_capacity(zstd_safe::compress_bound(data.len()));
    cctx.compress2(&mut frame, data).map_err(zstd_failure)?;
    contexts.put_back(cctx);
    within_frame_size(frame)
}

/// `frame`, if its size fits the format's u32 frame size.
pub(crate) fn within_frame_size(frame: Vec<u8>) -> Result<Vec<u8>, ArchiveError> {
    frame_size(frame.len() as u64)?;
    Ok(frame)
}

/// A frame's size `len` as the format's u32 size prefix holds it.
pub(crate) fn frame_size(len: u64) -> Result<u32, ArchiveError> {
    u32::try_from(len).map_err(|_| {
        ArchiveError::InvalidArgument(format!(
            "zstd frame of {len} bytes exceeds the format's u32 frame size"
        ))
    })
}

/// A zstd context set up for `len` bytes with `search` (see [`configure`]); an error is
/// zstd's code, or 0 if no context could be allocated.
#[cfg(test)]
pub(super) fn context<'p>(
    len: usize,
    prefix: Option<&'p [u8]>,
    search: Search,
) -> Result<CCtx<'p>, usize> {
    let mut cctx = CCtx::try_create().ok_or(0usize)?;
    configure(&mut cctx, len, prefix, search)?;
    Ok(cctx)
}

/// Sets up `cctx` (new, or reset) for `len` bytes with `search`, recording content size and
/// checksum, against `prefix` if given (its window then covers prefix and content); an error
/// is zstd's code.
fn configure<'p>(
    cctx: &mut CCtx<'p>,
    len: usize,
    prefix: Option<&'p [u8]>,
    search: Search,
) -> Result<(), usize> {
    let level = match search {
        Search::Level(level) => level,
        Search::Trial | Search::WideTrial => TRIAL_LEVEL,
    };
    cctx.set_parameter(CParameter::CompressionLevel(level))?;
    cctx.set_parameter(CParameter::ContentSizeFlag(true))?;
    cctx.set_parameter(CParameter::ChecksumFlag(true))?;
    match search {
        Search::Trial => {
            cctx.set_parameter(CParameter::Strategy(zstd_safe::Strategy::ZSTD_dfast))?;
        }
        // `btultra2` codes a standalone frame's first block twice, the first time only to
        // gather statistics (zstd does it only without a prefix): for a kernel of up to one
        // block (128 KB), twice the work for a frame about 0.1 % smaller (jax's plugin: roots
        // took 15 % of a pack's instructions with it, 8 % without; the archive 0.08 % larger,
        // librocblas's and librocsparse's samples the same size within 0.001 %).
        Search::Level(level)
            if prefix.is_none() && prefix_template::standalone_is_btultra2(level, len) =>
        {
            cctx.set_parameter(CParameter::Strategy(zstd_safe::Strategy::ZSTD_btultra))?;
        }
        _ => {}
    }
    if let Some(prefix) = prefix {
        let total = prefix.len() + len;
        cctx.set_parameter(CParameter::WindowLog(prefixed_window_log(total)))?;
        match search {
            Search::Level(level) => {
                if long_distance_matching(level, len, prefix.len()) {
                    cctx.set_parameter(CParameter::EnableLongDistanceMatching(true))?;
                }
            }
            Search::Trial => {}
            Search::WideTrial => {
                cctx.set_parameter(CParameter::Strategy(zstd_safe::Strategy::ZSTD_fast))?;
                cctx.set_parameter(CParameter::HashLog(wide_trial_hash_log(prefix.len())))?;
                cctx.set_parameter(CParameter::MinMatch(6))?;
            }
        }
        cctx.ref_prefix(prefix)?;
    }
    Ok(())
}

pub(super) fn zstd_failure(code: usize) -> ArchiveError {
    let reason = if code == 0 {
        "cannot allocate a zstd context"
    } else {
        zstd_safe::get_error_name(code)
    };
    ArchiveError::Io {
        context: "zstd compression",
        source: std::io::Error::other(reason),
    }
}
