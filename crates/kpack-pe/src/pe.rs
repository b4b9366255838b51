//! The PE32+ reader: headers, sections (long names through the COFF string table), data
//! directories, base relocations, and the PE checksum.

use std::ops::Range;

use kpack_hostbin::bytes::{record, slice};
use object::LittleEndian as LE;
use object::pe::{
    IMAGE_DOS_SIGNATURE, IMAGE_NT_OPTIONAL_HDR64_MAGIC, IMAGE_NT_SIGNATURE, ImageDataDirectory,
    ImageDosHeader, ImageFileHeader, ImageOptionalHeader64, ImageSectionHeader,
};

use crate::PeError;

/// The largest `e_lfanew` accepted (as the reference does: 1 MiB).
const MAX_LFANEW: u64 = 0x10_0000;
/// Size of the COFF file header.
const FILE_HEADER_SIZE: u64 = 20;
/// Size of the PE32+ optional header without its data directories.
const OPTIONAL_HEADER_SIZE: u64 = 112;
/// Size of one section header.
pub const SECTION_HEADER_SIZE: u64 = 40;
/// Size of one COFF symbol record (the string table follows the symbols).
const SYMBOL_SIZE: u64 = 18;
/// The most data directories a PE32+ file has.
const MAX_DATA_DIRECTORIES: u32 = 16;

#[cfg(feature = "rewrite")]
/// Data directory index of the certificate table (Authenticode signatures).
pub const DIRECTORY_SECURITY: usize = 4;
/// Data directory index of the base relocation table.
pub const DIRECTORY_BASERELOC: usize = 5;
/// Data directory index of the debug directory.
pub const DIRECTORY_DEBUG: usize = 6;
/// Base relocation type: padding.
pub const IMAGE_REL_BASED_ABSOLUTE: u16 = 0;
/// Base relocation type: a 64-bit absolute address.
pub const IMAGE_REL_BASED_DIR64: u16 = 10;

pub(crate) fn u16_at(data: &[u8], offset: u64, what: &str) -> Result<u16, PeError> {
    let b = slice(data, offset, 2, what)?;
    Ok(u16::from_le_bytes([b[0], b[1]]))
}

pub(crate) fn u32_at(data: &[u8], offset: u64, what: &str) -> Result<u32, PeError> {
    let b = slice(data, offset, 4, what)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

pub(crate) fn u64_at(data: &[u8], offset: u64, what: &str) -> Result<u64, PeError> {
    let b = slice(data, offset, 8, what)?;
    Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

#[cfg(feature = "rewrite")]
/// Rounds `value` up to a multiple of `align` (a power of two).
pub(crate) fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align.max(1)) * align.max(1)
}

/// Whether `bytes` starts like a PE image: `MZ`, then (when `e_lfanew` lies inside the file)
/// `PE\0\0` at `e_lfanew`. A file whose `e_lfanew` leads outside it still counts, so that
/// reading it reports the bad offset rather than calling it "not a binary"; an `MZ` file
/// with another signature there (NE, LE: 16-bit and VxD executables) does not.
pub fn is_pe(bytes: &[u8]) -> bool {
    if !bytes.starts_with(b"MZ") {
        return false;
    }
    let Ok(lfanew) = u32_at(bytes, 0x3c, "") else {
        return true;
    };
    match bytes.get(lfanew as usize..(lfanew as usize).saturating_add(4)) {
        Some(sig) => sig == b"PE\0\0",
        None => true,
    }
}

/// One section header, as stored (name resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Index in the section table (from 0).
    pub index: usize,
    /// The name: the 8-byte field, or the string-table entry a `/N` name refers to.
    pub name: String,
    /// File offset of the 40-byte header.
    pub header_offset: u64,
    /// `VirtualSize`.
    pub virtual_size: u32,
    /// `VirtualAddress` (an RVA).
    pub rva: u32,
    /// `SizeOfRawData`.
    pub raw_size: u32,
    /// `PointerToRawData`.
    pub raw_offset: u32,
    /// `Characteristics`.
    pub characteristics: u32,
}

