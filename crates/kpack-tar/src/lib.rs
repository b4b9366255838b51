//! Artifact tarballs as TheRock's CI stores them (`.tar.zst`, also `.tar.xz`, `.tar.gz` and
//! plain `.tar`): a streaming reader that refuses unsafe members, and a deterministic writer.
//!
//! The `tar`, `zstd`, `xz2` and `flate2` crates do the format work; this crate adds what none of them
//! does: the rules for untrusted member names, and byte-for-byte reproducible output.
//!
//! **Reading** ([`read_members`], [`open`]) streams the decompressed archive once, member by
//! member; a member's content is read through the visitor's reader and never held whole.
//! The compression is recognised from the first bytes (zstd, xz or gzip magic, else plain tar),
//! not from the file name. Every member is checked before the visitor sees it, and the
//! first unsafe one stops the read with an error naming the member, its index and the byte
//! offset of its header in the decompressed tar:
//! * names must be UTF-8 and relative: an absolute name, or a `..` component (path
//!   traversal), is refused; `./` prefixes and repeated `/` are normalised away;
//! * only regular files, directories and symbolic links are accepted: device nodes,
//!   FIFOs, sparse files and hard links are refused (a hard link's content is another
//!   member's, which a single streamed pass cannot produce again);
//! * a symlink's target must be relative and stay inside the tree when resolved from the
//!   link's directory; no member may lie below a symlink member, nor below a file member
//!   (writing through a link is how an archive escapes the destination);
//! * a path may appear once (directories excepted), so no member overwrites another;
//! * at most [`MAX_HEADERS`] bytes of headers, GNU long names and PAX extensions may come
//!   between two members (the `tar` crate holds those in memory; contents it never holds).
//!
//! **Writing** ([`pack_dir`]) makes the same tarball from the same tree on every machine:
//! members sorted by path (a directory's entries right after it), mtime `SOURCE_DATE_EPOCH`
//! or 0, uid/gid 0 with no user or group names, file modes kept (directories 0755),
//! symlinks kept as links, GNU long names, single-threaded zstd. The tarball is written
//! under a temporary name beside the destination and renamed when complete.
//! [`pack_dir_recorded`] takes the modes and links its caller recorded over what the disk
//! holds (a Windows disk keeps neither), so that a tree's tarball is the same bytes there. [`TarWriter`]
//! writes the same members one by one, compressed in any [`Compression`].
//!
//! Depends on `kpack-fs` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Why a tarball could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TarError {
    /// Opening, reading or writing a file failed (the tarball, or a file packed into it).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file the operation was on.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A member broke one of the safety rules (see the crate docs), or its header is corrupt.
    #[error(
        "{}: member {index} {} (header at tar offset {offset:#x}): {problem}",
        path.display(),
        .name.escape_debug()
    )]
    Member {
        /// The tarball.
        path: PathBuf,
        /// The member's index among the members (extension headers not counted).
        index: usize,
        /// The member's name as the header gives it (before normalisation).
        name: String,
        /// Byte offset of the member's header in the decompressed tar.
        offset: u64,
        /// Which rule it broke, or what is wrong with its header.
        problem: String,
    },
    /// The archive itself is unreadable (bad compression frame, corrupt header).
    #[error("{}: after member {members} (tar offset {offset:#x}): {problem}", path.display())]
    Corrupt {
        /// The tarball.
        path: PathBuf,
        /// How many members were read before the damage.
        members: usize,
        /// Byte offset in the decompressed tar where reading stopped.
        offset: u64,
        /// What the decompressor or the tar reader found.
        problem: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TarError + '_ {
    move |source| TarError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberKind {
    /// A directory (written with mode 0755 whatever the header says).
    Dir,
    /// A regular file: its size and permission bits (`0o7777`).
    File {
        /// Content length in bytes, as the header declares it.
        size: u64,
        /// Permission bits, masked to `0o7777` (no file-type bits).
        mode: u32,
    },
    /// A symbolic link and its (checked) link text.
    Symlink(String),
}

/// One checked member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Normalised relative path, `/`-separated, no trailing `/`.
    pub path: String,
    /// What it is (directory, file with size and mode, or symlink with its target).
    pub kind: MemberKind,
    /// Index among the members (extension headers not counted).
    pub index: usize,
    /// Byte offset of its header in the decompressed tar.
    pub offset: u64,
}

