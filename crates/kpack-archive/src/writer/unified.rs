//! What scheme `unified` adds to the writer: kernels gathered per binary key and coded
//! together ([`Coder::code_group`]), each frame's reference recorded.

use std::borrow::Cow;

use super::{ArchiveWriter, Blobs, ContentKey, GroupMember, KernelCompressor};
use crate::coder::{Coded, Coder, GROUP_BUDGET};
use crate::{ArchiveError, normalise_key};

/// The state of a `unified` writer.
pub(super) struct Unified<'a> {
    coder: Coder,
    /// Per written ordinal, the ordinal of its reference frame.
    pub(super) refs: Vec<Option<u32>>,
    /// The binary key whose kernels are being gathered; they are coded together (one
    /// [`Coder::code_group`]) when another key comes, the group outgrows [`GROUP_BUDGET`] or
    /// the archive is written. Until then their entries hold provisional ordinals, from the
    /// count of written frames on, in arrival order.
    group_binary: String,
    pub(super) group: Vec<(String, Cow<'a, [u8]>, ContentKey)>,
}

impl Unified<'_> {
    pub(super) fn new(level: i32) -> Self {
        Unified {
            coder: Coder::new(level),
            refs: Vec::new(),
            group_binary: String::new(),
            group: Vec::new(),
        }
    }
}

