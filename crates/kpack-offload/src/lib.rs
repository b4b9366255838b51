//! LLVM's OffloadBinary: the container the new offload driver (`--offload-new-driver`)
//! writes device images into, in the `.llvm.offloading` section of relocatable objects
//! (and so of the members of static libraries), and that `llvm-offload-binary` (formerly
//! `clang-offload-packager`) writes as a file of its own.
//!
//! Hand-written, because no crate reads it: the format lives only in LLVM's C++
//! (`llvm/Object/OffloadBinary.h`), which reads it by casting pointers into the buffer.
//! This reader checks every field against the bytes it has before using it, allocates
//! only in proportion to structures it has already found inside the input, and reports
//! the absolute byte offset of what is wrong and what it expected there.
//!
//! # Layout (all integers little-endian)
//!
//! A section or file holds one or more binaries back to back; each is `size` bytes long:
//!
//! | field | bytes | meaning |
//! |---|---|---|
//! | magic | 4 | `10 ff 10 ad` |
//! | version | 4 | 1 (one entry; LLVM ≤ 22 writes it) or 2 (several entries) |
//! | size | 8 | bytes of this binary, header included |
//! | entries offset | 8 | where the entry table starts, from the binary's start |
//! | entry size (v1) / entries count (v2) | 8 | v1: ignored; v2: number of entries |
//!
//! Each 40-byte entry: image kind (u16: 1 object, 2 bitcode, 3 cubin, 4 fatbinary, 5 PTX),
//! offload kind (u16: 1 OpenMP, 2 CUDA, 4 HIP, 8 SYCL), flags (u32), string-map offset
//! (u64), string count (u64), image offset (u64), image size (u64). The string map is an
//! array of `(key offset, value offset)` pairs (v2 adds a value size: 24 bytes per pair);
//! keys (and v1 values) are NUL-terminated strings. Every offset counts from the start of
//! the binary. The keys LLVM writes are `triple` and `arch` (a target id such as
//! `gfx90a:xnack+`), and for some producers more (`feature`, …), kept as found.
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

/// The first four bytes of every binary.
pub const MAGIC: [u8; 4] = [0x10, 0xff, 0x10, 0xad];
/// Bytes of the header.
pub const HEADER_SIZE: u64 = 32;
/// Bytes of one entry.
pub const ENTRY_SIZE: u64 = 40;
/// The newest version this reader knows.
pub const LATEST_VERSION: u32 = 2;

/// Why a binary could not be read. Offsets are absolute: the `base` given to [`parse`]
/// plus the offset in its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "offload binary {binary} at offset {binary_offset:#x}: {what} at offset {offset:#x}: expected {expected}"
)]
pub struct OffloadError {
    /// Index of the binary in the sequence.
    pub binary: usize,
    /// Absolute offset of the binary's header.
    pub binary_offset: u64,
    /// Absolute offset of the field or structure that is wrong.
    pub offset: u64,
    /// What was being read.
    pub what: &'static str,
    /// What it should have been.
    pub expected: String,
}

/// What an image holds (`ImageKind` in LLVM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageKind(pub u16);

impl ImageKind {
    /// A relocatable or linked object (for AMDGPU, a code object).
    pub const OBJECT: ImageKind = ImageKind(1);
    /// LLVM bitcode (`-fgpu-rdc`, LTO).
    pub const BITCODE: ImageKind = ImageKind(2);

    /// Stable lower-case name: `none`, `object`, `bitcode`, `cubin`, `fatbinary`, `ptx`,
    /// else `unknown`.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "none",
            1 => "object",
            2 => "bitcode",
            3 => "cubin",
            4 => "fatbinary",
            5 => "ptx",
            _ => "unknown",
        }
    }
}

/// Which runtime loads an image (`OffloadKind` in LLVM, a bit mask of one bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OffloadKind(pub u16);

impl OffloadKind {
    /// HIP.
    pub const HIP: OffloadKind = OffloadKind(4);