/// The compression of a tarball, recognised from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// A plain tar (neither magic matched).
    None,
    /// A zstd frame (`.tar.zst`, as TheRock's CI stores artifacts).
    Zstd,
    /// An xz stream (`.tar.xz`).
    Xz,
    /// A gzip stream (`.tar.gz`), members concatenated as `gzip` and `tar -z` read them.
    Gzip,
}

impl Compression {
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    const XZ_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];
    /// The gzip magic and the deflate method (RFC 1952), the only method gzip defines.
    const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 8];

    /// The compression whose magic `head` (the file's first bytes) starts with; anything
    /// else is taken for a plain tar, which the tar reader then checks header by header.
    pub fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&Self::ZSTD_MAGIC) {
            Compression::Zstd
        } else if head.starts_with(&Self::XZ_MAGIC) {
            Compression::Xz
        } else if head.starts_with(&Self::GZIP_MAGIC) {
            Compression::Gzip
        } else {
            Compression::None
        }
    }
}

/// The file name suffixes of tarballs, longest first.
pub const SUFFIXES: [&str; 4] = [".tar.zst", ".tar.xz", ".tar.gz", ".tar"];

/// `name` without its tarball suffix, when it has one (`blas_lib_gfx110X.tar.zst` →
/// `blas_lib_gfx110X`).
pub fn stem(name: &str) -> Option<&str> {
    SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|s| !s.is_empty())
}

/// A decompressing reader of `bytes`, whichever compression they start with.
pub fn decompress<'a, R: std::io::BufRead + 'a>(
    mut bytes: R,
) -> std::io::Result<Box<dyn Read + 'a>> {
    let head = bytes.fill_buf()?;
    Ok(match Compression::sniff(head) {
        Compression::None => Box::new(bytes),
        Compression::Zstd => Box::new(zstd::Decoder::with_buffer(bytes)?),
        Compression::Xz => Box::new(xz2::bufread::XzDecoder::new_multi_decoder(bytes)),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(bytes)),
    })
}

/// Opens the tarball at `path` and streams its members (see [`read_members`]).
pub fn open<E: From<TarError>>(
    path: &Path,
    visit: impl FnMut(&Member, &mut dyn Read) -> Result<(), E>,
) -> Result<usize, E> {
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    let reader =
        decompress(std::io::BufReader::with_capacity(1 << 20, file)).map_err(|e| TarError::Io {
            path: path.to_owned(),
            source: e,
        })?;
    read_members(reader, path, visit)
}

/// Streams the members of the (decompressed) tar `reader`, checking each against the
/// safety rules before `visit` sees it with a reader of its content (the rest of the
/// content is skipped when `visit` does not read it all). `path` names the tarball in
/// errors. Returns the number of members.
pub fn read_members<E: From<TarError>>(
    reader: impl Read,
    path: &Path,
    mut visit: impl FnMut(&Member, &mut dyn Read) -> Result<(), E>,
) -> Result<usize, E> {
    let between_members = Rc::new(Cell::new(Some(0)));
    let mut archive = tar::Archive::new(Metered {
        inner: reader,
        read: between_members.clone(),
    });
    let mut rules = Rules::default();
    let mut index = 0;
    let mut last_offset = 0;
    let corrupt = |members: usize, offset: u64, e: std::io::Error| TarError::Corrupt {
        path: path.to_owned(),
        members,
        offset,
        problem: e.to_string(),
    };
    let entries = archive.entries().map_err(|e| corrupt(0, 0, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| corrupt(index, last_offset, e))?;
        between_members.set(None);
        let offset = entry.raw_header_position();
        last_offset = offset;
        let checked = rules
            .check(&entry, index, offset)
            .map_err(|(name, problem)| TarError::Member {
                path: path.to_owned(),
                index,
                name,
                offset,
                problem,
            })?;
        if let Some(member) = checked {
            visit(&member, &mut entry)?;
            index += 1;
        }
        std::io::copy(&mut entry, &mut std::io::sink()).map_err(|e| corrupt(index, offset, e))?;
        between_members.set(Some(0));
    }
    // The tar ends before its compression stream does: reading the rest (the record padding
    // and the stream's trailer) lets the decompressor check the stream's checksum, so a
    // corrupt tarball fails here rather than passing for whole. Nothing of it is kept.
    between_members.set(None);
    std::io::copy(&mut archive.into_inner(), &mut std::io::sink())
        .map_err(|e| corrupt(index, last_offset, e))?;
    Ok(index)
}

