//! A compressed bundle read one entry at a time from its zstd stream, for bundles too large
//! to decode whole within a memory budget: the uncompressed payload is never held, only the
//! entry being read (and zstd's window, at most 2^27 bytes).
//!
//! The checks are those of [`crate::DecodedBundle::decode`]: the header is parsed as
//! [`crate::Bundle::parse`] does, the payload must be exactly the claimed size, and its MD5
//! must be the stored hash. The size and the hash can only be known at the end of the
//! stream: [`EntryStream::next_entry`] reports them after the last entry, so a caller must
//! read to the end (`Ok(None)`) before it publishes anything made from the entries.
//!
//! The payload's MD5 is computed on a thread of its own ([`BackgroundMd5`]), beside the
//! decoding and whatever the caller does with each entry: a streamed bundle is read on one
//! thread, and its hash was over a third of that thread's work (a 3.37 GB bundle of
//! librocprim-tests kept one core busy for minutes while the other waited).
//!
//! Hand-written because no crate reads clang offload bundles.

use std::io::Read;
use std::sync::mpsc::{SyncSender, sync_channel};
use std::thread::JoinHandle;

use md5::{Digest, Md5};

use crate::ccob::{CcobHeader, CompressionMethod};
use crate::plain::Header;
use crate::{BundleError, BundleFormat, EntryHeader, looks_compressed};

/// One entry of a streamed bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamedEntry {
    /// Its index in the bundle's header.
    pub index: usize,
    /// Its bundle-entry id.
    pub triple: String,
    /// Offset of its data in the uncompressed bundle.
    pub offset: u64,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// See the module doc.
pub struct EntryStream<'a> {
    header: CcobHeader,
    /// The compressed stream the decoder reads.
    input: &'a [u8],
    decoder: zstd::stream::read::Decoder<'static, &'a [u8]>,
    /// Payload bytes read ahead while looking for the end of the bundle header, not yet
    /// consumed: `ahead[ahead_pos..]`.
    ahead: Vec<u8>,
    ahead_pos: usize,
    md5: BackgroundMd5,
    /// Payload bytes consumed (and hashed) so far.
    position: u64,
    entries: Vec<EntryHeader>,
    next: usize,
}

/// Where an entry's bytes go, piece by piece, as they are decoded.
pub type Piece<'p> = &'p mut dyn FnMut(&[u8]);

/// The most an entry's buffer is reserved for before its bytes arrive: an entry's size is
/// a claim of the input, which the bytes must then bear out.
const ENTRY_RESERVE_LIMIT: u64 = 256 << 20;

/// How far the search for the end of the bundle header reads at first (it doubles).
const FIRST_READ: u64 = 64 << 10;

/// The largest window zstd's decoder accepts unless told otherwise (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`,
/// 2^27): what clang's long-distance matching uses, and what a frame declaring more cannot
/// be decoded with.
pub const MAX_STREAM_WINDOW: u64 = 1 << 27;

/// The window zstd's decoder holds reading the CCOB at `bytes[0]` as a stream
/// ([`EntryStream`]): the window its frame header declares, or the frame's content size when
/// that is smaller, at most [`MAX_STREAM_WINDOW`]. `None` when `bytes` is not a zstd CCOB with
/// a whole frame header. Read by hand (RFC 8878, 3.1.1.1): zstd-safe does not give the
/// window, and the CCOB's claims are all that is read, nothing decoded.
pub fn stream_window(bytes: &[u8]) -> Option<u64> {
    if !looks_compressed(bytes) {
        return None;
    }
    let header = CcobHeader::parse(bytes).ok()?;
    if header.method != CompressionMethod::Zstd {
        return None;
    }
    let frame = bytes.get(header.header_len as usize..)?;
    if frame.get(..4)? != ZSTD_MAGIC.to_le_bytes() {
        return None;
    }
    let descriptor = *frame.get(4)?;
    let content = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) => size,
        _ => u64::MAX,
    };
    let window = if descriptor & SINGLE_SEGMENT != 0 {
        content
    } else {
        let w = *frame.get(5)?;
        let base = 1u64 << (10 + (w >> 3));
        (base + base / 8 * u64::from(w & 7)).min(content)
    };
    Some(window.min(MAX_STREAM_WINDOW))
}

/// The magic number opening a zstd frame.
const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// The frame header descriptor's flag of a frame with no window descriptor, whose window is
/// its content.
const SINGLE_SEGMENT: u8 = 1 << 5;

