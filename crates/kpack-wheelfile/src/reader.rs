//! Reading a wheel (a `.whl` zip or an unpacked directory) into a staging tree, refusing
//! anything that would write outside it or that lies about itself.
//!
//! A wheel comes from an index or a build machine, so its zip is untrusted: every entry
//! name is checked before anything is written (no `..`, no absolute or drive paths, no
//! `\`, no empty or `.` components, no duplicates, no file that is also a directory),
//! symlink entries are refused (pip would write them as files holding the link text; a
//! wheel that carries one is broken or hostile), the sum of declared sizes is bounded by
//! [`Limits::max_unpacked`] before anything is decompressed, and each entry is read
//! through a bound of its declared size: one byte more is an error, as is one byte less.
//! Each entry's CRC-32 is checked against the central directory's, and its content
//! against its RECORD line ([`crate::record`]), RECORD being read before anything else.

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::error::{WheelFileError, io};
use crate::metadata;
use crate::record::{Checked, Listed, MAX_RECORD, Record};

/// Bounds on what a wheel may unpack to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most bytes all entries together may declare (default 64 GiB: the largest fat
    /// ROCm wheels unpack to about 10 GB).
    pub max_unpacked: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_unpacked: 64 << 30,
        }
    }
}

/// One regular file of a wheel as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// `/`-separated path inside the wheel.
    pub path: String,
    /// Unix permission bits (`0o644` when the wheel records none).
    pub mode: u32,
    /// Length in bytes, as read (checked against RECORD).
    pub size: u64,
    /// SHA-256 of the content as read (checked against RECORD's `sha256=` digest).
    pub sha256: [u8; 32],
    /// How RECORD vouches for it.
    pub listed: Listed,
}

const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;

fn entry_error(wheel: &Path, entry: &str, problem: impl Into<String>) -> WheelFileError {
    WheelFileError::Entry {
        wheel: wheel.to_owned(),
        entry: entry.to_owned(),
        problem: problem.into(),
    }
}

/// Checks that `name` (a file or, with a trailing `/`, a directory entry) is a plain
/// relative path inside the wheel; returns it without the trailing `/`.
pub fn check_entry_name<'a>(wheel: &Path, name: &'a str) -> Result<&'a str, WheelFileError> {
    let bad = |why: &str| Err(entry_error(wheel, name, why));
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    if trimmed.is_empty() {
        return bad("empty name");
    }
    if trimmed.starts_with('/') {
        return bad("absolute path: it would be written outside the install directory");
    }
    if trimmed.contains('\\') {
        return bad("backslash in the name (a Windows path separator)");
    }
    if trimmed.contains('\0') {
        return bad("NUL byte in the name");
    }
    let b = trimmed.as_bytes();
    if b.len() >= 2 && b[1] == b':' && b[0].is_ascii_alphabetic() {
        return bad("drive-letter path: it would be written outside the install directory");
    }
    for part in trimmed.split('/') {
        match part {
            ".." => {
                return bad(
                    "`..` component: it would be written outside the install directory (zip slip)",
                );
            }
            "." | "" => return bad("empty or `.` path component"),
            _ => {}
        }
    }
    Ok(trimmed)
}

/// Tracks names seen so far: no duplicates, no file that is also a directory.
#[derive(Default)]
struct Names {
    /// name → is a directory
    seen: BTreeMap<String, bool>,
}

impl Names {
    fn add(&mut self, wheel: &Path, name: &str, dir: bool) -> Result<(), WheelFileError> {
        // Every ancestor is a directory.
        let mut end = 0;
        while let Some(i) = name[end..].find('/') {
            let ancestor = &name[..end + i];
            if self.seen.get(ancestor) == Some(&false) {
                return Err(entry_error(
                    wheel,
                    name,
                    format!("{ancestor:?} is a file in this wheel, not a directory"),
                ));
            }
            self.seen.insert(ancestor.to_owned(), true);
            end += i + 1;
        }
        match self.seen.insert(name.to_owned(), dir) {
            Some(true) if dir => Ok(()),
            Some(true) => Err(entry_error(wheel, name, "also a directory in this wheel")),
            Some(false) => Err(entry_error(wheel, name, "duplicate entry name")),
            None => Ok(()),
        }
    }
}

