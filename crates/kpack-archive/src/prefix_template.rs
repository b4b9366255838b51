//! A reference loaded once into a zstd compression context and copied for every kernel coded
//! against it: the part of zstd's API that the `zstd` crate does not wrap, so written here over
//! `zstd-sys` (`ZSTD_getCParams`, `ZSTD_compressBegin_advanced`, `ZSTD_copyCCtx`,
//! `ZSTD_compressEnd`).
//!
//! At levels 13 and over, zstd's binary-tree match finder inserts every position of a prefix
//! into its tree before it codes the first byte against it; on librocblas that loading was a
//! quarter of a level-19 `unified` pack on one core, paid again by every kernel coded against
//! the same reference (a group's root is the reference of up to 13 others). A
//! [`PrefixTemplate`] pays it once: `ZSTD_copyCCtx` duplicates the loaded tables (a memory
//! copy) into one working context, for each kernel in turn.
//!
//! The frames are the bytes `ZSTD_CCtx_refPrefix` and `ZSTD_compress2` make with the same
//! parameters (`templated_frames_are_the_bytes_of_a_prefix_compression` checks it on real
//! kernels), so whether a kernel is coded through a template never shows in the archive. Two
//! things make that so:
//! * the parameters are the ones `ZSTD_compress2` derives for the kernel's size and the
//!   prefix's (level, then the window set by the coder, then zstd's adjustment), and a template
//!   serves only kernels whose derived parameters are the template's;
//! * `ZSTD_copyCCtx` begins a frame without a checksum, so the frame's descriptor gets its
//!   checksum bit and the checksum (the low 32 bits of the content's XXH64, RFC 8878 §3.1.1)
//!   is appended here. Neither changes the blocks, nor the frame header's size.
//!
//! The coder's trials (zstd's `dfast` finder at level 4) use templates too, where loading a
//! large reference costs more than copying the two hash tables that hold it: `dfast` keeps
//! nothing but those tables, which the copy carries whole.
//!
//! Long-distance matching cannot be carried this way (`ZSTD_copyCCtx` leaves the copy's
//! long-distance table empty), so the coder codes a kernel that needs it with its own context.
#![allow(unsafe_code)]

use std::ptr::NonNull;

use zstd_sys as sys;

/// The compression parameters `ZSTD_compress2` applies to `len` bytes at `level` against a
/// prefix of `prefix_len` bytes with the window log `window_log`.
pub(crate) fn parameters(
    level: i32,
    len: usize,
    prefix_len: usize,
    window_log: u32,
) -> sys::ZSTD_compressionParameters {
    derived_parameters(level, None, len, prefix_len, window_log)
}

/// [`parameters`] with the match finder `strategy` set instead of the level's.
pub(crate) fn parameters_with_strategy(
    level: i32,
    strategy: sys::ZSTD_strategy,
    len: usize,
    prefix_len: usize,
    window_log: u32,
) -> sys::ZSTD_compressionParameters {
    derived_parameters(level, Some(strategy), len, prefix_len, window_log)
}

/// The level's parameters for the sizes, the window and the strategy (if given) set over
/// them, then adjusted to the sizes: the order `ZSTD_compress2` derives them in.
fn derived_parameters(
    level: i32,
    strategy: Option<sys::ZSTD_strategy>,
    len: usize,
    prefix_len: usize,
    window_log: u32,
) -> sys::ZSTD_compressionParameters {
    // SAFETY: both functions take and return plain values.
    unsafe {
        let mut params = sys::ZSTD_getCParams(level, len as u64, prefix_len);
        params.windowLog = window_log;
        if let Some(strategy) = strategy {
            params.strategy = strategy;
        }
        sys::ZSTD_adjustCParams(params, len as u64, prefix_len)
    }
}

/// Whether zstd codes `len` bytes standalone at `level` with its `btultra2` strategy: `btultra`
/// with a first pass over the frame's first block to gather statistics, thrown away and coded
/// again (levels 19 and over).
pub(crate) fn standalone_is_btultra2(level: i32, len: usize) -> bool {
    // SAFETY: takes and returns plain values.
    let params = unsafe { sys::ZSTD_getCParams(level, len as u64, 0) };
    params.strategy == sys::ZSTD_strategy::ZSTD_btultra2
}

