//! The visitors that turn a bundle's code objects into archive entries: prepared on a worker
//! ([`Prepare`]), or coded on the walking thread ([`CodeBundles`]), a code object too large to
//! hold coded as it is decoded.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use kpack_archive::{
    ArchiveFileWriter, GroupMember, KernelCompressor, KernelInPieces, PreparedKernel,
};
use rayon::prelude::*;

use crate::error::SourceError;
use crate::source::{CodePieces, DeviceCode, Visitor};

/// The code objects of one bundle, ready for the archives: per code object its target, its
/// keys (one per wrapper leading to the bundle) and its stored form.
pub(super) type PreparedBundle<'a> = Vec<(String, Vec<String>, PreparedKernel<'a>)>;

/// Prepares (compresses) the device code objects of one bundle on a worker thread. Stored
/// uncompressed, a code object is borrowed from the input mapping; decoded from a CCOB, its
/// zstd frame (or, uncompressed, a copy) is all that outlives the decoded bundle.
pub(super) struct Prepare<'a, 'k> {
    pub(super) input: &'a [u8],
    pub(super) kernel_name: &'k str,
    pub(super) compressor: &'k mut KernelCompressor,
    pub(super) out: PreparedBundle<'a>,
}

impl Visitor for Prepare<'_, '_> {
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        let (keys, kernel) = prepare_code(self.input, self.kernel_name, self.compressor, code)?;
        self.out.push((code.target().to_string(), keys, kernel));
        Ok(())
    }
}

/// Codes the device code objects of each bundle into the archives of their targets on the
/// walking thread (`unified`, and any bundle read as a stream: see
/// [`super::Plan::write_archives_into`]): each archive's share of a bundle (or of a part of it) is
/// one group, borrowed from the decoded bundle, and the archives code theirs in parallel.
pub(super) struct CodeBundles<'w, 'a, F> {
    pub(super) kernel_name: &'w str,
    pub(super) writers: &'w mut BTreeMap<String, ArchiveFileWriter<'a>>,
    /// Creates the archive of a target on its first code object.
    pub(super) create: &'w F,
}

impl<'a, F> Visitor for CodeBundles<'_, 'a, F>
where
    F: Fn(&str) -> Result<ArchiveFileWriter<'a>, SourceError>,
{
    fn device_code(&mut self, code: &DeviceCode<'_>) -> Result<(), SourceError> {
        self.device_bundle(std::slice::from_ref(code))
    }

    fn device_bundle(&mut self, codes: &[DeviceCode<'_>]) -> Result<(), SourceError> {
        let targets: Vec<String> = codes.iter().map(|c| c.target().to_string()).collect();
        let keys: Vec<Vec<String>> = codes
            .iter()
            .map(|c| code_keys(self.kernel_name, c))
            .collect();
        for target in &targets {
            if !self.writers.contains_key(target) {
                let writer = (self.create)(target)?;
                self.writers.insert(target.clone(), writer);
            }
        }
        let groups: Vec<(&mut ArchiveFileWriter<'a>, Vec<GroupMember<'_>>)> = self
            .writers
            .iter_mut()
            .filter_map(|(target, writer)| {
                let members: Vec<GroupMember<'_>> = (0..codes.len())
                    .filter(|&i| targets[i] == *target)
                    .map(|i| GroupMember {
                        keys: &keys[i],
                        arch: &targets[i],
                        data: codes[i].data,
                    })
                    .collect();
                (!members.is_empty()).then_some((writer, members))
            })
            .collect();
        groups
            .into_par_iter()
            .try_for_each(|(writer, members)| writer.add_group(&members))?;
        Ok(())
    }

    /// A code object too large to hold (of a bundle read as a stream) is coded as it is
    /// decoded, straight into its archive's file, when that archive stores it as a frame of
    /// its own (`zstd`).
    fn code_pieces<'s>(
        &'s mut self,
        code: &DeviceCode<'_>,
        len: u64,
    ) -> Result<Option<Box<dyn CodePieces + 's>>, SourceError> {
        let target = code.target().to_string();
        let writer = match self.writers.entry(target.clone()) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert((self.create)(&target)?),
        };
        let keys = code_keys(self.kernel_name, code);
        Ok(writer
            .kernel_in_pieces(keys, &target, len)?
            .map(|kernel| Box::new(CodedInPieces(kernel)) as Box<dyn CodePieces + 's>))
    }
}

/// A code object coded as its pieces come ([`CodeBundles::code_pieces`]), added to its
/// archive under each of its keys when whole.
struct CodedInPieces<'w, 'a>(KernelInPieces<'w, 'a>);

impl CodePieces for CodedInPieces<'_, '_> {
    fn piece(&mut self, bytes: &[u8]) -> Result<(), SourceError> {
        Ok(self.0.piece(bytes)?)
    }

    fn finish(self: Box<Self>) -> Result<(), SourceError> {
        Ok(self.0.finish()?)
    }
}

/// The keys of a code object: `kernel_name#co_index` for each wrapper leading to its bundle.
fn code_keys(kernel_name: &str, code: &DeviceCode<'_>) -> Vec<String> {
    code.wrappers
        .iter()
        .map(|&w| kpack_archive::binary_key(kernel_name, w as u32))
        .collect()
}

/// A code object's keys (one per wrapper leading to its bundle) and its stored form:
/// borrowed from the input when stored there uncompressed, else owned (decoded from a CCOB,
/// it does not outlive its bundle).
fn prepare_code<'a>(
    input: &'a [u8],
    kernel_name: &str,
    compressor: &mut KernelCompressor,
    code: &DeviceCode<'_>,
) -> Result<(Vec<String>, PreparedKernel<'a>), SourceError> {
    let kernel = match &code.file_range {
        Some(r) => compressor.prepare(&input[r.start as usize..r.end as usize])?,
        None => compressor.prepare(code.data)?.into_owned(),
    };
    Ok((code_keys(kernel_name, code), kernel))
}