/// The zip crate keeps one entry per name, silently dropping earlier duplicates, so the
/// central directory is walked here (hand-written for that reason alone) for the first
/// name seen twice.
fn duplicate_name<R: Read + Seek>(
    r: &mut R,
    start: u64,
    wheel: &Path,
) -> Result<Option<String>, WheelFileError> {
    use std::io::SeekFrom;
    let len = r.seek(SeekFrom::End(0)).map_err(io(wheel))?;
    let mut pos = start;
    let mut seen = std::collections::BTreeSet::new();
    let mut header = [0u8; 46];
    // Every central header is at least 46 bytes: the walk is bounded by the file size.
    while pos + 46 <= len {
        r.seek(SeekFrom::Start(pos)).map_err(io(wheel))?;
        if r.read_exact(&mut header).is_err() || header[..4] != *b"PK\x01\x02" {
            break;
        }
        let u16_at = |o: usize| u16::from_le_bytes([header[o], header[o + 1]]) as u64;
        let (n, m, k) = (u16_at(28), u16_at(30), u16_at(32));
        let mut name = vec![0u8; n as usize];
        if r.read_exact(&mut name).is_err() {
            break;
        }
        let name = String::from_utf8_lossy(&name).into_owned();
        if !seen.insert(name.clone()) {
            return Ok(Some(name));
        }
        pos += 46 + n + m + k;
    }
    Ok(None)
}

/// Copies exactly `size` bytes from `src` to `dst`, handing each to `seen`: more or fewer
/// is an error, and so is content whose CRC-32 is not `crc32` (a zip member's, from the
/// central directory), checked here rather than left to the zip crate so that a member
/// is never taken on an unchecked read and the error says what was expected.
fn copy_exact(
    wheel: &Path,
    entry: &str,
    src: &mut dyn Read,
    dst: &mut dyn Write,
    size: u64,
    crc32: Option<u32>,
    seen: &mut dyn FnMut(&[u8]),
) -> Result<(), WheelFileError> {
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    // The zip crate fails the read that ends a member whose CRC-32 is wrong ("Invalid
    // checksum"); this error says what was expected instead.
    let crc_error = |crc: &crc32fast::Hasher| {
        let got = crc.clone().finalize();
        crc32.filter(|want| *want != got).map(|want| {
            entry_error(
                wheel,
                entry,
                format!(
                    "damaged: its content's CRC-32 is {got:#010x}, the zip's central directory expects {want:#010x}"
                ),
            )
        })
    };
    loop {
        // Past the declared size, one byte is enough to tell that there is more.
        let want = (size - total).clamp(1, buf.len() as u64) as usize;
        let n = match src.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let at_end = total == size;
                return Err(crc_error(&crc).filter(|_| at_end).unwrap_or_else(|| {
                    entry_error(
                        wheel,
                        entry,
                        format!(
                            "cannot be read, the wheel is damaged: {e} (expected {size} bytes)"
                        ),
                    )
                }));
            }
        };
        total += n as u64;
        if total > size {
            return Err(entry_error(
                wheel,
                entry,
                format!("decompresses to more than its declared {size} bytes"),
            ));
        }
        crc.update(&buf[..n]);
        seen(&buf[..n]);
        dst.write_all(&buf[..n])
            .map_err(|e| entry_error(wheel, entry, format!("writing: {e}")))?;
    }
    if total != size {
        return Err(entry_error(
            wheel,
            entry,
            format!("decompresses to {total} bytes, not its declared {size}"),
        ));
    }
    crc_error(&crc).map_or(Ok(()), Err)
}