/// Whether `a` and `b` are the same parameters.
pub(crate) fn same_parameters(
    a: &sys::ZSTD_compressionParameters,
    b: &sys::ZSTD_compressionParameters,
) -> bool {
    let fields = |p: &sys::ZSTD_compressionParameters| {
        (
            p.windowLog,
            p.chainLog,
            p.hashLog,
            p.searchLog,
            p.minMatch,
            p.targetLength,
            p.strategy,
        )
    };
    fields(a) == fields(b)
}

/// Whether `params` use a binary-tree match finder (levels 13 and over on large inputs): the
/// finder whose prefix loading is worth sharing, and the one a template serves.
/// (`ZSTD_copyCCtx` does not copy the row match finder's tag table, so a copied lazy-level
/// context codes differently.)
pub(crate) fn uses_tree(params: &sys::ZSTD_compressionParameters) -> bool {
    params.strategy as u32 >= sys::ZSTD_strategy::ZSTD_btlazy2 as u32
}

/// Whether zstd's match finder with `params` reaches back over the whole of a prefix of
/// `prefix_len` bytes without long-distance matching: a binary tree holds the last
/// 2^(chainLog-1) positions. The other finders keep only as many positions as their tables
/// hold, so a large prefix needs long-distance matching there.
pub(crate) fn tree_reaches(params: &sys::ZSTD_compressionParameters, prefix_len: usize) -> bool {
    uses_tree(params) && prefix_len < 1usize << (params.chainLog - 1)
}

/// The two zstd contexts of a [`PrefixTemplate`], without a prefix: kept from one template to
/// the next, so that their memory is allocated and first touched once, not once per template.
/// A level-19 context over a 64 KB kernel and its reference holds about 5 MB; made afresh for
/// each template, and freed back to the system after it, the two contexts' first touches were
/// half of the page faults of a one-core pack of jax's plugin (27 targets, about 30 templates:
/// 12,700 of 25,400, the faults a tenth of its CPU time).
pub(crate) struct TemplateContexts {
    /// The context the prefix is loaded into.
    cctx: NonNull<sys::ZSTD_CCtx>,
    /// The context each frame is coded in, a copy of `cctx`: one for every frame, so that its
    /// tables are allocated and first touched once (for 64 KB kernels that took as long as
    /// loading the prefix).
    copy: NonNull<sys::ZSTD_CCtx>,
}

// SAFETY: the contexts are this value's alone, and zstd contexts may move between threads.
unsafe impl Send for TemplateContexts {}

impl TemplateContexts {
    /// Two new contexts; an error is 0 (no context could be allocated).
    pub(crate) fn new() -> Result<Self, usize> {
        let create = || {
            // SAFETY: creates a context, freed on drop (or below, if the second one fails).
            NonNull::new(unsafe { sys::ZSTD_createCCtx() }).ok_or(0usize)
        };
        let cctx = create()?;
        let copy = create().inspect_err(|_| {
            // SAFETY: `cctx` was created above and is not used after this.
            unsafe { sys::ZSTD_freeCCtx(cctx.as_ptr()) };
        })?;
        Ok(TemplateContexts { cctx, copy })
    }

    /// The memory the two contexts hold.
    pub(crate) fn sizeof(&self) -> usize {
        // SAFETY: both contexts are valid.
        unsafe {
            sys::ZSTD_sizeof_CCtx(self.cctx.as_ptr()) + sys::ZSTD_sizeof_CCtx(self.copy.as_ptr())
        }
    }
}

impl Drop for TemplateContexts {
    fn drop(&mut self) {
        // SAFETY: both contexts were created by `new` and are not used after this.
        unsafe {
            sys::ZSTD_freeCCtx(self.copy.as_ptr());
            sys::ZSTD_freeCCtx(self.cctx.as_ptr());
        }
    }
}