    /// The name LLVM gives it (`openmp`, `cuda`, `hip`, `sycl`), `none` for 0, else
    /// `unknown`. It is also the offload kind of a clang offload bundle id.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "none",
            1 => "openmp",
            2 => "cuda",
            4 => "hip",
            8 => "sycl",
            _ => "unknown",
        }
    }
}

/// One device image with its metadata, borrowed from the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image<'a> {
    /// Index of its binary in the sequence.
    pub binary: usize,
    /// Index of its entry within the binary (0 for version 1).
    pub entry: usize,
    /// Absolute offset of its binary's header.
    pub binary_offset: u64,
    /// The binary's format version.
    pub version: u32,
    /// What the image is.
    pub image_kind: ImageKind,
    /// Which runtime loads it.
    pub offload_kind: OffloadKind,
    /// The entry's flags.
    pub flags: u32,
    /// The string map, in table order.
    pub strings: Vec<(&'a str, &'a str)>,
    /// The image bytes.
    pub data: &'a [u8],
    /// Absolute offset of `data`.
    pub offset: u64,
}

impl<'a> Image<'a> {
    /// The value of `key` (the first, when a key repeats: LLVM's map keeps the first).
    pub fn string(&self, key: &str) -> Option<&'a str> {
        self.strings
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The target triple (`amdgcn-amd-amdhsa`).
    pub fn triple(&self) -> Option<&'a str> {
        self.string("triple")
    }

    /// The architecture, for AMDGPU a target id (`gfx90a:xnack+`).
    pub fn arch(&self) -> Option<&'a str> {
        self.string("arch")
    }
}

/// True if `bytes` starts with the OffloadBinary magic.
pub fn is_offload_binary(bytes: &[u8]) -> bool {
    bytes.starts_with(&MAGIC)
}

/// Reads every image of the binaries laid back to back in `bytes` (a `.llvm.offloading`
/// section, or a whole `llvm-offload-binary` file), in order. `base` is the absolute
/// offset of `bytes` in the file, so that errors point into the file. Empty input holds
/// no binary. Bytes after the last binary must start another one, as LLVM reads it.
pub fn parse(bytes: &[u8], base: u64) -> Result<Vec<Image<'_>>, OffloadError> {
    let mut images = Vec::new();
    let mut pos = 0usize;
    let mut binary = 0;
    while pos < bytes.len() {
        let reader = Binary {
            bytes: &bytes[pos..],
            index: binary,
            base: base + pos as u64,
        };
        let size = reader.read_into(&mut images)?;
        pos += size;
        binary += 1;
    }
    Ok(images)
}

/// One binary: the bytes from its header to the end of the input.
struct Binary<'a> {
    bytes: &'a [u8],
    index: usize,
    base: u64,
}

impl<'a> Binary<'a> {
    fn error(&self, at: u64, what: &'static str, expected: String) -> OffloadError {
        OffloadError {
            binary: self.index,
            binary_offset: self.base,
            offset: self.base + at,
            what,
            expected,
        }
    }