impl Section {
    /// The file-backed part of the section in memory: `[rva, rva + min(raw, virtual))` (a
    /// `VirtualSize` of 0 means the raw size, as the loader treats it).
    pub fn file_backed_len(&self) -> u32 {
        if self.virtual_size == 0 {
            self.raw_size
        } else {
            self.raw_size.min(self.virtual_size)
        }
    }

    /// The section's extent in memory: `max(VirtualSize, SizeOfRawData)` unaligned.
    pub fn memory_len(&self) -> u32 {
        self.virtual_size.max(self.raw_size)
    }
}

/// A data directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataDirectory {
    /// `VirtualAddress` (a file offset for the certificate table).
    pub rva: u32,
    /// `Size`.
    pub size: u32,
}

/// One base relocation entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseRelocation {
    /// The RVA it patches.
    pub rva: u64,
    /// Its type (`IMAGE_REL_BASED_*`).
    pub kind: u16,
    /// File offset of the 16-bit entry.
    pub entry_offset: u64,
}

/// A parsed PE32+ image. Offsets are absolute in the file.
#[derive(Debug, Clone)]
pub struct PeFile<'a> {
    data: &'a [u8],
    /// `e_lfanew`: the offset of `PE\0\0`.
    pub nt_offset: u64,
    /// COFF `Machine` (0x8664 for x86-64, 0xaa64 for arm64).
    pub machine: u16,
    /// COFF `Characteristics` (`IMAGE_FILE_DLL` = 0x2000).
    pub characteristics: u16,
    /// `PointerToSymbolTable` (0 when the image has no COFF symbols).
    pub symbol_table: u32,
    /// `NumberOfSymbols`.
    pub symbol_count: u32,
    /// File offset of the optional header.
    pub optional_offset: u64,
    /// `SizeOfOptionalHeader`.
    pub optional_size: u16,
    /// `ImageBase`.
    pub image_base: u64,
    /// `SectionAlignment`.
    pub section_alignment: u32,
    /// `FileAlignment`.
    pub file_alignment: u32,
    /// `SizeOfImage`.
    pub size_of_image: u32,
    /// `SizeOfHeaders`.
    pub size_of_headers: u32,
    /// `CheckSum`.
    pub checksum: u32,
    /// `SizeOfInitializedData`.
    pub initialized_size: u32,
    /// `SizeOfUninitializedData`.
    pub uninitialized_size: u32,
    /// `DllCharacteristics`.
    pub dll_characteristics: u16,
    /// The data directories.
    pub directories: Vec<DataDirectory>,
    /// File offset of the section table.
    pub section_table_offset: u64,
    /// The sections, in table order.
    pub sections: Vec<Section>,
}

/// `IMAGE_FILE_DLL`.
pub const IMAGE_FILE_DLL: u16 = 0x2000;
/// `IMAGE_FILE_RELOCS_STRIPPED`.
pub const IMAGE_FILE_RELOCS_STRIPPED: u16 = 0x0001;

/// Offsets of the optional-header fields kpack edits, from the optional header's start.
pub(crate) mod field {
    #[cfg(feature = "rewrite")]
    pub const SIZE_OF_INITIALIZED_DATA: u64 = 8;
    #[cfg(feature = "rewrite")]
    pub const SIZE_OF_UNINITIALIZED_DATA: u64 = 12;
    #[cfg(feature = "rewrite")]
    pub const SIZE_OF_IMAGE: u64 = 56;
    #[cfg(feature = "rewrite")]
    pub const CHECKSUM: u64 = 64;
    pub const DATA_DIRECTORIES: u64 = 112;
    #[cfg(feature = "rewrite")]
    /// From the COFF file header's start (`e_lfanew + 4`).
    pub const NUMBER_OF_SECTIONS: u64 = 2;
    #[cfg(feature = "rewrite")]
    pub const POINTER_TO_SYMBOL_TABLE: u64 = 8;
    #[cfg(feature = "rewrite")]
    /// From a section header's start.
    pub const VIRTUAL_SIZE: u64 = 8;
    #[cfg(feature = "rewrite")]
    pub const SIZE_OF_RAW_DATA: u64 = 16;
    #[cfg(feature = "rewrite")]
    pub const POINTER_TO_RAW_DATA: u64 = 20;
    #[cfg(feature = "rewrite")]
    pub const CHARACTERISTICS: u64 = 36;
}