/// A zstd context with a prefix loaded, ready to begin a frame; see the module doc.
pub(crate) struct PrefixTemplate<'p> {
    contexts: TemplateContexts,
    /// The context reads the prefix in place until the template is dropped or its contexts
    /// taken back ([`PrefixTemplate::into_contexts`]; the next template's prefix replaces it).
    _prefix: std::marker::PhantomData<&'p [u8]>,
}

impl<'p> PrefixTemplate<'p> {
    /// `prefix` loaded with `params` into `contexts` (new, or an earlier template's: zstd
    /// begins the frame with clean tables either way, so the frames are the same bytes), for
    /// frames that record their content size and checksum; an error is zstd's code.
    pub(crate) fn new(
        contexts: TemplateContexts,
        prefix: &'p [u8],
        params: sys::ZSTD_compressionParameters,
    ) -> Result<Self, usize> {
        let template = PrefixTemplate {
            contexts,
            _prefix: std::marker::PhantomData,
        };
        let frame = sys::ZSTD_frameParameters {
            contentSizeFlag: 1,
            checksumFlag: 1,
            noDictIDFlag: 0,
        };
        // SAFETY: the context is valid, and the prefix outlives the template ('p); the pledged
        // size is replaced by each copy's.
        let code = unsafe {
            sys::ZSTD_compressBegin_advanced(
                template.contexts.cctx.as_ptr(),
                prefix.as_ptr().cast(),
                prefix.len(),
                sys::ZSTD_parameters {
                    cParams: params,
                    fParams: frame,
                },
                sys::ZSTD_CONTENTSIZE_UNKNOWN as u64,
            )
        };
        check(code)?;
        Ok(template)
    }

    /// The template's contexts, for the next template: they still point at this template's
    /// prefix, which no function but [`PrefixTemplate::new`] (which replaces it) reads.
    pub(crate) fn into_contexts(self) -> TemplateContexts {
        self.contexts
    }

    /// One frame of `data` (not empty) coded against the prefix: the bytes `ZSTD_compress2`
    /// makes with the template's parameters and the prefix referenced.
    pub(crate) fn compress(&mut self, data: &[u8]) -> Result<Vec<u8>, usize> {
        assert!(
            !data.is_empty(),
            "a copied context takes 0 bytes for an unknown size"
        );
        // SAFETY: both contexts are valid; the template was begun and is only read, and the
        // copy is this template's alone (`&mut self`).
        check(unsafe {
            sys::ZSTD_copyCCtx(
                self.contexts.copy.as_ptr(),
                self.contexts.cctx.as_ptr(),
                data.len() as u64,
            )
        })?;
        let mut frame = vec![0u8; zstd::zstd_safe::compress_bound(data.len()) + 4];
        // SAFETY: `frame` and `data` are valid for the lengths given; the copy reads the
        // prefix, which outlives the template.
        let len = check(unsafe {
            sys::ZSTD_compressEnd(
                self.contexts.copy.as_ptr(),
                frame.as_mut_ptr().cast(),
                frame.len() - 4,
                data.as_ptr().cast(),
                data.len(),
            )
        })?;
        frame.truncate(len);
        // The frame header descriptor follows the 4-byte magic; bit 2 is the checksum flag.
        frame[4] |= 0x04;
        let checksum = twox_hash::XxHash64::oneshot(0, data) as u32;
        frame.extend_from_slice(&checksum.to_le_bytes());
        Ok(frame)
    }

    /// The memory the template's context holds.
    #[cfg(test)]
    pub(crate) fn sizeof(&self) -> usize {
        // SAFETY: the context is valid.
        unsafe { sys::ZSTD_sizeof_CCtx(self.contexts.cctx.as_ptr()) }
    }
}

/// `code`, or the error zstd's function returned.
fn check(code: usize) -> Result<usize, usize> {
    // SAFETY: takes and returns plain values.
    if unsafe { sys::ZSTD_isError(code) } != 0 {
        Err(code)
    } else {
        Ok(code)
    }
}