/// The most a tar may hold between two members' contents: headers, GNU long names and PAX
/// extensions, which the `tar` crate reads into memory (a name is at most 4 KiB on Linux).
pub const MAX_HEADERS: u64 = 1 << 20;

/// Counts the bytes read between one member's content and the next member (`None` while a
/// member's content is read) and fails past [`MAX_HEADERS`]: so a small compressed tarball
/// cannot make the reader hold gigabytes of "file name".
struct Metered<R> {
    inner: R,
    read: Rc<Cell<Option<u64>>>,
}

impl<R: Read> Read for Metered<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(before) = self.read.get() {
            let after = before + n as u64;
            if after > MAX_HEADERS {
                return Err(std::io::Error::other(format!(
                    "more than {MAX_HEADERS} bytes of headers, long names and PAX extensions \
                     before the next member"
                )));
            }
            self.read.set(Some(after));
        }
        Ok(n)
    }
}

/// What the members seen so far were, for the rules that relate members to each other.
#[derive(Default)]
struct Rules {
    seen: HashMap<String, Seen>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Dir,
    File,
    Symlink,
}

impl Rules {
    /// The member, `None` for an entry that carries no tree entry (the root `./`, a PAX
    /// global header), or (name, problem).
    fn check<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        index: usize,
        offset: u64,
    ) -> Result<Option<Member>, (String, String)> {
        let raw = entry.path_bytes();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let fail = |problem: String| (shown.clone(), problem);
        let header = entry.header();
        let kind = header.entry_type();
        if kind.is_pax_global_extensions() {
            return Ok(None);
        }
        let name = std::str::from_utf8(&raw).map_err(|_| fail("name is not UTF-8".into()))?;
        let path = normalise(name).map_err(fail)?;
        let Some(path) = path else {
            return if kind.is_dir() {
                Ok(None)
            } else {
                Err(fail("names the archive root but is not a directory".into()))
            };
        };
        let kind = match kind {
            tar::EntryType::Directory => MemberKind::Dir,
            tar::EntryType::Regular | tar::EntryType::Continuous => MemberKind::File {
                size: entry.size(),
                mode: header.mode().map_err(|e| fail(format!("bad mode: {e}")))? & 0o7777,
            },
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| fail("symlink without a target".into()))?;
                let target = std::str::from_utf8(&target)
                    .map_err(|_| fail("symlink target is not UTF-8".into()))?;
                check_link_target(&path, target).map_err(fail)?;
                MemberKind::Symlink(target.to_owned())
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_default();
                return Err(fail(format!(
                    "a hard link (to {}); hard links are not accepted (archive with \
                     `tar --hard-dereference`)",
                    target.escape_debug()
                )));
            }
            tar::EntryType::Char | tar::EntryType::Block => {
                return Err(fail(
                    "a device node; only files, directories and symlinks are accepted".into(),
                ));
            }
            tar::EntryType::Fifo => {
                return Err(fail(
                    "a FIFO; only files, directories and symlinks are accepted".into(),
                ));
            }
            other => {
                return Err(fail(format!(
                    "entry type {} (byte {:#04x}); only files, directories and symlinks are accepted",
                    (other.as_byte() as char).escape_debug(),
                    other.as_byte()
                )));
            }
        };
        // Ancestors: never below a symlink or a file.
        for (i, _) in path.match_indices('/') {
            match self.seen.get(&path[..i]) {
                Some(Seen::Symlink) => {
                    return Err(fail(format!(
                        "lies below the symlink {}: writing through a link is refused",
                        path[..i].escape_debug()
                    )));
                }
                Some(Seen::File) => {
                    return Err(fail(format!(
                        "lies below the file {}",
                        path[..i].escape_debug()
                    )));
                }
                _ => {}
            }
        }
        let seen = match kind {
            MemberKind::Dir => Seen::Dir,
            MemberKind::File { .. } => Seen::File,
            MemberKind::Symlink(_) => Seen::Symlink,
        };
        match self.seen.insert(path.clone(), seen) {
            Some(Seen::Dir) if seen == Seen::Dir => {}
            Some(Seen::Dir) => {
                return Err(fail(
                    "is a directory of earlier members, and now not a directory".into(),
                ));
            }
            Some(_) => return Err(fail("appears twice in the archive".into())),
            None => {}
        }
        // Ancestors not listed are directories all the same.
        for (i, _) in path.match_indices('/') {
            self.seen.entry(path[..i].to_owned()).or_insert(Seen::Dir);
        }
        Ok(Some(Member {
            path,
            kind,
            index,
            offset,
        }))
    }
}