impl<'a> PeFile<'a> {
    /// Parses the headers and section table of `data`, checking every range against the file.
    pub fn parse(data: &'a [u8]) -> Result<Self, PeError> {
        if !data.starts_with(b"MZ") {
            return Err(PeError::NotMz {
                found: data.iter().take(2).copied().collect(),
            });
        }
        let dos: &ImageDosHeader = record(data, 0, "DOS header")?;
        debug_assert_eq!(dos.e_magic.get(LE), IMAGE_DOS_SIGNATURE);
        let nt_offset = u64::from(dos.e_lfanew.get(LE));
        let limit = MAX_LFANEW.min(data.len() as u64);
        if nt_offset < 0x40 || nt_offset.saturating_add(4 + FILE_HEADER_SIZE) > data.len() as u64 {
            return Err(PeError::BadLfanew {
                e_lfanew: nt_offset,
                limit,
                file_len: data.len() as u64,
            });
        }
        if nt_offset >= MAX_LFANEW {
            return Err(PeError::BadLfanew {
                e_lfanew: nt_offset,
                limit,
                file_len: data.len() as u64,
            });
        }
        let signature = u32_at(data, nt_offset, "PE signature")?;
        if signature != IMAGE_NT_SIGNATURE {
            return Err(PeError::NotPe {
                offset: nt_offset,
                found: slice(data, nt_offset, 4, "PE signature")?.to_vec(),
            });
        }
        let file_offset = nt_offset + 4;
        let file: &ImageFileHeader = record(data, file_offset, "COFF file header")?;
        let optional_offset = file_offset + FILE_HEADER_SIZE;
        let optional_size = file.size_of_optional_header.get(LE);
        let magic = u16_at(data, optional_offset, "optional header magic")?;
        if magic != IMAGE_NT_OPTIONAL_HDR64_MAGIC {
            return Err(PeError::BadField {
                header: "optional header",
                offset: optional_offset,
                field: "Magic",
                found: magic.into(),
                expected: "0x20b (PE32+; 32-bit PE32 images are not supported)",
            });
        }
        if u64::from(optional_size) < OPTIONAL_HEADER_SIZE {
            return Err(PeError::BadField {
                header: "COFF file header",
                offset: file_offset + 16,
                field: "SizeOfOptionalHeader",
                found: optional_size.into(),
                expected: "at least 0x70 (the PE32+ optional header)",
            });
        }
        let opt: &ImageOptionalHeader64 = record(data, optional_offset, "optional header")?;
        let dir_count = opt.number_of_rva_and_sizes.get(LE);
        let dirs_room = (u64::from(optional_size) - OPTIONAL_HEADER_SIZE) / 8;
        if dir_count > MAX_DATA_DIRECTORIES || u64::from(dir_count) > dirs_room {
            return Err(PeError::BadField {
                header: "optional header",
                offset: optional_offset + 108,
                field: "NumberOfRvaAndSizes",
                found: dir_count.into(),
                expected: "at most 16, within SizeOfOptionalHeader",
            });
        }
        let dirs_offset = optional_offset + field::DATA_DIRECTORIES;
        let directories = (0..u64::from(dir_count))
            .map(|i| {
                let d: &ImageDataDirectory = record(data, dirs_offset + 8 * i, "data directory")?;
                Ok(DataDirectory {
                    rva: d.virtual_address.get(LE),
                    size: d.size.get(LE),
                })
            })
            .collect::<Result<Vec<_>, PeError>>()?;
        let section_alignment = opt.section_alignment.get(LE);
        let file_alignment = opt.file_alignment.get(LE);
        if !file_alignment.is_power_of_two() || file_alignment > 0x1_0000 {
            return Err(PeError::BadField {
                header: "optional header",
                offset: optional_offset + 36,
                field: "FileAlignment",
                found: file_alignment.into(),
                expected: "a power of two up to 0x10000",
            });
        }
        if !section_alignment.is_power_of_two() || section_alignment < file_alignment {
            return Err(PeError::BadField {
                header: "optional header",
                offset: optional_offset + 32,
                field: "SectionAlignment",
                found: section_alignment.into(),
                expected: "a power of two no smaller than FileAlignment",
            });
        }
        let section_table_offset = optional_offset + u64::from(optional_size);
        let count = u64::from(file.number_of_sections.get(LE));
        slice(
            data,
            section_table_offset,
            count * SECTION_HEADER_SIZE,
            "section table",
        )?;
        let symbol_table = file.pointer_to_symbol_table.get(LE);
        let symbol_count = file.number_of_symbols.get(LE);
        let strings = string_table(data, symbol_table, symbol_count)?;
        let sections = (0..count)
            .map(|i| {
                let header_offset = section_table_offset + i * SECTION_HEADER_SIZE;
                let h: &ImageSectionHeader = record(data, header_offset, "section header")?;
                read_section(data, i as usize, header_offset, h, strings)
            })
            .collect::<Result<Vec<_>, PeError>>()?;
        Ok(PeFile {
            data,
            nt_offset,
            machine: file.machine.get(LE),
            characteristics: file.characteristics.get(LE),
            symbol_table,
            symbol_count,
            optional_offset,
            optional_size,
            image_base: opt.image_base.get(LE),
            section_alignment,
            file_alignment,
            size_of_image: opt.size_of_image.get(LE),
            size_of_headers: opt.size_of_headers.get(LE),
            checksum: opt.check_sum.get(LE),
            initialized_size: opt.size_of_initialized_data.get(LE),
            uninitialized_size: opt.size_of_uninitialized_data.get(LE),
            dll_characteristics: opt.dll_characteristics.get(LE),
            directories,
            section_table_offset,
            sections,
        })
    }