    fn u16_at(&self, at: u64) -> u16 {
        let at = at as usize;
        u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    fn u32_at(&self, at: u64) -> u32 {
        let at = at as usize;
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    fn u64_at(&self, at: u64) -> u64 {
        let at = at as usize;
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    /// Checks that `len` bytes at `at` lie within the first `size` bytes.
    fn within(
        &self,
        at: u64,
        len: u64,
        size: u64,
        field_at: u64,
        what: &'static str,
    ) -> Result<(), OffloadError> {
        if at > size || len > size - at {
            return Err(self.error(
                field_at,
                what,
                format!("{len} bytes at offset {at:#x} inside the binary's {size} bytes"),
            ));
        }
        Ok(())
    }

    /// Reads the header and entries, appending the images; returns the binary's size.
    fn read_into(&self, images: &mut Vec<Image<'a>>) -> Result<usize, OffloadError> {
        let available = self.bytes.len() as u64;
        let minimum = HEADER_SIZE + ENTRY_SIZE;
        if available < minimum {
            return Err(self.error(
                0,
                "header",
                format!("a {HEADER_SIZE}-byte header and a {ENTRY_SIZE}-byte entry, only {available} bytes left"),
            ));
        }
        if self.bytes[..4] != MAGIC {
            return Err(self.error(
                0,
                "magic",
                format!("10 ff 10 ad, found {:02x?}", &self.bytes[..4]),
            ));
        }
        let version = self.u32_at(4);
        if version == 0 || version > LATEST_VERSION {
            return Err(self.error(
                4,
                "version",
                format!("1 to {LATEST_VERSION}, found {version}"),
            ));
        }
        let size = self.u64_at(8);
        if size < minimum || size > available {
            return Err(self.error(
                8,
                "binary size",
                format!("{minimum} to {available} (the bytes left), found {size}"),
            ));
        }
        let entries_offset = self.u64_at(16);
        let count = if version == 1 { 1 } else { self.u64_at(24) };
        let table = count.saturating_mul(ENTRY_SIZE);
        if table > size - HEADER_SIZE {
            return Err(self.error(
                24,
                "entry count",
                format!(
                    "at most {} entries of {ENTRY_SIZE} bytes in the binary's {size} bytes, found {count}",
                    (size - HEADER_SIZE) / ENTRY_SIZE
                ),
            ));
        }
        self.within(entries_offset, table, size, 16, "entry table")?;
        for entry in 0..count {
            let at = entries_offset + entry * ENTRY_SIZE;
            images.push(self.entry(at, entry as usize, version, size)?);
        }
        Ok(size as usize)
    }

    fn entry(
        &self,
        at: u64,
        entry: usize,
        version: u32,
        size: u64,
    ) -> Result<Image<'a>, OffloadError> {
        let image_kind = ImageKind(self.u16_at(at));
        let offload_kind = OffloadKind(self.u16_at(at + 2));
        let flags = self.u32_at(at + 4);
        let string_offset = self.u64_at(at + 8);
        let num_strings = self.u64_at(at + 16);
        let image_offset = self.u64_at(at + 24);
        let image_size = self.u64_at(at + 32);
        self.within(image_offset, image_size, size, at + 24, "image")?;
        let pair = if version == 1 { 16 } else { 24 };
        let map = num_strings.saturating_mul(pair);
        self.within(string_offset, map, size, at + 8, "string map")?;
        // Bounded: the map lies inside the binary, `pair` bytes per string.
        let mut strings = Vec::with_capacity(num_strings as usize);
        for i in 0..num_strings {
            let pair_at = string_offset + i * pair;
            let key = self.c_string(self.u64_at(pair_at), size, pair_at, "string key")?;
            let value_offset = self.u64_at(pair_at + 8);
            let value = if version == 1 {
                self.c_string(value_offset, size, pair_at + 8, "string value")?
            } else {
                let len = self.u64_at(pair_at + 16);
                self.within(value_offset, len, size, pair_at + 8, "string value")?;
                self.utf8(value_offset, len, pair_at + 8, "string value")?
            };
            strings.push((key, value));
        }
        Ok(Image {
            binary: self.index,
            entry,
            binary_offset: self.base,
            version,
            image_kind,
            offload_kind,
            flags,
            strings,
            data: &self.bytes[image_offset as usize..(image_offset + image_size) as usize],
            offset: self.base + image_offset,
        })
    }

    /// The NUL-terminated string at `at`, inside the binary.
    fn c_string(
        &self,
        at: u64,
        size: u64,
        field_at: u64,
        what: &'static str,
    ) -> Result<&'a str, OffloadError> {
        let missing = || {
            self.error(
                field_at,
                what,
                format!(
                    "a NUL-terminated string at offset {at:#x} inside the binary's {size} bytes"
                ),
            )
        };
        if at >= size {
            return Err(missing());
        }
        let rest = &self.bytes[at as usize..size as usize];
        let len = rest.iter().position(|&b| b == 0).ok_or_else(missing)?;
        self.utf8(at, len as u64, field_at, what)
    }

    fn utf8(
        &self,
        at: u64,
        len: u64,
        field_at: u64,
        what: &'static str,
    ) -> Result<&'a str, OffloadError> {
        std::str::from_utf8(&self.bytes[at as usize..(at + len) as usize]).map_err(|e| {
            self.error(
                field_at,
                what,
                format!(
                    "UTF-8 text, found an invalid byte at offset {:#x}",
                    self.base + at + e.valid_up_to() as u64
                ),
            )
        })
    }
}