impl<'a> ArchiveWriter<'a> {
    /// [`ArchiveWriter::add_group`] of a `unified` writer.
    pub(super) fn add_group_unified(
        &mut self,
        members: &[GroupMember<'_>],
    ) -> Result<(), ArchiveError> {
        self.code_group()?;
        let mut added: Vec<(Cow<'_, str>, &str)> = Vec::new();
        for m in members {
            for key in m.keys {
                self.check_new_entry(key, m.arch, &[])?;
                let key = normalise_key(key);
                if added.iter().any(|(k, a)| *k == key && *a == m.arch) {
                    return Err(ArchiveError::DuplicateEntry {
                        binary: key.into_owned(),
                        arch: m.arch.to_owned(),
                    });
                }
                added.push((key, m.arch));
            }
        }
        // Each member's ordinal: a written frame or an earlier member with the same bytes,
        // else the next distinct member to code (`Err(index)` into `distinct`).
        let mut distinct: Vec<(&str, &[u8], ContentKey)> = Vec::new();
        let mut placed: Vec<(Result<u32, usize>, ContentKey)> = Vec::with_capacity(members.len());
        for m in members {
            let kernel = KernelCompressor::on_this_thread(self.compression, |c| c.prepare(m.data))?;
            let key = (kernel.digest, kernel.original_size);
            let place = match self.written_with(key, m.data)? {
                Some(o) => Ok(o),
                None => match distinct
                    .iter()
                    .position(|(_, d, k)| *k == key && *d == m.data)
                {
                    Some(d) => Err(d),
                    None => {
                        distinct.push((m.arch, m.data, key));
                        Err(distinct.len() - 1)
                    }
                },
            };
            placed.push((place, key));
        }
        let mut ordinals = Vec::with_capacity(distinct.len());
        let mut part_start = 0;
        let mut part_bytes = 0;
        for (i, (_, data, _)) in distinct.iter().enumerate() {
            if part_bytes + data.len() > GROUP_BUDGET && i > part_start {
                ordinals.extend(self.store_coded(&distinct[part_start..i])?);
                (part_start, part_bytes) = (i, 0);
            }
            part_bytes += data.len();
        }
        ordinals.extend(self.store_coded(&distinct[part_start..])?);
        for (m, (place, key)) in members.iter().zip(placed) {
            let ordinal = place.unwrap_or_else(|d| ordinals[d]);
            for binary_key in m.keys {
                let slot = self.check_new_entry(binary_key, m.arch, &[])?;
                let binary_key = normalise_key(binary_key);
                self.push_entry(slot, binary_key, m.arch, ordinal, key, &[]);
            }
        }
        Ok(())
    }

    /// `unified`: the ordinal of the kernel `data`: an existing frame or gathered kernel with
    /// the same bytes, or a provisional one in the group being gathered.
    pub(super) fn intern_unified(
        &mut self,
        binary: &str,
        arch: &str,
        data: Cow<'a, [u8]>,
        key: ContentKey,
    ) -> Result<u32, ArchiveError> {
        if self
            .unified
            .as_ref()
            .is_some_and(|u| u.group_binary != binary)
        {
            self.code_group()?;
        }
        if let Some(o) = self.written_with(key, &data)? {
            return Ok(o);
        }
        let Some(u) = &self.unified else {
            unreachable!("intern_unified serves unified writers");
        };
        if let Some(m) = u.group.iter().position(|(_, d, k)| *k == key && *d == data) {
            return Ok((self.blobs.count() + m) as u32);
        }
        let gathered: usize = u.group.iter().map(|(_, d, _)| d.len()).sum();
        if gathered + data.len() > GROUP_BUDGET {
            self.code_group()?;
        }
        let ordinal = self.next_ordinal()?;
        let Some(u) = &mut self.unified else {
            unreachable!("intern_unified serves unified writers");
        };
        if u.group.is_empty() {
            binary.clone_into(&mut u.group_binary);
        }
        u.group.push((arch.to_owned(), data, key));
        Ok(ordinal)
    }

    /// `unified`: the written frame holding `data` (whose content key is `key`), if any.
    fn written_with(&mut self, key: ContentKey, data: &[u8]) -> Result<Option<u32>, ArchiveError> {
        let (Some(candidates), Some(u)) = (self.dedupe.get(&key), &self.unified) else {
            return Ok(None);
        };
        for &o in candidates {
            if decode_unified(&mut self.blobs, &u.refs, o)? == data {
                return Ok(Some(o));
            }
        }
        Ok(None)
    }

    /// `unified`: codes the gathered group ([`ArchiveWriter::store_coded`]) and gives its
    /// entries their final ordinals.
    pub(super) fn code_group(&mut self) -> Result<(), ArchiveError> {
        let Some(u) = &mut self.unified else {
            return Ok(());
        };
        if u.group.is_empty() {
            return Ok(());
        }
        let group = std::mem::take(&mut u.group);
        let group_binary = std::mem::take(&mut u.group_binary);
        let first = self.blobs.count() as u32;
        let members: Vec<(&str, &[u8], ContentKey)> = group
            .iter()
            .map(|(a, d, k)| (a.as_str(), &d[..], *k))
            .collect();
        let final_ordinal = self.store_coded(&members)?;
        if let Some(&b) = self.binary_index.get(&group_binary) {
            for (_, entry) in &mut self.binaries[b].arches {
                if entry.ordinal >= first {
                    entry.ordinal = final_ordinal[(entry.ordinal - first) as usize];
                }
            }
        }
        Ok(())
    }

    /// `unified`: codes `members` (`(arch, kernel, content key)`, distinct, none written
    /// yet) as one group ([`Coder::code_group`]) and writes their frames; returns each
    /// member's ordinal.
    fn store_coded(
        &mut self,
        members: &[(&str, &[u8], ContentKey)],
    ) -> Result<Vec<u32>, ArchiveError> {
        let Some(u) = &mut self.unified else {
            unreachable!("store_coded serves unified writers");
        };
        if members.is_empty() {
            return Ok(Vec::new());
        }
        if self.blobs.count() + members.len() >= u32::MAX as usize {
            return Err(ArchiveError::InvalidArgument(
                "too many distinct kernels".into(),
            ));
        }
        let first = self.blobs.count() as u32;
        let kernels: Vec<(&str, &[u8])> = members.iter().map(|&(a, d, _)| (a, d)).collect();
        let blobs = &mut self.blobs;
        let refs = &u.refs;
        let coded = u
            .coder
            .code_group(first, &kernels, |o| decode_unified(blobs, refs, o))?;
        let mut ordinals = vec![0u32; members.len()];
        for (
            pos,
            Coded {
                member,
                frame,
                reference,
            },
        ) in coded.into_iter().enumerate()
        {
            let ordinal = first + pos as u32;
            ordinals[member] = ordinal;
            u.refs.push(reference);
            self.blobs.push(Cow::Owned(frame), self.compression)?;
            self.dedupe
                .entry(members[member].2)
                .or_default()
                .push(ordinal);
        }
        Ok(ordinals)
    }
}

/// `unified`: the kernel stored as `ordinal`, decoded (with its chain of references `refs`,
/// at most [`crate::unified::MAX_CHAIN`] frames).
fn decode_unified(
    blobs: &mut Blobs<'_>,
    refs: &[Option<u32>],
    ordinal: u32,
) -> Result<Vec<u8>, ArchiveError> {
    let base = match refs[ordinal as usize] {
        Some(r) => decode_unified(blobs, refs, r)?,
        None => Vec::new(),
    };
    let frame = blobs.read(ordinal)?;
    crate::reader::decode_frame(&frame, &base).map_err(|reason| ArchiveError::Io {
        context: "reading back a stored frame",
        source: std::io::Error::other(reason),
    })
}
