//! The TOC and the header a writer writes.

use super::{ArchiveWriter, Compression};
use crate::digest;
use crate::msgpack::Encoder;
use crate::toc::FRAME_SIZES_KEY;
use crate::{ArchiveError, DATA_START, HEADER_LEN, MAGIC};

impl ArchiveWriter<'_> {
    /// [`ArchiveWriter::gfx_arches`], checked to list every entry's arch.
    fn checked_gfx_arches(&self) -> Result<&[String], ArchiveError> {
        let arches = self.gfx_arches();
        match self.entry_arches.iter().find(|a| !arches.contains(a)) {
            Some(a) => Err(ArchiveError::InvalidArgument(format!(
                "entries use arch {a:?}, which the gfx_arches set by set_gfx_arches omits"
            ))),
            None => Ok(arches),
        }
    }

    /// Length of the blob region.
    pub(super) fn region_len(&self) -> u64 {
        let payload: u64 = (0..self.blobs.count()).map(|o| self.blobs.len(o)).sum();
        if self.compression.prefixed() {
            4 + 4 * self.blobs.count() as u64 + payload
        } else {
            payload
        }
    }

    /// The TOC's msgpack, keys in the reference writer's order, then the digests' keys
    /// ([`crate::digest`]): each entry's last, the TOC's last of all.
    pub(super) fn toc(&self, region_len: u64) -> Result<Vec<u8>, ArchiveError> {
        let gfx_arches = self.checked_gfx_arches()?;
        let mut e = Encoder::default();
        let layout_keys = match self.compression {
            Compression::None => 1,           // blobs
            Compression::Zstd { .. } => 3,    // zstd_offset, zstd_size, zstd_frame_sizes
            Compression::Unified { .. } => 1, // frames
        };
        e.map(7 + layout_keys)?;
        e.str("format_version")?;
        e.uint(self.compression.scheme().format_version().into());
        e.str("group_name")?;
        e.str(&self.group_name)?;
        e.str("gfx_arch_family")?;
        e.str(&self.gfx_arch_family)?;
        e.str("gfx_arches")?;
        e.array(gfx_arches.len())?;
        for arch in gfx_arches {
            e.str(arch)?;
        }
        e.str("toc")?;
        e.map(self.binaries.len())?;
        for b in &self.binaries {
            e.str(&b.name)?;
            e.map(b.arches.len())?;
            for (arch, entry) in &b.arches {
                e.str(arch)?;
                e.map(if entry.metadata.is_empty() { 4 } else { 5 })?;
                e.str("type")?;
                e.str("hsaco")?;
                e.str("ordinal")?;
                e.uint(entry.ordinal.into());
                e.str("original_size")?;
                e.uint(entry.original_size);
                if !entry.metadata.is_empty() {
                    e.str("metadata")?;
                    e.map(entry.metadata.len())?;
                    for (k, v) in &entry.metadata {
                        e.str(k)?;
                        e.str(v)?;
                    }
                }
                e.str(digest::ENTRY_KEY)?;
                e.uint(entry.digest);
            }
        }
        e.str("compression_scheme")?;
        e.str(self.compression.scheme().name())?;
        match self.compression {
            Compression::None => {
                e.str("blobs")?;
                e.array(self.blobs.count())?;
                let mut offset = DATA_START;
                for o in 0..self.blobs.count() {
                    let size = self.blobs.len(o);
                    e.map(2)?;
                    e.str("offset")?;
                    e.uint(offset);
                    e.str("size")?;
                    e.uint(size);
                    offset += size;
                }
            }
            Compression::Zstd { .. } => {
                e.str("zstd_offset")?;
                e.uint(DATA_START);
                e.str("zstd_size")?;
                e.uint(region_len);
                let sizes: Vec<u8> = (0..self.blobs.count())
                    .flat_map(|o| (self.blobs.len(o) as u32).to_le_bytes())
                    .collect();
                e.str(FRAME_SIZES_KEY)?;
                e.bin(&sizes)?;
            }
            Compression::Unified { .. } => {
                let refs = self.unified.as_ref().map_or(&[][..], |u| &u.refs[..]);
                e.str("frames")?;
                e.array(self.blobs.count())?;
                let mut offset = DATA_START;
                for (o, reference) in refs.iter().enumerate() {
                    let size = self.blobs.len(o);
                    e.map(if reference.is_some() { 3 } else { 2 })?;
                    e.str("offset")?;
                    e.uint(offset);
                    e.str("size")?;
                    e.uint(size);
                    if let Some(r) = reference {
                        e.str("ref")?;
                        e.uint((*r).into());
                    }
                    offset += size;
                }
            }
        }
        let mut toc = e.into_bytes();
        digest::seal_toc(&self.header(DATA_START + region_len), &mut toc);
        Ok(toc)
    }

    /// The header with `toc_offset`, padded to [`DATA_START`].
    pub(super) fn header(&self, toc_offset: u64) -> [u8; DATA_START as usize] {
        let mut header = [0u8; DATA_START as usize];
        let version = self.compression.scheme().format_version();
        header[0..4].copy_from_slice(&MAGIC);
        header[4..8].copy_from_slice(&version.to_le_bytes());
        header[8..HEADER_LEN].copy_from_slice(&toc_offset.to_le_bytes());
        header
    }
}