impl<'a> EntryStream<'a> {
    /// The entries of the CCOB at `bytes[0]`, if it is a zstd CCOB whose entries lie in
    /// header order without overlapping (what clang writes); `None` otherwise, for the caller
    /// to decode it whole.
    pub fn open(bytes: &'a [u8]) -> Result<Option<Self>, BundleError> {
        if !looks_compressed(bytes) {
            return Ok(None);
        }
        let header = CcobHeader::parse(bytes)?;
        if header.method != CompressionMethod::Zstd {
            return Ok(None);
        }
        let extent = header.extent(bytes)?;
        let stream = &bytes[header.header_len as usize..extent as usize];
        // Nothing of the claimed size is allocated: only what its compressed bytes can produce
        // bounds it, not `MAX_DECOMPRESSED`.
        header.check_claim(stream.len() as u64, false)?;
        let decoder = zstd::stream::read::Decoder::with_buffer(stream)
            .map_err(|e| header.decompress_error(0, e.to_string()))?;
        let mut this = EntryStream {
            header,
            input: stream,
            decoder,
            ahead: Vec::new(),
            ahead_pos: 0,
            md5: BackgroundMd5::new(),
            position: 0,
            entries: Vec::new(),
            next: 0,
        };
        let size = this.header.uncompressed_size;
        let mut want = FIRST_READ.min(size);
        let (header_len, entries) = loop {
            this.read_ahead(want)?;
            match Header::parse(&this.ahead, size) {
                Ok(h) => break (h.len, h.entry_headers()),
                Err(BundleError::Truncated { .. }) if want < size => want = (want * 2).min(size),
                Err(e) => return Err(e),
            }
        };
        let mut end = header_len;
        for e in &entries {
            if e.offset < end {
                return Ok(None);
            }
            end = e.offset + e.size;
        }
        this.entries = entries;
        Ok(Some(this))
    }

    /// The claimed size of the uncompressed bundle.
    pub fn uncompressed_size(&self) -> u64 {
        self.header.uncompressed_size
    }

    /// The CCOB's header fields.
    pub fn format(&self) -> BundleFormat {
        BundleFormat::from(&self.header)
    }

    /// The bundle's entries in header order, as its header gives them (no data read yet).
    pub fn entry_headers(&self) -> &[EntryHeader] {
        &self.entries
    }

    /// The prefix of the CCOB's compressed payload the decoder has read so far: a caller
    /// reading the CCOB from a file mapping may drop those pages.
    pub fn consumed_input(&self) -> &'a [u8] {
        let rest: &[u8] = self.decoder.get_ref();
        &self.input[..self.input.len() - rest.len()]
    }

    /// The next entry in header order; after the last, checks the payload's size and hash
    /// and gives `None`.
    pub fn next_entry(&mut self) -> Result<Option<StreamedEntry>, BundleError> {
        let Some(len) = self.entries.get(self.next).map(|e| e.size) else {
            self.finish()?;
            return Ok(None);
        };
        // Sized up front so that a 130 MB code object is not grown by doubling (which touches
        // up to twice its size); the size is the input's claim, so only up to a limit.
        let mut data = Vec::with_capacity(len.min(ENTRY_RESERVE_LIMIT) as usize);
        let header = self.next_entry_in_pieces(&mut |piece| data.extend_from_slice(piece))?;
        Ok(
            header.map(|EntryHeader { triple, offset, .. }| StreamedEntry {
                index: self.next - 1,
                triple,
                offset,
                data,
            }),
        )
    }

    /// The next entry in header order, its bytes handed to `piece` in order as they are
    /// decoded, never held whole: for a code object too large to
    /// hold (librocprim-tests' are 217 MB each) that its caller codes or hashes as it comes.
    /// Gives the entry's header; after the last entry, checks the payload's size and hash and
    /// gives `None`. The entry's bytes are proven only then (see the module doc).
    pub fn next_entry_in_pieces(
        &mut self,
        piece: Piece<'_>,
    ) -> Result<Option<EntryHeader>, BundleError> {
        let Some(header) = self.entries.get(self.next).cloned() else {
            self.finish()?;
            return Ok(None);
        };
        self.consume(header.offset - self.position, None)?;
        self.consume(header.size, Some(piece))?;
        self.next += 1;
        Ok(Some(header))
    }

    /// Reads ahead until `want` payload bytes are buffered (fewer only if the stream ends).
    fn read_ahead(&mut self, want: u64) -> Result<(), BundleError> {
        let have = self.ahead.len() as u64;
        if want > have {
            let got = (&mut self.decoder)
                .take(want - have)
                .read_to_end(&mut self.ahead)
                .map_err(|e| self.header.decompress_error(0, e.to_string()))?;
            if have + (got as u64) < want {
                return Err(self.header.size_error(have + got as u64));
            }
        }
        Ok(())
    }

    /// Consumes `len` payload bytes, hashing them, and hands them to `piece` if given.
    fn consume(&mut self, len: u64, mut piece: Option<Piece<'_>>) -> Result<(), BundleError> {
        let mut left = len;
        let ahead = &self.ahead[self.ahead_pos..];
        let from_ahead = (ahead.len() as u64).min(left) as usize;
        if from_ahead > 0 {
            self.md5.update(&ahead[..from_ahead]);
            if let Some(piece) = piece.as_deref_mut() {
                piece(&ahead[..from_ahead]);
            }
            self.ahead_pos += from_ahead;
            left -= from_ahead as u64;
            if self.ahead_pos == self.ahead.len() {
                self.ahead = Vec::new();
                self.ahead_pos = 0;
            }
        }
        let mut chunk = vec![0u8; (64 << 10).min(left) as usize];
        while left > 0 {
            let n = (chunk.len() as u64).min(left) as usize;
            let got = self
                .decoder
                .read(&mut chunk[..n])
                .map_err(|e| self.header.decompress_error(0, e.to_string()))?;
            if got == 0 {
                return Err(self.header.size_error(self.position + len - left));
            }
            self.md5.update(&chunk[..got]);
            if let Some(piece) = piece.as_deref_mut() {
                piece(&chunk[..got]);
            }
            left -= got as u64;
        }
        self.position += len;
        Ok(())
    }

    /// Consumes the rest of the payload and checks its size and hash.
    fn finish(&mut self) -> Result<(), BundleError> {
        let size = self.header.uncompressed_size;
        self.consume(size - self.position, None)?;
        let mut extra = [0u8; 1];
        let more = self
            .decoder
            .read(&mut extra)
            .map_err(|e| self.header.decompress_error(0, e.to_string()))?;
        if more > 0 {
            return Err(self.header.size_error(size + 1));
        }
        let digest = self.md5.finalize();
        let actual = u64::from_le_bytes(digest[..8].try_into().expect("an MD5 has 16 bytes"));
        if actual != self.header.hash {
            return Err(BundleError::HashMismatch {
                offset: self.header.header_len - 8,
                expected: self.header.hash,
                actual,
            });
        }
        Ok(())
    }
}