/// One regular file of a wheel being visited ([`visit_zip`]): its content is read, and
/// checked against the zip's CRC-32, its declared size and its RECORD line, by
/// [`Member::copy_to`].
pub struct Member<'a> {
    /// `/`-separated path inside the wheel.
    pub name: &'a str,
    /// Unix permission bits (`0o644` when the wheel records none).
    pub mode: u32,
    /// Length in bytes, as the zip declares it.
    pub size: u64,
    wheel: &'a Path,
    crc32: Option<u32>,
    record: &'a Record,
    content: &'a mut dyn Read,
    checked: Option<Checked>,
}

impl Member<'_> {
    /// Copies the content into `out`, checked: once it returns, the bytes written are the
    /// member's as RECORD lists them. A member is read once; a second call is an error.
    pub fn copy_to(&mut self, out: &mut dyn Write) -> Result<(), WheelFileError> {
        if self.checked.is_some() {
            return Err(entry_error(self.wheel, self.name, "read twice"));
        }
        let mut check = self.record.start(self.name);
        copy_exact(
            self.wheel,
            self.name,
            self.content,
            out,
            self.size,
            self.crc32,
            &mut |b| check.update(b),
        )?;
        self.checked = Some(check.finish(self.wheel, self.size)?);
        Ok(())
    }

    /// The member as read, checked (read now, into nothing, if it was not yet).
    fn finish(mut self) -> Result<InputFile, WheelFileError> {
        if self.checked.is_none() {
            self.copy_to(&mut std::io::sink())?;
        }
        let checked = self.checked.expect("copy_to checked it");
        Ok(InputFile {
            path: self.name.to_owned(),
            mode: self.mode,
            size: self.size,
            sha256: checked.sha256,
            listed: checked.listed,
        })
    }
}

/// The wheel's RECORD, read before any other member (through `read`, given its path and
/// declared size), parsed, and checked to list exactly `members`.
fn load_record<'a>(
    wheel: &Path,
    members: impl Iterator<Item = (&'a str, u64)> + Clone,
    read: impl FnOnce(&str, u64) -> Result<Vec<u8>, WheelFileError>,
) -> Result<Record, WheelFileError> {
    let names: Vec<&str> = members.clone().map(|(n, _)| n).collect();
    let dist_info = metadata::dist_info_dir(wheel, &names)?;
    let path = format!("{dist_info}/RECORD");
    let Some((_, size)) = members.clone().find(|(n, _)| *n == path) else {
        return Err(WheelFileError::NotAWheel {
            wheel: wheel.to_owned(),
            problem: format!("no {path}"),
        });
    };
    if size > MAX_RECORD {
        return Err(entry_error(
            wheel,
            &path,
            format!("{size} bytes, more than a RECORD may hold ({MAX_RECORD})"),
        ));
    }
    let bytes = read(&path, size)?;
    let record = Record::parse(wheel, dist_info, &bytes)?;
    record.check_listing(wheel, names)?;
    Ok(record)
}

/// Creates the file `dest/rel` (and its parents) with `mode` ([`kpack_fs::set_mode`]: on
/// Windows, read-only without the owner's write bit), filled by `fill`.
fn write_file(
    dest: &Path,
    rel: &str,
    mode: u32,
    fill: impl FnOnce(&mut dyn Write) -> Result<(), WheelFileError>,
) -> Result<(), WheelFileError> {
    let path = dest.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let file = std::fs::File::create(&path).map_err(io(&path))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    fill(&mut out)?;
    // Flushed and closed before its mode is set.
    drop(out.into_inner().map_err(|e| io(&path)(e.into_error()))?);
    kpack_fs::set_mode(&path, mode).map_err(io(&path))
}