/// `name` as a relative `/`-separated path without `.` components, `None` for the root.
fn normalise(name: &str) -> Result<Option<String>, String> {
    if name.starts_with('/') {
        return Err("absolute name; members must be relative to the artifact".into());
    }
    let mut parts = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("path traversal: a `..` component".into()),
            c if c.contains('\0') => return Err("NUL in name".into()),
            c => parts.push(c),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// A symlink target must be relative and, resolved from the link's directory, stay inside
/// the tree.
fn check_link_target(link: &str, target: &str) -> Result<(), String> {
    if target.is_empty() {
        return Err("symlink with an empty target".into());
    }
    if target.starts_with('/') {
        return Err(format!(
            "symlink to the absolute path {} escapes the tree",
            target.escape_debug()
        ));
    }
    let mut depth = link.matches('/').count();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    format!("symlink to {} escapes the tree", target.escape_debug())
                })?;
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

/// Unpacks the tarball at `tarball` into the directory `dest` (created; it must not hold
/// any of the members yet), keeping modes and symlinks. Members are checked as
/// [`read_members`] does, so nothing is written outside `dest`; on an error, what was
/// written so far stays for the caller to remove.
pub fn unpack(tarball: &Path, dest: &Path) -> Result<usize, TarError> {
    std::fs::create_dir_all(dest).map_err(io_error(dest))?;
    open(tarball, |m, content| write_member(m, content, dest))
}

/// Writes one member below `root`: a directory, a new file with the member's mode, or a
/// symlink.
pub fn write_member(member: &Member, content: &mut dyn Read, root: &Path) -> Result<(), TarError> {
    let to = root.join(&member.path);
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    match &member.kind {
        MemberKind::Dir => std::fs::create_dir_all(&to).map_err(io_error(&to)),
        MemberKind::Symlink(target) => {
            kpack_fs::symlink(Path::new(target), &to).map_err(io_error(&to))
        }
        MemberKind::File { mode, .. } => write_file(content, &to, *mode).map(|_| ()),
    }
}

/// Writes `content` to the new file `to` (never through an existing file or link) with the
/// permission bits `mode` ([`kpack_fs::set_mode`]: on Windows, read-only without the owner's
/// write bit), creating its directory; returns the bytes written.
pub fn write_file(content: &mut dyn Read, to: &Path, mode: u32) -> Result<u64, TarError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    // Private until its mode is set (Windows files are created with their directory's ACL).
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(to).map_err(io_error(to))?;
    let bytes = std::io::copy(content, &mut file).map_err(io_error(to))?;
    kpack_fs::set_mode(to, mode).map_err(io_error(to))?;
    Ok(bytes)
}

/// How [`pack_dir`] writes.
#[derive(Debug, Clone, Copy)]
pub struct PackOptions {
    /// zstd level.
    pub level: i32,
    /// Every member's mtime: `SOURCE_DATE_EPOCH` or 0 ([`PackOptions::from_env`]).
    pub mtime: u64,
}

impl PackOptions {
    /// zstd level 3 (fast; the content is mostly compressed archives already), mtime from
    /// `SOURCE_DATE_EPOCH` (0 when unset, not a number or before 1970).
    pub fn from_env() -> PackOptions {
        PackOptions {
            level: 3,
            mtime: kpack_fs::source_date_epoch()
                .and_then(|secs| u64::try_from(secs).ok())
                .unwrap_or(0),
        }
    }
}

/// Writes the tree `dir` as the zstd tarball `out` (see the crate docs); `out` appears only
/// when complete. Returns the number of members.
///
/// `out` is not synced to the disk: a kill cannot leave it partial, but a power loss can,
/// so a caller that publishes it syncs it first, once every output is written (a sync as
/// each ends made its writer wait for the disk while it could be packing the next: a
/// distribution's recombine took 36 s with one, 30 s without).
pub fn pack_dir(dir: &Path, out: &Path, opts: PackOptions) -> Result<usize, TarError> {
    pack_dir_recorded(dir, out, opts, &Recorded::new())
}

