//! A strict reader of `ar` archives (static libraries), GNU and BSD variants.
//!
//! Layout: the global header `!<arch>\n`, then members, each a 60-byte header
//! (`name[16] date[12] uid[6] gid[6] mode[8] size[10] "`\n"`) followed by `size`
//! data bytes and one `\n` if `size` is odd (members start at even offsets).
//!
//! Names: GNU writes `name/`, refers to the `//` long-name table as `/N` (names
//! there end in `/\n`) and has the symbol tables `/` and `/SYM64/`; BSD writes the
//! name space-padded, or `#1/N` with the name in the first `N` data bytes, and has
//! the symbol tables `__.SYMDEF*`. Symbol and name tables are not returned as
//! members. Thin archives (`!<thin>\n`) hold no member data and are rejected.
//!
//! [`rebuild`] writes an archive again with new contents for some members. It is
//! hand-written next to the reader because the `ar` crate's writers build an archive
//! from scratch (their own header fields, symbol table layout and long-name table),
//! while a pruned static library must keep every header field, the member order, the
//! long-name table and the symbols as they are: only member sizes and the symbol
//! table's member offsets change.
//!
//! A crate of its own because `ar` is not ELF: `kpack-elf` inspects the ELF members
//! (`kpack_elf::inspect_ar`), `kpack-prune` rebuilds pruned libraries, and neither the
//! format nor its users need the other's code.
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

use thiserror::Error;

/// Global header of an archive.
pub const MAGIC: &[u8; 8] = b"!<arch>\n";
const THIN_MAGIC: &[u8; 8] = b"!<thin>\n";
const HEADER_SIZE: usize = 60;

/// Why an archive could not be read; offsets are file offsets of the member header.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ArError {
    /// The file does not start with `!<arch>\n`.
    #[error("not an ar archive: expected \"!<arch>\\n\" at offset 0")]
    NotAr,
    /// A thin archive, whose members live in other files.
    #[error("thin ar archive (\"!<thin>\\n\"): members are not stored in the file")]
    Thin,
    /// Fewer than 60 bytes left where a member header starts.
    #[error(
        "member header at offset {offset:#x}: only {available} bytes left, expected a 60-byte header"
    )]
    TruncatedHeader {
        /// Offset of the header.
        offset: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A member header not ending in `` `\n ``.
    #[error(
        "member header at offset {offset:#x}: terminator is {found:02x?}, expected 60 0a (\"`\\n\")"
    )]
    BadTerminator {
        /// Offset of the header.
        offset: u64,
        /// The two bytes found instead.
        found: [u8; 2],
    },
    /// A size field that is not a decimal number.
    #[error("member header at offset {offset:#x}: size field {field:?} is not a decimal number")]
    BadSize {
        /// Offset of the header.
        offset: u64,
        /// The field as found.
        field: String,
    },
    /// Member data extending beyond the end of the file.
    #[error(
        "member {name:?} at offset {offset:#x}: {size} data bytes extend beyond the end of the file ({file_len} bytes)"
    )]
    BeyondEof {
        /// Offset of the header.
        offset: u64,
        /// The member's name.
        name: String,
        /// The member's size field.
        size: u64,
        /// Length of the file.
        file_len: u64,
    },
    /// A GNU `/N` name with no entry at `N` in the `//` table.
    #[error(
        "member header at offset {offset:#x}: long name {reference:?} not found in the \"//\" table"
    )]
    BadLongName {
        /// Offset of the header.
        offset: u64,
        /// The `/N` reference.
        reference: String,
    },
    /// A BSD `#1/N` name longer than the member.
    #[error(
        "member header at offset {offset:#x}: BSD name length {name_len} exceeds the member size {size}"
    )]
    BadBsdName {
        /// Offset of the header.
        offset: u64,
        /// The name length `N`.
        name_len: u64,
        /// The member's size field.
        size: u64,
    },
    /// The padding byte after an odd-sized member is not `\n`.
    #[error("padding byte at offset {offset:#x} is {found:#04x}, expected 0x0a")]
    BadPadding {
        /// Offset of the padding byte.
        offset: u64,
        /// The byte found.
        found: u8,
    },
    /// A symbol table entry naming no member header.
    #[error(
        "symbol table at offset {offset:#x}: entry {index} points at offset {member_offset:#x}, expected the header of a member"
    )]
    BadSymbolOffset {
        /// Offset of the symbol table's header.
        offset: u64,
        /// Index of the entry.
        index: u64,
        /// The offset it holds.
        member_offset: u64,
    },
    /// A symbol table too short for the entry count it declares.
    #[error("symbol table at offset {offset:#x}: {count} entries do not fit in {size} bytes")]
    BadSymbolTable {
        /// Offset of the symbol table's header.
        offset: u64,
        /// The declared entry count.
        count: u64,
        /// The table's size.
        size: u64,
    },
    /// A BSD `__.SYMDEF` symbol table, which [`rebuild`] does not write.
    #[error(
        "BSD symbol table at offset {offset:#x}: rewriting BSD archives is not supported (expected a GNU archive)"
    )]
    BsdSymbolTable {
        /// Offset of its header.
        offset: u64,
    },
    /// A rewritten member too large for the 10-digit size field.
    #[error("member {name:?}: {size} bytes do not fit in an ar size field")]
    TooLarge {
        /// The member's name.
        name: String,
        /// Its new size.
        size: u64,
    },
}

