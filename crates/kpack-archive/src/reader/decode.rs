//! Decoding an entry's zstd frame: a pooled context, the checks of its recorded size and of
//! the length it decodes to, and the allocation it may make.

use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

use zstd::zstd_safe::{self, DCtx, WriteBuf};

use crate::MAX_ORIGINAL_SIZE;
use crate::unified::DICTIONARY_MAGIC;

/// Idle decompression contexts, shared by every archive: creating one per call (~100 KB of
/// tables) cost as much as decoding a typical kernel. Holds at most as many as were ever in use
/// at once.
static DCTX_POOL: Mutex<Vec<DCtx<'static>>> = Mutex::new(Vec::new());

/// Decompresses the single frame `frame` into `dst` with a pooled context, with `reference`
/// (when not empty) as its raw-content prefix.
fn decompress<C: WriteBuf + ?Sized>(
    frame: &[u8],
    dst: &mut C,
    reference: &[u8],
) -> Result<usize, String> {
    if reference.starts_with(&DICTIONARY_MAGIC) {
        return Err("the reference content begins with the zstd dictionary magic".to_owned());
    }
    let idle = DCTX_POOL
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .pop();
    let mut dctx = match idle {
        Some(d) => d,
        None => DCtx::try_create().ok_or("cannot allocate a zstd context")?,
    };
    let result = if reference.is_empty() {
        dctx.decompress(dst, frame)
    } else {
        dctx.decompress_using_dict(dst, frame, reference)
    };
    DCTX_POOL
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(dctx);
    result.map_err(|code| zstd_safe::get_error_name(code).to_owned())
}

/// A reference's content, empty for none.
pub(super) fn content_of(reference: &Option<Arc<Vec<u8>>>) -> &[u8] {
    reference.as_deref().map_or(&[], |c| &c[..])
}

/// Whether the frame's header records a content size, which must then be `original_size`.
pub(super) fn recorded_size(frame: &[u8], original_size: u64) -> Result<bool, String> {
    match zstd_safe::get_frame_content_size(frame) {
        Err(_) => Err("invalid zstd frame header".to_owned()),
        Ok(Some(n)) if n != original_size => Err(format!(
            "frame content size {n} differs from original_size {original_size}"
        )),
        Ok(recorded) => Ok(recorded.is_some()),
    }
}

pub(super) fn check_len(len: u64, original_size: u64) -> Result<(), String> {
    if len == original_size {
        Ok(())
    } else {
        Err(format!(
            "frame decoded to {len} bytes, original_size is {original_size}"
        ))
    }
}

/// Decodes into `out`, exactly `original_size` bytes long: a frame yielding more fails.
pub(super) fn decode_into(
    frame: &[u8],
    reference: &[u8],
    original_size: u64,
    out: &mut [u8],
) -> Result<(), String> {
    recorded_size(frame, original_size)?;
    check_len(decompress(frame, out, reference)? as u64, original_size)
}

/// A `zstd-per-kernel` code object decoded to more than this is read in pieces by
/// [`Archive::get_in_pieces`]; one smaller is decoded whole, in one call.
pub const PIECES_ABOVE: u64 = 16 << 20;

/// Decodes the single frame `frame`, which must decode to exactly `original_size` bytes,
/// handing its content to `piece` in order as it is decoded, never whole (see
/// [`super::Archive::get_in_pieces`]).
pub(super) fn decode_in_pieces(
    frame: &[u8],
    original_size: u64,
    piece: &mut dyn FnMut(&[u8]),
) -> Result<(), String> {
    recorded_size(frame, original_size)?;
    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame)
        .map_err(|e| e.to_string())?
        .single_frame();
    let mut chunk = vec![0u8; 256 << 10];
    let mut len = 0u64;
    loop {
        let got = decoder.read(&mut chunk).map_err(|e| e.to_string())?;
        if got == 0 {
            return check_len(len, original_size);
        }
        len += got as u64;
        if len > original_size {
            return Err(format!(
                "frame decodes to more than original_size {original_size}"
            ));
        }
        piece(&chunk[..got]);
    }
}

/// How much larger than its frame a content may be for its recorded size to be allocated at
/// once; beyond that the output grows with what the frame really yields, so that a few
/// hostile bytes claiming gigabytes allocate only what they decode to.
const TRUSTED_RATIO: usize = 64;

pub(super) fn decode_to_vec(
    frame: &[u8],
    reference: &[u8],
    original_size: u64,
) -> Result<Vec<u8>, String> {
    // original_size was capped at open, so this only fails on 32-bit hosts.
    let size = usize::try_from(original_size)
        .map_err(|_| format!("original_size {original_size} does not fit in memory"))?;
    let trusted = (frame.len() + reference.len())
        .saturating_mul(TRUSTED_RATIO)
        .saturating_add(1 << 20);
    let out = if recorded_size(frame, original_size)? && size <= trusted {
        let mut out = Vec::with_capacity(size);
        decompress(frame, &mut out, reference)?;
        out
    } else {
        if reference.starts_with(&DICTIONARY_MAGIC) {
            return Err("the reference content begins with the zstd dictionary magic".into());
        }
        // Without a recorded size, or with one far beyond the frame, let the output grow
        // with what the frame really yields rather than trusting the size for the allocation.
        let mut out = Vec::new();
        zstd::stream::read::Decoder::with_dictionary(frame, reference)
            .map_err(|e| e.to_string())?
            .single_frame()
            .take(original_size.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| e.to_string())?;
        out
    };
    check_len(out.len() as u64, original_size)?;
    Ok(out)
}

/// Decodes a `unified` frame, which must record its content size, against `reference`
/// (empty for a standalone frame).
pub(crate) fn decode_frame(frame: &[u8], reference: &[u8]) -> Result<Vec<u8>, String> {
    match zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n <= MAX_ORIGINAL_SIZE => decode_to_vec(frame, reference, n),
        Ok(Some(n)) => Err(format!(
            "frame content size {n} exceeds the {MAX_ORIGINAL_SIZE}-byte limit"
        )),
        Ok(None) => Err("frame does not record its content size".to_owned()),
        Err(_) => Err("invalid zstd frame header".to_owned()),
    }
}