/// What a tree's writer knew of a member that its copy on disk may have lost (a Windows disk
/// keeps no execute bits: a file reads back as `0o644`, [`kpack_fs::mode`]; and, without the
/// privilege to make them, no symbolic links) or does not hold at all (a file packed from
/// where it lies). Keyed by the member's `/`-separated path.
pub type Recorded = BTreeMap<String, RecordedMember>;

/// One member of [`Recorded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordedMember {
    /// A regular file on disk, written with these permission bits instead of the disk's.
    Mode(u32),
    /// A symbolic link to this target, whether or not the disk holds it (a file or link
    /// of the same name on disk is not read).
    Symlink(PathBuf),
    /// A regular file not copied into the tree: its content is read from `source`, its
    /// permission bits are `mode` or else `source`'s (a file or link of the same name on
    /// disk is not read). A writer that has the file elsewhere already (recombine's
    /// unpacked shards) packs it from there rather than writing a copy to pack.
    Elsewhere {
        /// The file whose content the member holds.
        source: PathBuf,
        /// Its permission bits, when known better than `source`'s disk does.
        mode: Option<u32>,
    },
}

/// [`pack_dir`], with `recorded` saying what the disk copy does not (see [`Recorded`]): so
/// the tarball's bytes are those of the tree as recorded, whatever the disk could hold.
pub fn pack_dir_recorded(
    dir: &Path,
    out: &Path,
    opts: PackOptions,
    recorded: &Recorded,
) -> Result<usize, TarError> {
    /// Where a member comes from.
    enum Source<'a> {
        Disk(kpack_fs::WalkEntry),
        Link(&'a Path),
        File(&'a Path, Option<u32>),
    }
    let mut members: Vec<(String, Source)> = Vec::new();
    for e in kpack_fs::walk(dir) {
        let e = e.map_err(|e| TarError::Io {
            path: e.path,
            source: e.source,
        })?;
        let name = kpack_fs::slash_path(&e.rel).ok_or_else(|| TarError::Io {
            path: e.path.clone(),
            source: std::io::Error::other("file name is not UTF-8"),
        })?;
        if matches!(recorded.get(&name), None | Some(RecordedMember::Mode(_))) {
            members.push((name, Source::Disk(e)));
        }
    }
    members.extend(recorded.iter().filter_map(|(name, m)| match m {
        RecordedMember::Symlink(target) => Some((name.clone(), Source::Link(target))),
        RecordedMember::Elsewhere { source, mode } => {
            Some((name.clone(), Source::File(source, *mode)))
        }
        RecordedMember::Mode(_) => None,
    }));
    // The walk's order (each directory's entries by name, right after it) is the order of
    // the paths' components; recorded links and files take their place in it.
    members.sort_by(|(a, _), (b, _)| a.split('/').cmp(b.split('/')));
    // Named as every kpack temporary (a killed run's is swept), mode 0666 less the umask.
    let temp = kpack_fs::temp_file_beside(out).map_err(io_error(out))?;
    let mut writer = TarWriter::new(temp.as_file(), Compression::Zstd, opts, out)?;
    for (name, entry) in &members {
        let e = match entry {
            Source::Disk(e) => e,
            Source::Link(target) => {
                writer
                    .symlink(name, target)
                    .map_err(io_error(&dir.join(name)))?;
                continue;
            }
            Source::File(source, mode) => {
                pack_file(&mut writer, name, source, *mode).map_err(io_error(source))?;
                continue;
            }
        };
        let kind = e.file_type;
        if kind.is_symlink() {
            let target = std::fs::read_link(&e.path).map_err(io_error(&e.path))?;
            writer.symlink(name, &target)
        } else if kind.is_dir() {
            writer.dir(name)
        } else if kind.is_file() {
            let mode = match recorded.get(name) {
                Some(RecordedMember::Mode(mode)) => Some(*mode),
                _ => None,
            };
            pack_file(&mut writer, name, &e.path, mode)
        } else {
            Err(std::io::Error::other(
                "neither a file, a directory nor a symlink",
            ))
        }
        .map_err(io_error(&e.path))?;
    }
    let mut file = writer.finish()?;
    file.flush().map_err(io_error(out))?;
    temp.persist_noclobber(out).map_err(|e| TarError::Io {
        path: out.to_owned(),
        source: e.error,
    })?;
    Ok(members.len())
}

/// Appends the regular file at `path` to `writer` as `name`, with permission bits `mode` or
/// else the disk's.
fn pack_file<W: Write>(
    writer: &mut TarWriter<W>,
    name: &str,
    path: &Path,
    mode: Option<u32>,
) -> std::io::Result<()> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let mode = mode.unwrap_or_else(|| kpack_fs::mode(&meta));
    writer.file(name, mode, meta.len(), file)
}