/// One regular member of an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member<'a> {
    /// The member's file name (GNU and BSD long names resolved).
    pub name: String,
    /// File offset of the 60-byte member header.
    pub header_offset: u64,
    /// File offset of `data`.
    pub offset: u64,
    /// The member's bytes.
    pub data: &'a [u8],
}

/// Whether `data` starts with the `ar` global header.
pub fn is_ar(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

/// The regular members of an archive, in file order.
pub fn members(data: &[u8]) -> Result<Vec<Member<'_>>, ArError> {
    if data.starts_with(THIN_MAGIC) {
        return Err(ArError::Thin);
    }
    if !is_ar(data) {
        return Err(ArError::NotAr);
    }
    let mut out = Vec::new();
    let mut long_names: Option<&[u8]> = None;
    let mut pos = MAGIC.len();
    while pos < data.len() {
        let offset = pos as u64;
        let header = data
            .get(pos..pos + HEADER_SIZE)
            .ok_or(ArError::TruncatedHeader {
                offset,
                available: (data.len() - pos) as u64,
            })?;
        let (raw_name, rest) = header.split_at(16);
        let terminator = [rest[42], rest[43]];
        if terminator != *b"`\n" {
            return Err(ArError::BadTerminator {
                offset,
                found: terminator,
            });
        }
        let size = parse_size(&rest[32..42]).ok_or_else(|| ArError::BadSize {
            offset,
            field: String::from_utf8_lossy(&rest[32..42]).into_owned(),
        })?;
        let start = pos + HEADER_SIZE;
        let name_field = trim_end_spaces(raw_name);
        let body = usize::try_from(size)
            .ok()
            .and_then(|size| data.get(start..start.checked_add(size)?))
            .ok_or_else(|| ArError::BeyondEof {
                offset,
                name: String::from_utf8_lossy(name_field).into_owned(),
                size,
                file_len: data.len() as u64,
            })?;
        let end = start + body.len();

        match name_field {
            b"/" | b"/SYM64/" => {}
            b"//" => long_names = Some(body),
            n if n.starts_with(b"__.SYMDEF") => {}
            n => {
                let (name, member_data) = member_name(n, body, long_names, offset)?;
                let data_offset = (end - member_data.len()) as u64;
                out.push(Member {
                    name,
                    header_offset: offset,
                    offset: data_offset,
                    data: member_data,
                });
            }
        }

        pos = end;
        if pos % 2 == 1 {
            // The padding byte may be missing only at the very end of the file.
            if let Some(&pad) = data.get(pos) {
                if pad != b'\n' {
                    return Err(ArError::BadPadding {
                        offset: pos as u64,
                        found: pad,
                    });
                }
                pos += 1;
            }
        }
    }
    Ok(out)
}

/// One entry of an archive as stored: its header, name field and data.
struct RawEntry<'a> {
    offset: u64,
    header: &'a [u8],
    name_field: &'a [u8],
    body: &'a [u8],
}

/// The entries of an archive [`members`] accepted, in file order.
fn raw_entries(data: &[u8]) -> Vec<RawEntry<'_>> {
    let mut out = Vec::new();
    let mut pos = MAGIC.len();
    while pos + HEADER_SIZE <= data.len() {
        let header = &data[pos..pos + HEADER_SIZE];
        let size = parse_size(&header[48..58]).unwrap_or(0) as usize;
        let start = pos + HEADER_SIZE;
        let body = &data[start..start + size];
        out.push(RawEntry {
            offset: pos as u64,
            header,
            name_field: trim_end_spaces(&header[..16]),
            body,
        });
        pos = start + size + (start + size) % 2;
    }
    out
}