/// Appends `image` to `out` as one version-1 binary, laid out byte for byte as LLVM's
/// `OffloadBinary::write` lays it out (LLVM ≤ 22 writes every image so): the header, the
/// entry, the string map in the image's order, an ELF-style string table (a leading NUL,
/// then each distinct string once, ordered by its reversed bytes, descending, so that a
/// string that ends another is stored as that string's tail, as `StringTableBuilder`
/// does), zeros up to the 8-byte aligned image, the image, zeros up to 8 bytes. The image's
/// position fields (`binary`, `entry`, `binary_offset`, `version`, `offset`) are not
/// written: they say where it was read.
pub fn write_binary(image: &Image<'_>, out: &mut Vec<u8>) {
    let mut strings: Vec<&str> = image.strings.iter().flat_map(|(k, v)| [*k, *v]).collect();
    strings.sort_by(|a, b| b.bytes().rev().cmp(a.bytes().rev()));
    strings.dedup();
    let mut table = vec![0u8];
    let mut offsets: Vec<(&str, u64)> = Vec::with_capacity(strings.len());
    let mut previous: Option<&str> = None;
    for s in strings {
        let at = match previous {
            Some(p) if p.ends_with(s) => table.len() - s.len() - 1,
            _ => {
                let at = table.len();
                table.extend_from_slice(s.as_bytes());
                table.push(0);
                previous = Some(s);
                at
            }
        };
        offsets.push((s, at as u64));
    }
    let offset_of = |s: &str| {
        offsets
            .iter()
            .find(|(t, _)| *t == s)
            .map_or(0, |(_, at)| *at)
    };
    let map_at = HEADER_SIZE + ENTRY_SIZE;
    let table_at = map_at + 16 * image.strings.len() as u64;
    let image_at = (table_at + table.len() as u64).next_multiple_of(8);
    let size = (image_at + image.data.len() as u64).next_multiple_of(8);
    let start = out.len();
    out.reserve(size as usize);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&1u32.to_le_bytes());
    for field in [size, HEADER_SIZE, ENTRY_SIZE] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(&image.image_kind.0.to_le_bytes());
    out.extend_from_slice(&image.offload_kind.0.to_le_bytes());
    out.extend_from_slice(&image.flags.to_le_bytes());
    let entry = [
        map_at,
        image.strings.len() as u64,
        image_at,
        image.data.len() as u64,
    ];
    for field in entry {
        out.extend_from_slice(&field.to_le_bytes());
    }
    for (k, v) in &image.strings {
        out.extend_from_slice(&(table_at + offset_of(k)).to_le_bytes());
        out.extend_from_slice(&(table_at + offset_of(v)).to_le_bytes());
    }
    out.extend_from_slice(&table);
    out.resize(start + image_at as usize, 0);
    out.extend_from_slice(image.data);
    out.resize(start + size as usize, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One image to write: kinds, strings, bytes.
    struct Spec<'a> {
        image_kind: u16,
        offload_kind: u16,
        strings: &'a [(&'a str, &'a str)],
        data: &'a [u8],
    }

    /// Writes one binary as LLVM lays it out (header, entries, string map, strings, images,
    /// 8-byte padding), in `version` 1 (one image) or 2.
    fn write(version: u32, images: &[Spec<'_>]) -> Vec<u8> {
        let pair = if version == 1 { 16 } else { 24 };
        let n_strings: usize = images.iter().map(|i| i.strings.len()).sum();
        let strtab_at = 32 + 40 * images.len() + pair * n_strings;
        let mut strtab = Vec::new();
        let mut pairs = Vec::new();
        for img in images {
            for (k, v) in img.strings {
                let k_at = strtab_at + strtab.len();
                strtab.extend_from_slice(k.as_bytes());
                strtab.push(0);
                let v_at = strtab_at + strtab.len();
                strtab.extend_from_slice(v.as_bytes());
                strtab.push(0);
                pairs.push((k_at as u64, v_at as u64, v.len() as u64));
            }
        }
        let data_at = (strtab_at + strtab.len()).next_multiple_of(8);
        let total: usize = images.iter().map(|i| i.data.len()).sum();
        let size = (data_at + total).next_multiple_of(8);
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&(size as u64).to_le_bytes());
        out.extend_from_slice(&32u64.to_le_bytes());
        let fourth = if version == 1 {
            40
        } else {
            images.len() as u64
        };
        out.extend_from_slice(&fourth.to_le_bytes());
        let (mut s_at, mut i_at) = (32 + 40 * images.len(), data_at);
        for img in images {
            out.extend_from_slice(&img.image_kind.to_le_bytes());
            out.extend_from_slice(&img.offload_kind.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            for v in [
                s_at as u64,
                img.strings.len() as u64,
                i_at as u64,
                img.data.len() as u64,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            s_at += pair * img.strings.len();
            i_at += img.data.len();
        }
        for (k, v, len) in pairs {
            out.extend_from_slice(&k.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
            if version == 2 {
                out.extend_from_slice(&len.to_le_bytes());
            }
        }
        out.extend_from_slice(&strtab);
        out.resize(data_at, 0);
        for img in images {
            out.extend_from_slice(img.data);
        }
        out.resize(size, 0);
        out
    }

    fn gfx(arch: &'static str, data: &'static [u8]) -> Spec<'static> {
        Spec {
            image_kind: 1,
            offload_kind: 4,
            strings: match arch {
                "gfx900" => &[("triple", "amdgcn-amd-amdhsa"), ("arch", "gfx900")],
                _ => &[("triple", "amdgcn-amd-amdhsa"), ("arch", "gfx90a:xnack+")],
            },
            data,
        }
    }

    #[test]
    fn concatenated_version_1_binaries_read_in_order_with_absolute_offsets() {
        let mut bytes = write(1, &[gfx("gfx900", b"first image")]);
        let second_at = bytes.len() as u64;
        bytes.extend(write(1, &[gfx("gfx90a", b"second")]));
        let images = parse(&bytes, 0x1000).unwrap();
        assert_eq!(images.len(), 2);
        assert_eq!(images[0].arch(), Some("gfx900"));
        assert_eq!(images[0].data, b"first image");
        assert_eq!(images[1].arch(), Some("gfx90a:xnack+"));
        assert_eq!(images[1].triple(), Some("amdgcn-amd-amdhsa"));
        assert_eq!(images[1].binary, 1);
        assert_eq!(images[1].binary_offset, 0x1000 + second_at);
        let at = (images[1].offset - 0x1000) as usize;
        assert_eq!(&bytes[at..at + 6], b"second");
        assert_eq!(images[0].offload_kind.name(), "hip");
        assert_eq!(images[0].image_kind, ImageKind::OBJECT);
    }

    #[test]
    fn version_2_binary_holds_several_entries() {
        let bytes = write(2, &[gfx("gfx900", b"a"), gfx("gfx90a", b"bb")]);
        let images = parse(&bytes, 0).unwrap();
        assert_eq!(images.len(), 2);
        assert_eq!((images[0].entry, images[1].entry), (0, 1));
        assert_eq!(images[1].data, b"bb");
        assert_eq!(images[1].arch(), Some("gfx90a:xnack+"));
        assert_eq!(images[1].version, 2);
    }

    #[test]
    fn empty_input_holds_no_binary() {
        assert_eq!(parse(&[], 0).unwrap(), Vec::new());
    }

    fn error_of(bytes: &[u8]) -> OffloadError {
        parse(bytes, 0x100).unwrap_err()
    }

    #[test]
    fn truncated_header_names_offset_and_bytes_left() {
        let bytes = write(1, &[gfx("gfx900", b"x")]);
        let e = error_of(&bytes[..40]);
        assert_eq!((e.what, e.offset), ("header", 0x100));
        assert!(e.expected.contains("only 40 bytes left"), "{e}");
    }

    #[test]
    fn wrong_magic_and_unknown_version_are_refused() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        bytes[4] = 3;
        let e = error_of(&bytes);
        assert_eq!((e.what, e.offset), ("version", 0x104));
        bytes[4] = 1;
        bytes[0] = 0;
        assert_eq!(error_of(&bytes).what, "magic");
    }

    #[test]
    fn size_beyond_the_input_is_refused() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        let len = bytes.len() as u64;
        bytes[8..16].copy_from_slice(&(len + 8).to_le_bytes());
        let e = error_of(&bytes);
        assert_eq!((e.what, e.offset), ("binary size", 0x108));
    }

    #[test]
    fn trailing_bytes_must_start_another_binary() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        let end = bytes.len() as u64;
        bytes.extend_from_slice(&[0u8; 80]);
        let e = error_of(&bytes);
        assert_eq!((e.what, e.offset, e.binary), ("magic", 0x100 + end, 1));
    }

    #[test]
    fn huge_entry_count_is_refused_before_allocating() {
        let mut bytes = write(2, &[gfx("gfx900", b"x")]);
        bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(error_of(&bytes).what, "entry count");
    }

    #[test]
    fn image_outside_the_binary_is_refused() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        // Entry at 32: image size at +32.
        bytes[64..72].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = error_of(&bytes);
        assert_eq!((e.what, e.offset), ("image", 0x100 + 32 + 24));
    }

    #[test]
    fn huge_string_count_is_refused_before_allocating() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        bytes[48..56].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
        assert_eq!(error_of(&bytes).what, "string map");
    }

    #[test]
    fn unterminated_or_outside_strings_are_refused() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        // First string pair at 72: key offset past the binary.
        bytes[72..80].copy_from_slice(&0xffff_u64.to_le_bytes());
        let e = error_of(&bytes);
        assert_eq!((e.what, e.offset), ("string key", 0x100 + 72));
        // No NUL from the string table (at 32 + 40 + 2 * 16) to the end of the binary.
        let mut bytes = write(1, &[gfx("gfx900", b"")]);
        for b in &mut bytes[104..] {
            if *b == 0 {
                *b = b'z';
            }
        }
        assert_eq!(error_of(&bytes).what, "string key");
    }

    #[test]
    fn non_utf8_string_is_refused_with_its_offset() {
        let mut bytes = write(1, &[gfx("gfx900", b"x")]);
        let at = bytes.windows(6).position(|w| w == b"gfx900").unwrap();
        bytes[at] = 0xff;
        let e = error_of(&bytes);
        assert_eq!(e.what, "string value");
        assert!(e.expected.contains(&format!("{:#x}", 0x100 + at)), "{e}");
    }

    #[test]
    fn version_2_value_size_is_bounded_by_the_binary() {
        let mut bytes = write(2, &[gfx("gfx900", b"x")]);
        // Second pair's value size (pairs at 72, 24 bytes each).
        bytes[72 + 24 + 16..72 + 24 + 24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(error_of(&bytes).what, "string value");
    }
}