    /// The whole file.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Whether the image is a DLL.
    pub fn is_dll(&self) -> bool {
        self.characteristics & IMAGE_FILE_DLL != 0
    }

    /// The file bytes of the COFF symbol table and the string table after it, if the image
    /// keeps them (mingw GNU ld does, after the sections).
    pub fn coff_symbols(&self) -> Result<Option<Range<u64>>, PeError> {
        let strings = string_table(self.data, self.symbol_table, self.symbol_count)?;
        Ok(strings.map(|strings| {
            let start = u64::from(self.symbol_table);
            start..start + u64::from(self.symbol_count) * SYMBOL_SIZE + strings.len() as u64
        }))
    }

    /// The first section named `name`.
    pub fn section_by_name(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The data directory `index`, when present and non-empty.
    pub fn directory(&self, index: usize) -> Option<DataDirectory> {
        self.directories
            .get(index)
            .copied()
            .filter(|d| d.rva != 0 || d.size != 0)
    }

    /// The file bytes of a section (`SizeOfRawData` bytes at `PointerToRawData`).
    pub fn section_data(&self, s: &Section) -> &'a [u8] {
        // Parsing checked the range.
        let start = s.raw_offset as usize;
        self.data
            .get(start..start + s.raw_size as usize)
            .unwrap_or(&[])
    }

    /// The section whose memory image holds `[rva, rva + len)`.
    pub fn section_at_rva(&self, rva: u64, len: u64) -> Option<&Section> {
        self.sections.iter().find(|s| {
            let start = u64::from(s.rva);
            rva >= start
                && rva
                    .checked_add(len)
                    .is_some_and(|end| end <= start + u64::from(s.memory_len()))
        })
    }