/// Reads every entry of the wheel zip `reader` (`wheel` names it in errors), writing the
/// files under `dest` (nothing is written with `None`). Returns the regular files in
/// archive order.
pub fn read_zip<R: Read + Seek>(
    wheel: &Path,
    reader: R,
    limits: &Limits,
    dest: Option<&Path>,
) -> Result<Vec<InputFile>, WheelFileError> {
    visit_zip(wheel, reader, limits, |member| match dest {
        Some(dest) => write_file(dest, member.name, member.mode, |out| member.copy_to(out)),
        None => Ok(()),
    })
}

/// The regular files of the wheel zip `reader`, in archive order, from its central
/// directory alone (every entry checked as [`read_zip`] checks it): what a splitter checks
/// before anything is written.
pub fn member_names<R: Read + Seek>(
    wheel: &Path,
    reader: R,
    limits: &Limits,
) -> Result<Vec<String>, WheelFileError> {
    let (_, plan) = plan_zip(wheel, reader, limits)?;
    Ok(plan.into_iter().map(|(_, name, ..)| name).collect())
}

/// Checks every entry of the wheel zip `reader` as [`read_zip`] does, reads its RECORD
/// (which must list exactly the wheel's files), then hands each regular file to `each` in
/// archive order, one at a time, to read through [`Member::copy_to`] (a file `each` does
/// not read is read here, so that every one is checked). Returns the regular files.
pub fn visit_zip<R: Read + Seek, E: From<WheelFileError>>(
    wheel: &Path,
    reader: R,
    limits: &Limits,
    mut each: impl FnMut(&mut Member<'_>) -> Result<(), E>,
) -> Result<Vec<InputFile>, E> {
    let (mut zip, plan) = plan_zip(wheel, reader, limits)?;
    let members = plan.iter().map(|(_, name, _, size)| (name.as_str(), *size));
    let record = load_record(wheel, members, |path, size| {
        let (i, ..) = plan
            .iter()
            .find(|p| p.1 == path)
            .expect("RECORD is planned");
        let mut entry = open_entry(wheel, &mut zip, *i, path)?;
        let crc32 = Some(entry.crc32());
        let mut bytes = Vec::new();
        copy_exact(
            wheel,
            path,
            &mut entry,
            &mut bytes,
            size,
            crc32,
            &mut |_| {},
        )?;
        Ok(bytes)
    })?;
    let mut files = Vec::with_capacity(plan.len());
    for (i, name, mode, size) in &plan {
        let mut entry = open_entry(wheel, &mut zip, *i, name)?;
        let mut member = Member {
            name,
            mode: *mode,
            size: *size,
            wheel,
            crc32: Some(entry.crc32()),
            record: &record,
            content: &mut entry,
            checked: None,
        };
        each(&mut member)?;
        files.push(member.finish()?);
    }
    Ok(files)
}

fn open_entry<'z, R: Read + Seek>(
    wheel: &Path,
    zip: &'z mut zip::ZipArchive<R>,
    i: usize,
    name: &str,
) -> Result<zip::read::ZipFile<'z, R>, WheelFileError> {
    zip.by_index(i)
        .map_err(|e| entry_error(wheel, name, format!("cannot be read: {e}")))
}

/// A regular file to read: its index in the zip, path, mode and declared size.
type Planned = (usize, String, u32, u64);

