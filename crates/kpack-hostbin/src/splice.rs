//! An output file described as edits of an input, streamed without copying the input: the
//! host rewrites (`kpack-elf`'s and `kpack-pe`'s) plan a list of [`Piece`]s and [`Patches`]
//! before anything is written, then [`Splice::write_to`] streams it.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::Range;

/// One run of output bytes.
#[derive(Debug, Clone)]
pub enum Piece {
    /// Input bytes `start..end`, with the patches that fall inside applied.
    Input {
        /// First input byte.
        start: u64,
        /// One past the last input byte.
        end: u64,
    },
    /// This many zero bytes.
    Zeros(u64),
    /// These bytes.
    Bytes(Vec<u8>),
    /// This many bytes read from the contents stream given to [`Splice::write_with_contents`]
    /// (the new `.hip_fatbin` contents of a prune, too large to plan in memory).
    Contents(u64),
}

impl Piece {
    /// The number of output bytes.
    pub fn len(&self) -> u64 {
        match self {
            Piece::Input { start, end } => end - start,
            Piece::Zeros(n) => *n,
            Piece::Bytes(b) => b.len() as u64,
            Piece::Contents(n) => *n,
        }
    }

    /// Whether the piece writes nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Two edits of the same input bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("two edits overlap at file offset {at:#x}")]
pub struct Overlap {
    /// Input offset of the second edit.
    pub at: u64,
}

/// Replacement bytes keyed by input offset, never overlapping.
#[derive(Debug, Clone, Default)]
pub struct Patches(BTreeMap<u64, Vec<u8>>);

impl Patches {
    /// Replaces the input bytes at `at` with `bytes`.
    pub fn add(&mut self, at: u64, bytes: Vec<u8>) -> Result<(), Overlap> {
        let end = at + bytes.len() as u64;
        let clash = self
            .0
            .range(..end)
            .next_back()
            .is_some_and(|(&p, b)| p + b.len() as u64 > at);
        if clash {
            return Err(Overlap { at });
        }
        self.0.insert(at, bytes);
        Ok(())
    }

    /// Zeroes the input bytes of `range`.
    pub fn zero(&mut self, range: Range<u64>) -> Result<(), Overlap> {
        self.add(range.start, vec![0; (range.end - range.start) as usize])
    }

    /// Every patch, by input offset.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.0.iter().map(|(&at, b)| (at, b.as_slice()))
    }
}

/// Where the bytes of [`Piece::Contents`] come from: any reader, copied through a buffer,
/// or a source that holds its bytes already and hands them to the output uncopied
/// (`kpack prune`'s kept code objects, straight from the mapped input).
pub trait Contents {
    /// Hands the next `len` bytes to `sink`, in order, in slices of any size; an error if
    /// fewer are left.
    fn write_next(
        &mut self,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()>;
}

impl<R: io::Read + ?Sized> Contents for R {
    fn write_next(
        &mut self,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        // Chunks as large as the writer's buffer go past it, unbuffered.
        let mut buf = vec![0u8; (1 << 20).min(len as usize)];
        let mut left = len;
        while left > 0 {
            let k = left.min(buf.len() as u64) as usize;
            self.read_exact(&mut buf[..k]).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "the new contents end after {} of {len} bytes: {e}",
                        len - left
                    ),
                )
            })?;
            sink(&buf[..k])?;
            left -= k as u64;
        }
        Ok(())
    }
}

/// A planned output: pieces in output order, patches applied to the input pieces.
#[derive(Debug, Clone, Default)]
pub struct Splice {
    /// The output, in order.
    pub pieces: Vec<Piece>,
    /// Edits of the input bytes the pieces copy; each lies inside one `Input` piece.
    pub patches: Patches,
}

impl Splice {
    /// The output's length.
    pub fn len(&self) -> u64 {
        self.pieces.iter().map(Piece::len).sum()
    }

    /// Whether the output is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Streams the output, in slices, to `sink`; `input` must be the bytes planned from,
    /// `contents` the source of [`Piece::Contents`] (which must hold enough bytes).
    pub fn for_each_slice(
        &self,
        input: &[u8],
        contents: &mut dyn Contents,
        mut sink: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        static ZEROS: [u8; 65536] = [0; 65536];
        for piece in &self.pieces {
            match piece {
                Piece::Input { start, end } => {
                    let mut at = *start;
                    for (&p, bytes) in self.patches.0.range(*start..*end) {
                        sink(&input[at as usize..p as usize])?;
                        sink(bytes)?;
                        at = p + bytes.len() as u64;
                    }
                    sink(&input[at as usize..*end as usize])?;
                }
                Piece::Zeros(len) => {
                    let mut n = *len;
                    while n > 0 {
                        let k = n.min(ZEROS.len() as u64);
                        sink(&ZEROS[..k as usize])?;
                        n -= k;
                    }
                }
                Piece::Bytes(b) => sink(b)?,
                Piece::Contents(len) => contents.write_next(*len, &mut sink)?,
            }
        }
        Ok(())
    }

    /// The output in memory (for small files, tests and fuzzing), with `contents` for its
    /// [`Piece::Contents`].
    pub fn to_vec_with_contents(&self, input: &[u8], mut contents: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() as usize);
        self.write_with_contents(input, &mut contents, &mut out)
            .expect("writing to a Vec cannot fail");
        out
    }

    /// The output in memory (for small files, tests and fuzzing).
    pub fn to_vec(&self, input: &[u8]) -> Vec<u8> {
        self.to_vec_with_contents(input, &[])
    }

    /// Streams the output to `w`; `input` must be the bytes planned from.
    pub fn write_to<W: Write>(&self, input: &[u8], w: W) -> io::Result<()> {
        self.write_with_contents(input, &mut io::empty(), w)
    }

    /// Streams the output to `w`, reading [`Piece::Contents`] from `contents`.
    pub fn write_with_contents<W: Write>(
        &self,
        input: &[u8],
        contents: &mut dyn Contents,
        mut w: W,
    ) -> io::Result<()> {
        self.for_each_slice(input, contents, |b| w.write_all(b))?;
        w.flush()
    }
}