    /// The file offset of `[rva, rva + len)`, when it lies in one section's file bytes.
    pub fn rva_to_offset(&self, rva: u64, len: u64) -> Option<u64> {
        self.sections.iter().find_map(|s| {
            let rel = rva.checked_sub(u64::from(s.rva))?;
            (rel.checked_add(len)? <= u64::from(s.file_backed_len()))
                .then(|| u64::from(s.raw_offset) + rel)
        })
    }

    /// The data directory `index` and its file offset, when present; an error names `what`
    /// when its RVA range is not in one section's file bytes.
    fn directory_in_file(
        &self,
        index: usize,
        what: &str,
    ) -> Result<Option<(u64, DataDirectory)>, PeError> {
        let Some(dir) = self.directory(index) else {
            return Ok(None);
        };
        let offset = self
            .rva_to_offset(dir.rva.into(), dir.size.into())
            .ok_or_else(|| PeError::UnmappedRva {
                what: what.into(),
                rva: dir.rva.into(),
                len: dir.size.into(),
            })?;
        Ok(Some((offset, dir)))
    }

    /// Every base relocation (in table order, `IMAGE_REL_BASED_ABSOLUTE` padding skipped).
    pub fn base_relocations(&self) -> Result<Vec<BaseRelocation>, PeError> {
        let Some((table_offset, dir)) =
            self.directory_in_file(DIRECTORY_BASERELOC, "base relocation table")?
        else {
            return Ok(Vec::new());
        };
        let table = slice(self.data, table_offset, dir.size.into(), "base relocations")?;
        let mut out = Vec::new();
        let mut at = 0usize;
        while at + 8 <= table.len() {
            let offset = table_offset + at as u64;
            let page = u32_at(table, at as u64, "")?;
            let size = u32_at(table, at as u64 + 4, "")? as usize;
            if size < 8 || !size.is_multiple_of(2) || size > table.len() - at {
                return Err(PeError::BaseRelocation {
                    offset,
                    problem: format!(
                        "SizeOfBlock is {size:#x}, expected an even size from 8 up to the {:#x} bytes left in the table",
                        table.len() - at
                    ),
                });
            }
            for e in (at + 8..at + size).step_by(2) {
                let entry = u16_at(table, e as u64, "")?;
                let kind = entry >> 12;
                if kind == IMAGE_REL_BASED_ABSOLUTE {
                    continue;
                }
                out.push(BaseRelocation {
                    rva: u64::from(page) + u64::from(entry & 0xfff),
                    kind,
                    entry_offset: table_offset + e as u64,
                });
            }
            at += size;
        }
        Ok(out)
    }

    /// File offsets of the `PointerToRawData` fields of the debug directory's entries (file
    /// offsets the rewrite must move with the data).
    pub fn debug_data_pointers(&self) -> Result<Vec<u64>, PeError> {
        const ENTRY: u64 = 28;
        let Some((offset, dir)) = self.directory_in_file(DIRECTORY_DEBUG, "debug directory")?
        else {
            return Ok(Vec::new());
        };
        Ok((0..u64::from(dir.size) / ENTRY)
            .map(|i| offset + i * ENTRY + 24)
            .collect())
    }
}

/// The COFF string table after the symbols, if the image keeps one.
fn string_table(data: &[u8], symbols: u32, count: u32) -> Result<Option<&[u8]>, PeError> {
    if symbols == 0 {
        return Ok(None);
    }
    let offset = u64::from(symbols) + u64::from(count) * SYMBOL_SIZE;
    let size = u32_at(data, offset, "COFF string table size")?;
    if size < 4 {
        return Err(PeError::BadField {
            header: "COFF string table",
            offset,
            field: "size",
            found: size.into(),
            expected: "at least 4 (the size field itself)",
        });
    }
    Ok(Some(slice(data, offset, size.into(), "COFF string table")?))
}