/// Bytes handed to the hashing thread at once (below glibc's mmap threshold, so the buffers
/// are reused from the heap rather than mapped and faulted in afresh).
const HASH_CHUNK: usize = 256 << 10;

/// Chunks waiting for the hashing thread at most: what it holds is bounded to
/// `HASH_QUEUE * HASH_CHUNK` bytes (4 MiB), whatever the bundle's size.
const HASH_QUEUE: usize = 16;

/// An MD5 fed on one thread and computed on another (see the module doc); inline when no
/// thread can be started.
struct BackgroundMd5 {
    /// Bytes not yet handed over.
    pending: Vec<u8>,
    /// The hashing thread, unless none could be started.
    hasher: Option<Hasher>,
    /// The MD5 when there is no hashing thread.
    inline: Md5,
}

/// The hashing thread of a [`BackgroundMd5`] and the way to it.
struct Hasher {
    chunks: SyncSender<Vec<u8>>,
    thread: JoinHandle<[u8; 16]>,
}

impl BackgroundMd5 {
    fn new() -> Self {
        let (to_hasher, chunks) = sync_channel::<Vec<u8>>(HASH_QUEUE);
        let spawned = std::thread::Builder::new()
            .name("kpack-md5".to_owned())
            .spawn(move || {
                let mut md5 = Md5::new();
                for chunk in chunks {
                    md5.update(&chunk);
                }
                md5.finalize().into()
            });
        BackgroundMd5 {
            pending: Vec::with_capacity(HASH_CHUNK),
            hasher: spawned.ok().map(|thread| Hasher {
                chunks: to_hasher,
                thread,
            }),
            inline: Md5::new(),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        let Some(hasher) = &self.hasher else {
            self.inline.update(bytes);
            return;
        };
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= HASH_CHUNK {
            let full = std::mem::replace(&mut self.pending, Vec::with_capacity(HASH_CHUNK));
            // Fails only if the hasher is gone (it panicked), which `finalize` resumes.
            let _ = hasher.chunks.send(full);
        }
    }

    /// The MD5 of every byte given; it starts again empty.
    fn finalize(&mut self) -> [u8; 16] {
        let Some(Hasher { chunks, thread }) = self.hasher.take() else {
            return std::mem::take(&mut self.inline).finalize().into();
        };
        let _ = chunks.send(std::mem::take(&mut self.pending));
        drop(chunks);
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes given in pieces of every size, across many chunks handed to the hashing thread
    /// and a last one left pending, hash as the MD5 of all of them at once.
    #[test]
    fn the_background_md5_of_bytes_given_piece_by_piece_is_their_md5() {
        let bytes: Vec<u8> = (0..HASH_CHUNK * (HASH_QUEUE + 5) + 12_345)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        let mut md5 = BackgroundMd5::new();
        assert!(md5.hasher.is_some());
        let mut rest = &bytes[..];
        let mut piece = 1;
        while !rest.is_empty() {
            let n = piece.min(rest.len());
            md5.update(&rest[..n]);
            rest = &rest[n..];
            piece = piece * 3 % 700_001 + 1;
        }
        let expected: [u8; 16] = Md5::digest(&bytes).into();
        assert_eq!(md5.finalize(), expected);
    }
}