/// The archive `data` written again with `replaced[i]` (when `Some`) as the data of the
/// `i`-th member of [`members`]: every header field but the size, the member order, the
/// long-name table and the symbols stay; the GNU symbol table (`/` or `/SYM64/`) gets the
/// members' new offsets. Deterministic: the output depends only on the inputs.
pub fn rebuild(data: &[u8], replaced: &[Option<Vec<u8>>]) -> Result<Vec<u8>, ArError> {
    let listed = members(data)?;
    let entries = raw_entries(data);
    // The data of each entry in the output, and the new offset of every member header.
    let mut bodies: Vec<std::borrow::Cow<'_, [u8]>> = Vec::with_capacity(entries.len());
    let mut moved = std::collections::HashMap::new();
    let mut pos = MAGIC.len() as u64;
    let mut member = 0;
    for e in &entries {
        let is_member = !matches!(e.name_field, b"/" | b"/SYM64/" | b"//")
            && !e.name_field.starts_with(b"__.SYMDEF");
        if e.name_field.starts_with(b"__.SYMDEF") {
            return Err(ArError::BsdSymbolTable { offset: e.offset });
        }
        let body = match (is_member, replaced.get(member).and_then(Option::as_ref)) {
            (true, Some(new)) => {
                let m = &listed[member];
                // A BSD `#1/N` name is stored before the data.
                let name_len = (m.offset - e.offset) as usize - HEADER_SIZE;
                let mut b = e.body[..name_len].to_vec();
                b.extend_from_slice(new);
                std::borrow::Cow::Owned(b)
            }
            _ => std::borrow::Cow::Borrowed(e.body),
        };
        if is_member {
            member += 1;
        }
        if body.len() > 9_999_999_999 {
            return Err(ArError::TooLarge {
                name: String::from_utf8_lossy(e.name_field).into_owned(),
                size: body.len() as u64,
            });
        }
        moved.insert(e.offset, pos);
        pos += (HEADER_SIZE + body.len() + body.len() % 2) as u64;
        bodies.push(body);
    }
    let mut out = Vec::with_capacity(pos as usize);
    out.extend_from_slice(MAGIC);
    for (e, body) in entries.iter().zip(bodies) {
        let mut header = e.header.to_vec();
        header[48..58].copy_from_slice(format!("{:<10}", body.len()).as_bytes());
        out.extend_from_slice(&header);
        match e.name_field {
            b"/" => out.extend(remap_symbols::<4>(e, &moved)?),
            b"/SYM64/" => out.extend(remap_symbols::<8>(e, &moved)?),
            _ => out.extend_from_slice(&body),
        }
        if body.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// A GNU symbol table (`W`-byte big-endian count and member offsets, then the names) with
/// every member offset replaced by its entry in `moved`.
fn remap_symbols<const W: usize>(
    e: &RawEntry<'_>,
    moved: &std::collections::HashMap<u64, u64>,
) -> Result<Vec<u8>, ArError> {
    let read = |b: &[u8]| b.iter().fold(0u64, |acc, &d| acc << 8 | u64::from(d));
    let mut table = e.body.to_vec();
    let count = table.get(..W).map_or(u64::MAX, read);
    let bad = ArError::BadSymbolTable {
        offset: e.offset,
        count,
        size: table.len() as u64,
    };
    let entries_end = count
        .checked_add(1)
        .and_then(|n| n.checked_mul(W as u64))
        .filter(|&end| end <= table.len() as u64)
        .ok_or(bad)? as usize;
    for (index, slot) in table[W..entries_end].chunks_exact_mut(W).enumerate() {
        let member_offset = read(slot);
        let new = *moved.get(&member_offset).ok_or(ArError::BadSymbolOffset {
            offset: e.offset,
            index: index as u64,
            member_offset,
        })?;
        if W == 4 && new > u64::from(u32::MAX) {
            return Err(ArError::TooLarge {
                name: "/".to_owned(),
                size: new,
            });
        }
        slot.copy_from_slice(&new.to_be_bytes()[8 - W..]);
    }
    Ok(table)
}

/// The member's name and its data (which excludes a BSD `#1/N` name).
fn member_name<'a>(
    field: &[u8],
    body: &'a [u8],
    long_names: Option<&[u8]>,
    offset: u64,
) -> Result<(String, &'a [u8]), ArError> {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if let Some(len) = field.strip_prefix(b"#1/") {
        let name_len = parse_size(len).ok_or_else(|| ArError::BadSize {
            offset,
            field: lossy(field),
        })?;
        let split = usize::try_from(name_len)
            .ok()
            .filter(|&n| n <= body.len())
            .ok_or(ArError::BadBsdName {
                offset,
                name_len,
                size: body.len() as u64,
            })?;
        let (name, rest) = body.split_at(split);
        // BSD pads the stored name with NULs to keep the data aligned.
        let name = name.split(|&b| b == 0).next().unwrap_or_default();
        return Ok((lossy(name), rest));
    }
    if let Some(reference) = field.strip_prefix(b"/") {
        let bad = || ArError::BadLongName {
            offset,
            reference: lossy(field),
        };
        let index = usize::try_from(parse_size(reference).ok_or_else(bad)?).map_err(|_| bad())?;
        let table = long_names.ok_or_else(bad)?;
        let tail = table.get(index..).ok_or_else(bad)?;
        let line = tail.split(|&b| b == b'\n').next().unwrap_or_default();
        let name = line.strip_suffix(b"/").unwrap_or(line);
        if name.is_empty() {
            return Err(bad());
        }
        return Ok((lossy(name), body));
    }
    let name = field.strip_suffix(b"/").unwrap_or(field);
    Ok((lossy(name), body))
}

fn trim_end_spaces(field: &[u8]) -> &[u8] {
    let len = field.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &field[..len]
}

/// A decimal number, right-padded with spaces; at least one digit.
fn parse_size(field: &[u8]) -> Option<u64> {
    let digits = trim_end_spaces(field);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}