fn read_section(
    data: &[u8],
    index: usize,
    header_offset: u64,
    h: &ImageSectionHeader,
    strings: Option<&[u8]>,
) -> Result<Section, PeError> {
    let raw_name = &h.name;
    let short =
        String::from_utf8_lossy(&raw_name[..raw_name.iter().position(|&b| b == 0).unwrap_or(8)])
            .into_owned();
    let problem = |problem: String| PeError::Section {
        index,
        name: short.clone(),
        header_offset,
        problem,
    };
    let name = match short.strip_prefix('/') {
        // `/N`: the name is at decimal offset N of the string table (mingw GNU ld keeps the
        // long names .hip_fatbin and .hipFatBinSegment this way).
        Some(digits) if !digits.starts_with('/') => {
            let at: u64 = digits
                .parse()
                .map_err(|_| problem(format!("name {short:?} is not /<decimal offset>")))?;
            let table = strings.ok_or_else(|| {
                problem("a long name, but the image has no COFF string table".into())
            })?;
            let rest = table
                .get(at as usize..)
                .filter(|_| at >= 4)
                .ok_or_else(|| {
                    problem(format!(
                        "name offset {at:#x} lies outside the {:#x}-byte string table",
                        table.len()
                    ))
                })?;
            let end = rest.iter().position(|&b| b == 0).ok_or_else(|| {
                problem(format!(
                    "the name at string table offset {at:#x} has no NUL"
                ))
            })?;
            String::from_utf8_lossy(&rest[..end]).into_owned()
        }
        _ => short.clone(),
    };
    let s = Section {
        index,
        name,
        header_offset,
        virtual_size: h.virtual_size.get(LE),
        rva: h.virtual_address.get(LE),
        raw_size: h.size_of_raw_data.get(LE),
        raw_offset: h.pointer_to_raw_data.get(LE),
        characteristics: h.characteristics.get(LE),
    };
    if s.raw_size != 0 {
        let end = u64::from(s.raw_offset) + u64::from(s.raw_size);
        if end > data.len() as u64 {
            return Err(PeError::Section {
                index,
                name: s.name,
                header_offset,
                problem: format!(
                    "raw data {:#x}..{end:#x} (PointerToRawData + SizeOfRawData) lies beyond the end of the file ({:#x} bytes)",
                    s.raw_offset,
                    data.len()
                ),
            });
        }
    }
    Ok(s)
}

/// The PE image checksum (`CheckSum`), computed over a file streamed in pieces: the 16-bit
/// one's-complement-style sum of `ImageHlp`'s `CheckSumMappedFile`, with the `CheckSum`
/// field read as zero, plus the file length.
#[derive(Debug, Default, Clone)]
pub struct Checksum {
    sum: u64,
    pending: Option<u8>,
    len: u64,
}

impl Checksum {
    /// Adds the next bytes of the file (the `CheckSum` field must be zero in them).
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if let Some(low) = self.pending.take() {
            match bytes.split_first() {
                Some((&high, rest)) => {
                    self.add(u16::from_le_bytes([low, high]));
                    bytes = rest;
                }
                None => {
                    self.pending = Some(low);
                    return;
                }
            }
        }
        let mut words = bytes.chunks_exact(2);
        for w in &mut words {
            self.add(u16::from_le_bytes([w[0], w[1]]));
        }
        self.pending = words.remainder().first().copied();
    }

    fn add(&mut self, word: u16) {
        self.sum += u64::from(word);
        self.sum = (self.sum & 0xffff) + (self.sum >> 16);
    }

    /// The checksum of everything added.
    pub fn finish(mut self) -> u32 {
        if let Some(low) = self.pending.take() {
            self.add(u16::from(low));
        }
        let folded = (self.sum & 0xffff) + (self.sum >> 16);
        (folded as u32 & 0xffff).wrapping_add(self.len as u32)
    }
}

/// The checksum of a whole file held in memory, its `CheckSum` field at `field_offset`.
pub fn checksum_of(data: &[u8], field_offset: u64) -> u32 {
    let mut c = Checksum::default();
    let at = (field_offset as usize).min(data.len());
    let end = (at + 4).min(data.len());
    c.update(&data[..at]);
    c.update(&[0u8; 4][..end - at]);
    c.update(&data[end..]);
    c.finish()
}