/// The reproducible tar writer (see the crate docs), member by member, into `W` compressed
/// with a [`Compression`]: [`pack_dir`] writes a tree with it, and a streamed rewrite of a
/// tarball (`kpack prune`) its members as they come, in the input's compression.
pub struct TarWriter<W: Write> {
    builder: tar::Builder<Encoder<W>>,
    mtime: u64,
    /// The output, in errors.
    out: PathBuf,
}

/// The compressing layer of a [`TarWriter`].
enum Encoder<W: Write> {
    None(W),
    Zstd(zstd::Encoder<'static, W>),
    Xz(xz2::write::XzEncoder<W>),
    Gzip(flate2::write::GzEncoder<W>),
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Encoder::None(w) => w.write(buf),
            Encoder::Zstd(w) => w.write(buf),
            Encoder::Xz(w) => w.write(buf),
            Encoder::Gzip(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Encoder::None(w) => w.flush(),
            Encoder::Zstd(w) => w.flush(),
            Encoder::Xz(w) => w.flush(),
            Encoder::Gzip(w) => w.flush(),
        }
    }
}

/// The xz preset of written `.tar.xz` (xz's default).
pub const XZ_LEVEL: u32 = 6;

impl<W: Write> TarWriter<W> {
    /// A writer of a tarball into `sink` with `compression` (zstd at `opts.level`, xz at
    /// [`XZ_LEVEL`], gzip at its default level with no name and mtime 0 in its header);
    /// `out` names the output in errors.
    pub fn new(
        sink: W,
        compression: Compression,
        opts: PackOptions,
        out: &Path,
    ) -> Result<TarWriter<W>, TarError> {
        let encoder = match compression {
            Compression::None => Encoder::None(sink),
            Compression::Zstd => {
                Encoder::Zstd(zstd::Encoder::new(sink, opts.level).map_err(io_error(out))?)
            }
            Compression::Xz => Encoder::Xz(xz2::write::XzEncoder::new(sink, XZ_LEVEL)),
            Compression::Gzip => Encoder::Gzip(
                flate2::GzBuilder::new()
                    .mtime(0)
                    .write(sink, flate2::Compression::default()),
            ),
        };
        Ok(TarWriter {
            builder: tar::Builder::new(encoder),
            mtime: opts.mtime,
            out: out.to_owned(),
        })
    }

