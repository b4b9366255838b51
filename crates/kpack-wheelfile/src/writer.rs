//! Publishing a staged wheel tree: RECORD regenerated, then either a deterministic `.whl`
//! or the tree itself (`--output-format directory`).
//!
//! The zip is reproducible: entries sorted by path (the `.dist-info` files last, RECORD
//! the very last, as PEP 427 recommends), every timestamp `SOURCE_DATE_EPOCH` or
//! 1980-01-01 00:00:00, each file's Unix mode kept, no directory entries, and nothing
//! that depends on the file system or the thread count. Files already compressed by
//! kpack (zstd archives) are stored; everything else is deflated.

use std::io::{BufReader, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

use crate::error::{WheelFileError, io};
use crate::metadata;

/// How outputs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    /// `.whl` files.
    #[default]
    Wheel,
    /// Unpacked wheel directories named like the wheel's stem.
    Directory,
}

/// What one published wheel holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Published {
    /// Files, RECORD included.
    pub files: usize,
    /// Bytes of the files (uncompressed).
    pub bytes: u64,
    /// Size of the `.whl` (or of the files, for a directory).
    pub size: u64,
}

/// The regular files below `root` (paths `/`-separated) with their modes, in wheel order:
/// sorted, `dist_info/` last, RECORD excluded (it is regenerated).
fn tree_files(root: &Path, dist_info: &str) -> Result<Vec<(String, u32)>, WheelFileError> {
    let mut out = Vec::new();
    for e in kpack_fs::walk(root) {
        let e = e?;
        if !e.file_type.is_dir() {
            let meta = std::fs::symlink_metadata(&e.path).map_err(io(&e.path))?;
            let rel = kpack_fs::slash_path(&e.rel)
                .ok_or_else(|| io(&e.path)(std::io::Error::other("file name is not UTF-8")))?;
            out.push((rel, kpack_fs::mode(&meta)));
        }
    }
    let record = format!("{dist_info}/RECORD");
    out.retain(|(p, _)| *p != record);
    let prefix = format!("{dist_info}/");
    out.sort_by(|(a, _), (b, _)| {
        (a.starts_with(&prefix), a.as_bytes()).cmp(&(b.starts_with(&prefix), b.as_bytes()))
    });
    Ok(out)
}

/// The timestamp of every entry: `SOURCE_DATE_EPOCH` (clamped to what zip can store) or
/// 1980-01-01 00:00:00.
pub fn entry_time() -> zip::DateTime {
    zip_time(kpack_fs::source_date_epoch())
}

/// `epoch` (seconds since 1970, UTC) as a zip timestamp: from 1980-01-01 00:00:00 (also
/// without an epoch) to 2107-12-31 23:59:58, the range zip's MS-DOS fields hold, in 2-second
/// steps.
fn zip_time(epoch: Option<i64>) -> zip::DateTime {
    let Some(secs) = epoch else {
        return zip::DateTime::default();
    };
    let latest = || zip::DateTime::from_date_and_time(2107, 12, 31, 23, 59, 58).unwrap_or_default();
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) if t.year() > 2107 => latest(),
        // Before 1980 (or before year 0) is out of zip's range: the default, 1980-01-01.
        Ok(t) => zip::DateTime::from_date_and_time(
            u16::try_from(t.year()).unwrap_or(0),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
        )
        .unwrap_or_default(),
        // Beyond the years `time` represents (±9999).
        Err(_) if secs > 0 => latest(),
        Err(_) => zip::DateTime::default(),
    }
}

/// Streams `content` (read from `path`) into `sink`, returning its SHA-256 and size.
fn hash_into(
    path: &Path,
    content: &mut dyn Read,
    sink: &mut dyn Write,
) -> Result<([u8; 32], u64), WheelFileError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = match content.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(path)(e)),
        };
        hasher.update(&buf[..n]);
        sink.write_all(&buf[..n]).map_err(io(path))?;
        size += n as u64;
    }
    Ok((hasher.finalize().into(), size))
}

/// Streams the file at `path` into `sink`, returning its SHA-256 and size.
fn hash_file_into(path: &Path, sink: &mut dyn Write) -> Result<([u8; 32], u64), WheelFileError> {
    let file = std::fs::File::open(path).map_err(io(path))?;
    hash_into(path, &mut BufReader::with_capacity(1 << 20, file), sink)
}

/// A deterministic wheel zip being written (see the module docs): files in the order they
/// are added, then RECORD, listing each with its SHA-256 and size. `publish` writes a
/// staged tree with it, and `kpack prune` a wheel's members as it reads them.
pub struct WheelZip {
    zip: zip::ZipWriter<std::io::BufWriter<std::fs::File>>,
    rows: Vec<(String, [u8; 32], u64)>,
    time: zip::DateTime,
    wheel: std::path::PathBuf,
    dest: std::path::PathBuf,
}

impl WheelZip {
    /// Creates the new file `dest` (a staged path: the caller publishes it). `wheel` names
    /// the input in errors.
    pub fn create(wheel: &Path, dest: &Path) -> Result<WheelZip, WheelFileError> {
        let out = std::fs::File::create(dest).map_err(io(dest))?;
        Ok(WheelZip {
            zip: zip::ZipWriter::new(std::io::BufWriter::with_capacity(1 << 20, out)),
            rows: Vec::new(),
            time: entry_time(),
            wheel: wheel.to_owned(),
            dest: dest.to_owned(),
        })
    }