/// Opens the zip and checks every entry on the central directory alone (names, kinds,
/// declared sizes), returning the regular files to read.
fn plan_zip<R: Read + Seek>(
    wheel: &Path,
    reader: R,
    limits: &Limits,
) -> Result<(zip::ZipArchive<R>, Vec<Planned>), WheelFileError> {
    let not_a_wheel = |problem: String| WheelFileError::NotAWheel {
        wheel: wheel.to_owned(),
        problem,
    };
    let open = |reader: R| {
        zip::ZipArchive::new(reader)
            .map_err(|e| not_a_wheel(format!("not a readable zip archive: {e}")))
    };
    let zip = open(reader)?;
    let start = zip.central_directory_start();
    let mut reader = zip.into_inner();
    if let Some(dup) = duplicate_name(&mut reader, start, wheel)? {
        return Err(entry_error(wheel, &dup, "duplicate entry name"));
    }
    let mut zip = open(reader)?;
    // First pass, on the central directory only: names, kinds and declared sizes.
    let mut names = Names::default();
    let mut plan = Vec::with_capacity(zip.len());
    let mut declared = 0u64;
    for i in 0..zip.len() {
        let entry = zip
            .by_index_raw(i)
            .map_err(|e| not_a_wheel(format!("central directory entry {i}: {e}")))?;
        let raw_name = entry.name().to_owned();
        let name = check_entry_name(wheel, &raw_name)?.to_owned();
        let mode = entry.unix_mode().unwrap_or(0);
        let kind = mode & S_IFMT;
        if kind == S_IFLNK {
            return Err(entry_error(
                wheel,
                &raw_name,
                "symlink entry: wheels carry regular files only",
            ));
        }
        let dir = raw_name.ends_with('/') || kind == S_IFDIR;
        if !dir && kind != 0 && kind != S_IFREG {
            return Err(entry_error(
                wheel,
                &raw_name,
                format!("not a regular file (mode {mode:o})"),
            ));
        }
        if entry.encrypted() {
            return Err(entry_error(wheel, &raw_name, "encrypted entry"));
        }
        names.add(wheel, &name, dir)?;
        if dir {
            continue;
        }
        declared = declared.saturating_add(entry.size());
        if declared > limits.max_unpacked {
            return Err(entry_error(
                wheel,
                &raw_name,
                format!(
                    "the entries so far declare {declared} bytes, more than the limit of {} (a zip bomb?)",
                    limits.max_unpacked
                ),
            ));
        }
        let perm = mode & 0o7777;
        plan.push((i, name, if perm == 0 { 0o644 } else { perm }, entry.size()));
    }
    Ok((zip, plan))
}

/// Copies the unpacked wheel `dir` into `dest`, with the same checks as [`read_zip`]
/// (symlinks and special files refused, RECORD read first and every file checked against
/// it). Returns the regular files sorted by path.
pub fn read_dir(dir: &Path, dest: &Path) -> Result<Vec<InputFile>, WheelFileError> {
    // (path inside the wheel, path on disk, mode, size)
    let mut plan = Vec::new();
    for e in kpack_fs::walk(dir) {
        let e = e?;
        let child = kpack_fs::slash_path(&e.rel)
            .ok_or_else(|| entry_error(dir, &e.rel.to_string_lossy(), "file name is not UTF-8"))?;
        check_entry_name(dir, &child)?;
        if e.file_type.is_symlink() {
            return Err(entry_error(
                dir,
                &child,
                "symlink: wheels carry regular files only",
            ));
        } else if e.file_type.is_dir() {
            continue;
        } else if !e.file_type.is_file() {
            return Err(entry_error(dir, &child, "not a regular file"));
        }
        let meta = std::fs::metadata(&e.path).map_err(io(&e.path))?;
        plan.push((child, e.path, kpack_fs::mode(&meta), meta.len()));
    }
    plan.sort_by(|a, b| a.0.cmp(&b.0));
    let members = plan.iter().map(|(name, _, _, size)| (name.as_str(), *size));
    let record = load_record(dir, members, |path, size| {
        let full = dir.join(path);
        let mut src = std::fs::File::open(&full).map_err(io(&full))?;
        let mut bytes = Vec::new();
        copy_exact(dir, path, &mut src, &mut bytes, size, None, &mut |_| {})?;
        Ok(bytes)
    })?;
    let mut files = Vec::with_capacity(plan.len());
    for (name, full, mode, size) in &plan {
        let mut src = std::fs::File::open(full).map_err(io(full))?;
        let mut member = Member {
            name,
            mode: *mode,
            size: *size,
            wheel: dir,
            crc32: None,
            record: &record,
            content: &mut src,
            checked: None,
        };
        write_file(dest, name, *mode, |out| member.copy_to(out))?;
        files.push(member.finish()?);
    }
    Ok(files)
}
