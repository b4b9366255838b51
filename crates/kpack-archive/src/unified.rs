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
//! * A standalone frame (a *root*) is one zstd frame recording its content size.
//! * A delta frame is one zstd frame recording its content size, coded with the decoded content
//!   of frame `ref` as a raw-content prefix (`ZSTD_CCtx_refPrefix`; the decoder loads the same
//!   bytes as a raw-content dictionary). `ref` is smaller than the frame's own ordinal, and
//!   the frame it names is a root or a delta coded against a root, so that **reading one
//!   entry decodes at most [`MAX_CHAIN`] = 3 frames** (root, middle, leaf) and touches only
//!   those frames' bytes and the TOC. A reference's content does not begin with the zstd
//!   dictionary magic (`37 a4 30 ec`), so that it cannot be mistaken for a formatted
//!   dictionary. Every frame's window is at most 2^27 bytes, the decoders' default limit.
//!
//! The header's version 2 makes readers that check `version == 1` (the reference C++ and
//! Python readers, spec §1/§4) reject these archives with `UNSUPPORTED_VERSION`; version 1
//! archives never use scheme `unified`, and version 2 archives use nothing else.
//!
//! # Choosing references (the writer)
//!
//! The writer gathers the kernels of one binary key (one kernel's targets and feature
//! variants, which resemble each other most) and codes them together with
//! `Coder::code_group`: trial compressions at level 4 (`TRIAL_LEVEL`) measure each kernel alone, against
//! every other kernel of the group, and against the latest root of its own target from an
//! earlier group (the kernels of one library resemble each other; this is what a single-target
//! archive has); a trial whose reference and kernel reach 8 MB uses zstd's `fast` match
//! finder with a hash table covering the reference instead (`Search::WideTrial`: level 4
//! would index only the reference's last 2 MB). A local search then chooses each kernel's level in a forest of at most three
//! frames per chain: *root* (standalone), *middle* (coded against a root of the group or the
//! earlier root of its target) or *leaf* (coded against a root or a middle kernel), minimising
//! the group's total trial size (a facility-location problem with two tiers; see
//! `choose_levels`). The frames are then compressed once at the archive's level and written
//! roots first, then middles, then leaves, so that every reference points back. A group is
//! bounded by `GROUP_BUDGET` bytes (a larger one is coded in parts) and the earlier roots by
//! `RETAINED_BUDGET` (one per target, oldest dropped first). The writer holds only the
//! earlier roots' ordinals and reads a root back from the archive when a group is coded
//! against it, so its memory is bounded by one group, not by the library nor by the number
//! of archives written at once (a transform writes one per target). The choice depends only on the
//! kernels and the order they are added in, never on timing: the output is the same for any
//! thread count.
//!
//! # On all cores
//!
//! A group's trial compressions are independent of each other, and so are its final ones
//! once the forest is chosen: both run on rayon's pool (its size is the process's thread
//! count), and their results are placed by member, so the frames do not depend on which
//! thread coded what. Callers that write several archives at once (a transform writes one
//! per target) code their groups in parallel too. A level-19 context over a large kernel and
//! its reference takes up to 150 MB, so every compression first reserves its context's
//! estimated size (`context_estimate`) from one process-wide gate of `CONTEXT_BUDGET`
//! bytes: at most that much context memory is alive at once, whatever the thread count.
//!
//! The coder (the writer's side of all this) is `crate::coder`, behind the `write` feature;
//! this module holds what readers and writers share.

/// The largest frame window (and so prefix plus content) a frame may use: zstd decoders
/// refuse larger windows unless told otherwise.
pub const MAX_WINDOW_LOG: u32 = 27;

/// The most frames reading one entry decodes: a root (standalone), a middle frame coded
/// against it, and a leaf coded against the middle one.
pub const MAX_CHAIN: usize = 3;

/// The first bytes of a formatted zstd dictionary; a reference never starts with them.
pub const DICTIONARY_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];