    fn zip_error(&self) -> impl FnOnce(zip::result::ZipError) -> WheelFileError + use<> {
        let (wheel, output) = (self.wheel.clone(), self.dest.clone());
        move |source| WheelFileError::Zip {
            wheel,
            output,
            source,
        }
    }

    fn start(
        &mut self,
        path: &str,
        mode: u32,
        compressed: bool,
        len: u64,
    ) -> Result<(), WheelFileError> {
        let options = SimpleFileOptions::default()
            .compression_method(if compressed {
                zip::CompressionMethod::Deflated
            } else {
                zip::CompressionMethod::Stored
            })
            .last_modified_time(self.time)
            .unix_permissions(mode)
            .large_file(len >= u32::MAX as u64);
        let err = self.zip_error();
        self.zip.start_file(path, options).map_err(err)
    }

    /// Adds the file `path` (`/`-separated) with permission bits `mode`: `len` bytes read
    /// from `content` (`from` names it in errors), deflated unless `compressed` is false.
    pub fn add(
        &mut self,
        path: &str,
        mode: u32,
        compressed: bool,
        len: u64,
        from: &Path,
        content: &mut dyn Read,
    ) -> Result<(), WheelFileError> {
        self.start(path, mode, compressed, len)?;
        let (digest, size) = hash_into(from, content, &mut self.zip)?;
        self.rows.push((path.to_owned(), digest, size));
        Ok(())
    }

    /// Writes `dist_info/RECORD` and ends the zip.
    pub fn finish(mut self, dist_info: &str) -> Result<Published, WheelFileError> {
        let record = metadata::write_record(dist_info, &self.rows);
        self.start(&format!("{dist_info}/RECORD"), 0o644, true, 0)?;
        let dest = self.dest.clone();
        self.zip.write_all(&record).map_err(io(&dest))?;
        let err = self.zip_error();
        let out = self.zip.finish().map_err(err)?;
        let file = out.into_inner().map_err(|e| io(&dest)(e.into_error()))?;
        file.sync_all().map_err(io(&dest))?;
        Ok(Published {
            files: self.rows.len() + 1,
            bytes: self.rows.iter().map(|r| r.2).sum::<u64>() + record.len() as u64,
            size: file.metadata().map_err(io(&dest))?.len(),
        })
    }
}

/// Writes RECORD for the staged tree `root` and publishes it at `dest`: a `.whl` (the
/// tree is left as it was) or, for [`OutputFormat::Directory`], the tree renamed to
/// `dest`. `stored(path)` says which files go into the zip uncompressed. `wheel` names
/// the input in errors.
pub fn publish(
    wheel: &Path,
    root: &Path,
    dist_info: &str,
    format: OutputFormat,
    dest: &Path,
    stored: &dyn Fn(&str) -> bool,
) -> Result<Published, WheelFileError> {
    let files = tree_files(root, dist_info)?;
    let record_path = format!("{dist_info}/RECORD");
    let (bytes, size) = match format {
        OutputFormat::Directory => {
            let mut rows = Vec::with_capacity(files.len());
            for (path, _) in &files {
                let (digest, size) = hash_file_into(&root.join(path), &mut std::io::sink())?;
                rows.push((path.clone(), digest, size));
            }
            let record = metadata::write_record(dist_info, &rows);
            let rp = root.join(&record_path);
            std::fs::write(&rp, &record).map_err(io(&rp))?;
            std::fs::rename(root, dest).map_err(io(dest))?;
            let bytes = rows.iter().map(|r| r.2).sum::<u64>() + record.len() as u64;
            (bytes, bytes)
        }
        OutputFormat::Wheel => {
            let mut zip = WheelZip::create(wheel, dest)?;
            for (path, mode) in &files {
                let full = root.join(path);
                let file = std::fs::File::open(&full).map_err(io(&full))?;
                let len = file.metadata().map_err(io(&full))?.len();
                let mut content = BufReader::with_capacity(1 << 20, file);
                zip.add(path, *mode, !stored(path), len, &full, &mut content)?;
            }
            let published = zip.finish(dist_info)?;
            (published.bytes, published.size)
        }
    };
    Ok(Published {
        files: files.len() + 1,
        bytes,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::zip_time;

    fn parts(t: zip::DateTime) -> (u16, u8, u8, u8, u8, u8) {
        (
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
        )
    }

    #[test]
    fn an_entry_time_is_source_date_epoch_clamped_to_what_zip_stores() {
        let first = (1980, 1, 1, 0, 0, 0);
        let last = (2107, 12, 31, 23, 59, 58);
        assert_eq!(parts(zip_time(None)), first);
        assert_eq!(parts(zip_time(Some(i64::MIN))), first);
        assert_eq!(parts(zip_time(Some(-1))), first);
        assert_eq!(
            parts(zip_time(Some(315_532_799))),
            first,
            "1979-12-31 23:59:59"
        );
        assert_eq!(parts(zip_time(Some(315_532_800))), first);
        assert_eq!(
            parts(zip_time(Some(1_623_760_496))),
            (2021, 6, 15, 12, 34, 56)
        );
        assert_eq!(
            parts(zip_time(Some(1_623_760_497))),
            (2021, 6, 15, 12, 34, 56)
        );
        assert_eq!(
            parts(zip_time(Some(4_354_819_199))),
            last,
            "2107-12-31 23:59:59"
        );
        assert_eq!(
            parts(zip_time(Some(4_354_819_200))),
            last,
            "2108-01-01 00:00:00"
        );
        assert_eq!(parts(zip_time(Some(i64::MAX))), last);
    }
}