    fn header(&self, kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(self.mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(size);
        header
    }

    /// Appends the directory `name` (mode 0755).
    pub fn dir(&mut self, name: &str) -> std::io::Result<()> {
        let mut header = self.header(tar::EntryType::Directory, 0o755, 0);
        self.builder
            .append_data(&mut header, format!("{name}/"), std::io::empty())
    }

    /// Appends the symbolic link `name` to `target`.
    pub fn symlink(&mut self, name: &str, target: &Path) -> std::io::Result<()> {
        let mut header = self.header(tar::EntryType::Symlink, 0o777, 0);
        self.builder.append_link(&mut header, name, target)
    }

    /// Appends the regular file `name` with permission bits `mode` and the `size` bytes
    /// `content` holds.
    pub fn file(
        &mut self,
        name: &str,
        mode: u32,
        size: u64,
        content: impl Read,
    ) -> std::io::Result<()> {
        let mut header = self.header(tar::EntryType::Regular, mode, size);
        self.builder.append_data(&mut header, name, content)
    }

    /// Ends the tar and its compression stream; returns the sink.
    pub fn finish(self) -> Result<W, TarError> {
        let out = self.out;
        let encoder = self.builder.into_inner().map_err(io_error(&out))?;
        match encoder {
            Encoder::None(w) => Ok(w),
            Encoder::Zstd(w) => w.finish(),
            Encoder::Xz(w) => w.finish(),
            Encoder::Gzip(w) => w.finish(),
        }
        .map_err(io_error(&out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalised_and_traversal_refused() {
        assert_eq!(normalise("./a//b/./c/").unwrap().as_deref(), Some("a/b/c"));
        assert_eq!(normalise("./").unwrap(), None);
        assert!(normalise("/etc/passwd").unwrap_err().contains("absolute"));
        assert!(normalise("a/../../b").unwrap_err().contains("traversal"));
    }

    #[test]
    fn a_long_name_bigger_than_the_header_budget_is_refused_before_it_is_read_whole() {
        // A GNU long-name entry of 2 MiB, then a member: the reader must stop at the budget.
        let mut tar = Vec::new();
        let mut long = tar::Header::new_gnu();
        long.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
        long.set_entry_type(tar::EntryType::GNULongName);
        long.set_size(2 << 20);
        long.set_cksum();
        tar.extend_from_slice(long.as_bytes());
        tar.extend(std::iter::repeat_n(b'a', 2 << 20));
        let mut file = tar::Header::new_gnu();
        file.set_path("x").unwrap();
        file.set_size(0);
        file.set_cksum();
        tar.extend_from_slice(file.as_bytes());
        tar.extend([0; 1024]);
        let e = read_members(
            &tar[..],
            Path::new("bomb.tar"),
            |_, _| Ok::<_, TarError>(()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("bomb.tar") && e.contains("more than 1048576 bytes"),
            "{e}"
        );
        // Within the budget, the same shape reads.
        let mut ok = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        ok.append_data(&mut h, "d/".repeat(200) + "f", &b"x"[..])
            .unwrap();
        let ok = ok.into_inner().unwrap();
        let n = read_members(&ok[..], Path::new("ok.tar"), |m, _| {
            assert_eq!(m.path.len(), 401);
            Ok::<_, TarError>(())
        })
        .unwrap();
        assert_eq!(n, 1);
    }

    /// A one-member tar, gzip-compressed as `gzip -n` writes it.
    fn gzipped_tar() -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(5);
        h.set_mode(0o644);
        tar.append_data(&mut h, "lib/x", &b"hello"[..]).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&tar.into_inner().unwrap()).unwrap();
        gz.finish().unwrap()
    }

    fn read_gz(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, TarError> {
        let mut seen = Vec::new();
        read_members(decompress(bytes).unwrap(), Path::new("t.tar.gz"), |m, r| {
            let mut content = Vec::new();
            r.read_to_end(&mut content).unwrap();
            seen.push((m.path.clone(), content));
            Ok::<_, TarError>(())
        })?;
        Ok(seen)
    }

    #[test]
    fn gzip_tarballs_are_recognised_by_their_magic_and_streamed() {
        let gz = gzipped_tar();
        assert_eq!(Compression::sniff(&gz), Compression::Gzip);
        assert_eq!(stem("forms.tar.gz"), Some("forms"));
        assert_eq!(
            read_gz(&gz).unwrap(),
            [("lib/x".to_owned(), b"hello".to_vec())]
        );
    }

    #[test]
    fn truncated_or_corrupt_gzip_fails_naming_the_tarball_and_tar_offset() {
        let gz = gzipped_tar();
        let e = read_gz(&gz[..gz.len() / 2]).unwrap_err().to_string();
        assert!(e.starts_with("t.tar.gz: "), "{e}");
        assert!(e.contains("tar offset"), "{e}");
        // A flipped CRC-32 (the trailer's first four bytes) is caught at the end.
        let mut bad = gz.clone();
        let crc = bad.len() - 8;
        bad[crc] ^= 0xff;
        let e = read_gz(&bad).unwrap_err().to_string();
        assert!(e.contains("t.tar.gz") && e.contains("tar offset"), "{e}");
    }

    #[test]
    fn symlink_targets_stay_inside_the_tree() {
        assert!(check_link_target("lib/libx.so", "libx.so.1").is_ok());
        assert!(check_link_target("a/b/c", "../../d").is_ok());
        assert!(check_link_target("a/b/c", "../../../d").is_err());
        assert!(check_link_target("lib/x", "/usr/lib/x").is_err());
        assert!(check_link_target("x", "").is_err());
    }
}
