//! A strict ELF64 little-endian parser over a byte slice.
//!
//! Parsing validates the ELF header, the program header table, the section header
//! table, every section name and the file range of every section and segment, so that
//! later accessors only fail on content they decode (symbols, relocations, dynamic
//! entries). Raw header fields are kept unchanged so that a rewriter can reproduce
//! them exactly.

use crate::ElfError;
use crate::bytes::{Record, c_str, slice};
use crate::consts::*;
use crate::relr;

/// The ELF header, fields as stored (`e_phnum`/`e_shnum`/`e_shstrndx` before
/// extended-numbering resolution; see [`ElfFile::program_headers`] and
/// [`ElfFile::section_headers`] for the resolved tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfHeader {
    pub ident: [u8; 16],
    pub e_type: u16,
    pub e_machine: u16,
    pub e_version: u32,
    pub e_entry: u64,
    pub e_phoff: u64,
    pub e_shoff: u64,
    pub e_flags: u32,
    pub e_ehsize: u16,
    pub e_phentsize: u16,
    pub e_phnum: u16,
    pub e_shentsize: u16,
    pub e_shnum: u16,
    pub e_shstrndx: u16,
}

/// One program header, with its position in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramHeader {
    pub index: usize,
    pub p_type: u32,
    pub p_flags: u32,
    pub p_offset: u64,
    pub p_vaddr: u64,
    pub p_paddr: u64,
    pub p_filesz: u64,
    pub p_memsz: u64,
    pub p_align: u64,
}

impl ProgramHeader {
    /// Whether `vaddr` lies in `[p_vaddr, p_vaddr + p_memsz)`.
    pub fn contains_vaddr(&self, vaddr: u64) -> bool {
        vaddr
            .checked_sub(self.p_vaddr)
            .is_some_and(|delta| delta < self.p_memsz)
    }
}

/// One section header, with its position in the table and its resolved name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionHeader {
    pub index: usize,
    /// The name from the section name string table (lossy UTF-8; empty without one).
    pub name: String,
    pub sh_name: u32,
    pub sh_type: u32,
    pub sh_flags: u64,
    pub sh_addr: u64,
    pub sh_offset: u64,
    pub sh_size: u64,
    pub sh_link: u32,
    pub sh_info: u32,
    pub sh_addralign: u64,
    pub sh_entsize: u64,
}

impl SectionHeader {
    /// Whether the section occupies file bytes (not `SHT_NOBITS`, not `SHT_NULL`).
    pub fn has_file_data(&self) -> bool {
        self.sh_type != SHT_NOBITS && self.sh_type != SHT_NULL
    }
}

/// A symbol table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Index in its symbol table.
    pub index: u64,
    /// The name (lossy UTF-8). Section symbols (`STT_SECTION`) have no name of
    /// their own and get the name of their section, as `readelf -r` prints them.
    pub name: String,
    pub st_name: u32,
    pub st_info: u8,
    pub st_other: u8,
    pub st_shndx: u16,
    pub st_value: u64,
    pub st_size: u64,
}

impl Symbol {
    pub fn symbol_type(&self) -> u8 {
        self.st_info & 0xf
    }
    pub fn binding(&self) -> u8 {
        self.st_info >> 4
    }
}

/// One `Elf64_Dyn` entry of the dynamic section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynEntry {
    /// File offset of the entry.
    pub offset: u64,
    pub tag: u64,
    pub val: u64,
}

/// One `Elf64_Rela` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rela {
    pub r_offset: u64,
    pub r_sym: u32,
    pub r_type: u32,
    pub r_addend: i64,
}

/// One `Elf64_Rel` entry (the addend is the value stored at `r_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rel {
    pub r_offset: u64,
    pub r_sym: u32,
    pub r_type: u32,
}

/// One address relocated by an `SHT_RELR` section (a relative relocation whose
/// addend is the value stored at `r_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelrEntry {
    /// The index of the RELR word (address or bitmap) that produced this address.
    pub word_index: usize,
    pub r_offset: u64,
}

/// The decoded entries of a relocation section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelocationEntries {
    Rela(Vec<Rela>),
    Rel(Vec<Rel>),
    Relr(Vec<RelrEntry>),
}

/// A relocation section (`SHT_RELA`, `SHT_REL` or `SHT_RELR`) and its entries.
/// For `Rela`/`Rel`, entry `i` is at file offset `header.sh_offset + i * sh_entsize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocationSection {
    pub header: SectionHeader,
    pub entries: RelocationEntries,
}

/// How a relocation type computes the relocated value, per machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelocKind {
    /// `B + A` (`R_X86_64_RELATIVE`, `R_AARCH64_RELATIVE`).
    Relative,
    /// `S + A`, 64 bits (`R_X86_64_64`, `R_AARCH64_ABS64`).
    Absolute64,
    /// Anything else; listed as-is, never interpreted.
    Other,
}

/// Classifies `r_type` for `e_machine`.
pub fn reloc_kind(machine: u16, r_type: u32) -> RelocKind {
    match (machine, r_type) {
        (EM_X86_64, R_X86_64_RELATIVE) | (EM_AARCH64, R_AARCH64_RELATIVE) => RelocKind::Relative,
        (EM_X86_64, R_X86_64_64) | (EM_AARCH64, R_AARCH64_ABS64) => RelocKind::Absolute64,
        _ => RelocKind::Other,
    }
}

/// Whether `data` starts with the ELF magic.
pub fn is_elf(data: &[u8]) -> bool {
    data.starts_with(&ELFMAG)
}

/// A parsed, validated view of an ELF64 little-endian file.
#[derive(Debug, Clone)]
pub struct ElfFile<'a> {
    data: &'a [u8],
    header: ElfHeader,
    phdrs: Vec<ProgramHeader>,
    shdrs: Vec<SectionHeader>,
    shstrndx: Option<usize>,
}

impl<'a> ElfFile<'a> {
    /// Parses and validates headers, tables, section names and file ranges.
    pub fn parse(data: &'a [u8]) -> Result<Self, ElfError> {
        let header = parse_header(data)?;
        let shdr_table = read_section_table(data, &header)?;
        let phnum = resolve_phnum(&header, &shdr_table)?;
        let phdrs = read_program_table(data, &header, phnum)?;
        let shstrndx = resolve_shstrndx(&header, &shdr_table)?;
        let shdrs = name_sections(data, shdr_table, shstrndx)?;
        let file = ElfFile {
            data,
            header,
            phdrs,
            shdrs,
            shstrndx,
        };
        file.validate_ranges()?;
        Ok(file)
    }

    /// The whole file.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    pub fn header(&self) -> &ElfHeader {
        &self.header
    }

    /// All program headers (count resolved through `PN_XNUM` if needed).
    pub fn program_headers(&self) -> &[ProgramHeader] {
        &self.phdrs
    }

    /// All section headers (count resolved through section 0 if `e_shnum` is 0),
    /// including the null section 0.
    pub fn section_headers(&self) -> &[SectionHeader] {
        &self.shdrs
    }

    /// The index of the section name string table, if any.
    pub fn shstrndx(&self) -> Option<usize> {
        self.shstrndx
    }

    /// The first section with this name.
    pub fn section_by_name(&self, name: &str) -> Option<&SectionHeader> {
        self.shdrs.iter().find(|s| s.name == name)
    }

    /// The file bytes of a section; empty for `SHT_NOBITS`/`SHT_NULL`.
    pub fn section_data(&self, section: &SectionHeader) -> Result<&'a [u8], ElfError> {
        if !section.has_file_data() {
            return Ok(&[]);
        }
        slice(
            self.data,
            section.sh_offset,
            section.sh_size,
            &section_label(section),
        )
    }

    /// The file bytes of a segment (`p_filesz` bytes at `p_offset`).
    pub fn segment_data(&self, segment: &ProgramHeader) -> Result<&'a [u8], ElfError> {
        slice(
            self.data,
            segment.p_offset,
            segment.p_filesz,
            &format!("program header {}", segment.index),
        )
    }

    /// The file offset holding `vaddr`, through the first `PT_LOAD` whose
    /// `[p_vaddr, p_vaddr + p_memsz)` contains it. `None` if no segment contains it
    /// or if it falls in the zero-filled `p_memsz` tail beyond `p_filesz`.
    pub fn vaddr_to_offset(&self, vaddr: u64) -> Option<u64> {
        let load = self.load_segment_for_vaddr(vaddr)?;
        let delta = vaddr - load.p_vaddr;
        (delta < load.p_filesz).then(|| load.p_offset + delta)
    }

    /// The first `PT_LOAD` whose memory range contains `vaddr`.
    pub fn load_segment_for_vaddr(&self, vaddr: u64) -> Option<&ProgramHeader> {
        self.phdrs
            .iter()
            .find(|p| p.p_type == PT_LOAD && p.contains_vaddr(vaddr))
    }

    /// The virtual address at which file offset `offset` is mapped, through the
    /// first `PT_LOAD` whose `[p_offset, p_offset + p_filesz)` contains it.
    pub fn offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        self.phdrs.iter().find_map(|p| {
            let delta = offset.checked_sub(p.p_offset)?;
            (p.p_type == PT_LOAD && delta < p.p_filesz).then(|| p.p_vaddr.wrapping_add(delta))
        })
    }

    /// All symbols of a `SHT_SYMTAB`/`SHT_DYNSYM` section.
    pub fn symbols(&self, symtab: &SectionHeader) -> Result<Vec<Symbol>, ElfError> {
        let count = self.symbol_count(symtab)?;
        (0..count).map(|i| self.symbol(symtab, i)).collect()
    }

    /// Symbol `index` of a `SHT_SYMTAB`/`SHT_DYNSYM` section.
    pub fn symbol(&self, symtab: &SectionHeader, index: u64) -> Result<Symbol, ElfError> {
        let count = self.symbol_count(symtab)?;
        if index >= count {
            return Err(ElfError::BadSymbolIndex {
                section: symtab.index,
                name: symtab.name.clone(),
                index,
                count,
            });
        }
        let what = format!("symbol {index} of {}", section_label(symtab));
        let rec = Record(slice(
            self.data,
            symtab.sh_offset + index * SYM_SIZE,
            SYM_SIZE,
            &what,
        )?);
        let st_name = rec.u32(0);
        let st_info = rec.u8(4);
        let st_shndx = rec.u16(6);
        let strtab = self.linked_section(symtab, &what)?;
        let name = if st_name == 0 && st_info & 0xf == STT_SECTION {
            self.shdrs
                .get(usize::from(st_shndx))
                .map(|s| s.name.clone())
                .unwrap_or_default()
        } else {
            self.string(strtab, u64::from(st_name), &what)?
        };
        Ok(Symbol {
            index,
            name,
            st_name,
            st_info,
            st_other: rec.u8(5),
            st_shndx,
            st_value: rec.u64(8),
            st_size: rec.u64(16),
        })
    }

    /// The first symbol named `name`, searched in `.symtab` (`SHT_SYMTAB`) sections
    /// first, then in `SHT_DYNSYM` sections.
    pub fn find_symbol(&self, name: &str) -> Result<Option<Symbol>, ElfError> {
        for sh_type in [SHT_SYMTAB, SHT_DYNSYM] {
            for table in self.shdrs.iter().filter(|s| s.sh_type == sh_type) {
                for i in 0..self.symbol_count(table)? {
                    let sym = self.symbol(table, i)?;
                    if sym.name == name {
                        return Ok(Some(sym));
                    }
                }
            }
        }
        Ok(None)
    }

    /// The address of a symbol as the linker sees it: `st_value` for `SHN_ABS` and
    /// in linked files; section address + `st_value` in relocatable objects.
    /// `None` for undefined, common and other reserved-index symbols.
    pub fn symbol_address(&self, sym: &Symbol) -> Result<Option<u64>, ElfError> {
        match sym.st_shndx {
            SHN_ABS => Ok(Some(sym.st_value)),
            SHN_UNDEF => Ok(None),
            shndx if shndx >= SHN_LORESERVE => Ok(None),
            shndx if self.header.e_type == ET_REL => {
                let section = self.section(u64::from(shndx), &format!("symbol {}", sym.name))?;
                Ok(Some(section.sh_addr.wrapping_add(sym.st_value)))
            }
            _ => Ok(Some(sym.st_value)),
        }
    }

    /// The dynamic section: the `SHT_DYNAMIC` section if there is one, else the
    /// `PT_DYNAMIC` segment; entries up to and excluding the first `DT_NULL`.
    pub fn dynamic(&self) -> Result<Vec<DynEntry>, ElfError> {
        let (offset, bytes) =
            if let Some(sec) = self.shdrs.iter().find(|s| s.sh_type == SHT_DYNAMIC) {
                self.check_table(sec, DYN_SIZE)?;
                (sec.sh_offset, self.section_data(sec)?)
            } else if let Some(seg) = self.phdrs.iter().find(|p| p.p_type == PT_DYNAMIC) {
                (seg.p_offset, self.segment_data(seg)?)
            } else {
                return Ok(Vec::new());
            };
        let mut entries = Vec::new();
        for (i, chunk) in bytes.chunks_exact(DYN_SIZE as usize).enumerate() {
            let rec = Record(chunk);
            let tag = rec.u64(0);
            if tag == DT_NULL {
                break;
            }
            entries.push(DynEntry {
                offset: offset + i as u64 * DYN_SIZE,
                tag,
                val: rec.u64(8),
            });
        }
        Ok(entries)
    }

    /// Every `SHT_RELA`, `SHT_REL` and `SHT_RELR` section, decoded, in section order.
    pub fn relocations(&self) -> Result<Vec<RelocationSection>, ElfError> {
        self.shdrs
            .iter()
            .filter(|s| matches!(s.sh_type, SHT_RELA | SHT_REL | SHT_RELR))
            .map(|s| self.relocation_section(s))
            .collect()
    }

    /// Decodes one relocation section (`sh_entsize` must be the standard size).
    pub fn relocation_section(
        &self,
        section: &SectionHeader,
    ) -> Result<RelocationSection, ElfError> {
        let entsize = match section.sh_type {
            SHT_RELA => RELA_SIZE,
            SHT_REL => REL_SIZE,
            SHT_RELR => RELR_SIZE,
            found => {
                return Err(ElfError::BadSectionType {
                    index: section.index,
                    name: section.name.clone(),
                    found,
                    expected: "SHT_RELA, SHT_REL or SHT_RELR",
                });
            }
        };
        self.check_table(section, entsize)?;
        let bytes = self.section_data(section)?;
        let records = bytes.chunks_exact(entsize as usize).map(Record);
        let entries = match section.sh_type {
            SHT_RELA => RelocationEntries::Rela(
                records
                    .map(|r| {
                        let info = r.u64(8);
                        Rela {
                            r_offset: r.u64(0),
                            r_sym: (info >> 32) as u32,
                            r_type: info as u32,
                            r_addend: r.u64(16) as i64,
                        }
                    })
                    .collect(),
            ),
            SHT_REL => RelocationEntries::Rel(
                records
                    .map(|r| {
                        let info = r.u64(8);
                        Rel {
                            r_offset: r.u64(0),
                            r_sym: (info >> 32) as u32,
                            r_type: info as u32,
                        }
                    })
                    .collect(),
            ),
            _ => {
                let words: Vec<u64> = records.map(|r| r.u64(0)).collect();
                let decoded = relr::decode(&words).map_err(|source| ElfError::Relr {
                    section: section.index,
                    name: section.name.clone(),
                    offset: section.sh_offset + source.word_index() as u64 * RELR_SIZE,
                    source,
                })?;
                RelocationEntries::Relr(decoded)
            }
        };
        Ok(RelocationSection {
            header: section.clone(),
            entries,
        })
    }

    /// Section `index`, or an error naming `what` referred to it.
    pub fn section(&self, index: u64, what: &str) -> Result<&SectionHeader, ElfError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.shdrs.get(i))
            .ok_or_else(|| ElfError::BadSectionIndex {
                what: what.to_string(),
                index,
                count: self.shdrs.len(),
            })
    }

    fn linked_section(
        &self,
        section: &SectionHeader,
        what: &str,
    ) -> Result<&SectionHeader, ElfError> {
        self.section(
            u64::from(section.sh_link),
            &format!("sh_link of {} (for {what})", section_label(section)),
        )
    }

    fn string(&self, strtab: &SectionHeader, index: u64, what: &str) -> Result<String, ElfError> {
        let table = self.section_data(strtab)?;
        c_str(table, index)
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .ok_or_else(|| ElfError::BadString {
                table: strtab.index,
                table_offset: strtab.sh_offset,
                index,
                size: strtab.sh_size,
                what: what.to_string(),
            })
    }

    fn symbol_count(&self, symtab: &SectionHeader) -> Result<u64, ElfError> {
        if !matches!(symtab.sh_type, SHT_SYMTAB | SHT_DYNSYM) {
            return Err(ElfError::BadSectionType {
                index: symtab.index,
                name: symtab.name.clone(),
                found: symtab.sh_type,
                expected: "SHT_SYMTAB or SHT_DYNSYM",
            });
        }
        self.check_table(symtab, SYM_SIZE)?;
        Ok(symtab.sh_size / SYM_SIZE)
    }

    /// A table section must have the standard entry size and a whole number of
    /// entries; its file range was validated at parse time.
    fn check_table(&self, section: &SectionHeader, entsize: u64) -> Result<(), ElfError> {
        if section.sh_entsize != entsize {
            return Err(ElfError::BadEntsize {
                index: section.index,
                name: section.name.clone(),
                offset: section.sh_offset,
                found: section.sh_entsize,
                expected: entsize,
            });
        }
        if !section.sh_size.is_multiple_of(entsize) {
            return Err(ElfError::SizeNotMultiple {
                index: section.index,
                name: section.name.clone(),
                offset: section.sh_offset,
                size: section.sh_size,
                entsize,
            });
        }
        Ok(())
    }

    fn validate_ranges(&self) -> Result<(), ElfError> {
        for section in &self.shdrs {
            self.section_data(section)?;
        }
        for segment in &self.phdrs {
            self.segment_data(segment)?;
        }
        Ok(())
    }
}

pub(crate) fn section_label(section: &SectionHeader) -> String {
    format!("section [{}] {}", section.index, section.name)
}

fn parse_header(data: &[u8]) -> Result<ElfHeader, ElfError> {
    if !is_elf(data) {
        return Err(ElfError::NotElf {
            found: data.iter().take(4).copied().collect(),
        });
    }
    match data.get(4).copied() {
        Some(ELFCLASS64) => {}
        Some(ELFCLASS32) => return Err(ElfError::Elf32),
        Some(other) => return Err(ElfError::InvalidClass(other)),
        None => {}
    }
    match data.get(5).copied() {
        Some(ELFDATA2LSB) => {}
        Some(ELFDATA2MSB) => return Err(ElfError::BigEndian),
        Some(other) => return Err(ElfError::InvalidDataEncoding(other)),
        None => {}
    }
    let rec = Record(slice(data, 0, EHDR_SIZE, "ELF header")?);
    let mut ident = [0u8; 16];
    ident.copy_from_slice(&rec.0[..16]);
    Ok(ElfHeader {
        ident,
        e_type: rec.u16(16),
        e_machine: rec.u16(18),
        e_version: rec.u32(20),
        e_entry: rec.u64(24),
        e_phoff: rec.u64(32),
        e_shoff: rec.u64(40),
        e_flags: rec.u32(48),
        e_ehsize: rec.u16(52),
        e_phentsize: rec.u16(54),
        e_phnum: rec.u16(56),
        e_shentsize: rec.u16(58),
        e_shnum: rec.u16(60),
        e_shstrndx: rec.u16(62),
    })
}

fn bad_field(field: &'static str, found: u64, expected: &'static str) -> ElfError {
    ElfError::BadHeaderField {
        offset: 0,
        field,
        found,
        expected,
    }
}

/// Section headers without names yet (names need `e_shstrndx`, which may itself
/// live in section 0).
fn read_section_table(data: &[u8], header: &ElfHeader) -> Result<Vec<SectionHeader>, ElfError> {
    if header.e_shoff == 0 {
        if header.e_shnum != 0 {
            return Err(bad_field(
                "e_shnum",
                header.e_shnum.into(),
                "0 when e_shoff is 0",
            ));
        }
        return Ok(Vec::new());
    }
    if u64::from(header.e_shentsize) != SHDR_SIZE {
        return Err(bad_field("e_shentsize", header.e_shentsize.into(), "64"));
    }
    let first = read_shdr(data, header.e_shoff, 0)?;
    // Extended numbering: with e_shnum == 0 the count is section 0's sh_size.
    let count = if header.e_shnum == 0 {
        first.sh_size
    } else {
        u64::from(header.e_shnum)
    };
    let table_len = count
        .checked_mul(SHDR_SIZE)
        .ok_or_else(|| bad_field("section count", count, "a table that fits in the file"))?;
    slice(data, header.e_shoff, table_len, "section header table")?;
    (0..count)
        .map(|i| read_shdr(data, header.e_shoff + i * SHDR_SIZE, i as usize))
        .collect()
}

fn read_shdr(data: &[u8], offset: u64, index: usize) -> Result<SectionHeader, ElfError> {
    let rec = Record(slice(
        data,
        offset,
        SHDR_SIZE,
        &format!("section header {index}"),
    )?);
    Ok(SectionHeader {
        index,
        name: String::new(),
        sh_name: rec.u32(0),
        sh_type: rec.u32(4),
        sh_flags: rec.u64(8),
        sh_addr: rec.u64(16),
        sh_offset: rec.u64(24),
        sh_size: rec.u64(32),
        sh_link: rec.u32(40),
        sh_info: rec.u32(44),
        sh_addralign: rec.u64(48),
        sh_entsize: rec.u64(56),
    })
}

fn resolve_phnum(header: &ElfHeader, shdrs: &[SectionHeader]) -> Result<u64, ElfError> {
    if header.e_phnum != PN_XNUM {
        return Ok(header.e_phnum.into());
    }
    shdrs
        .first()
        .map(|s| u64::from(s.sh_info))
        .ok_or_else(|| bad_field("e_phnum", PN_XNUM.into(), "PN_XNUM only with a section 0"))
}

fn read_program_table(
    data: &[u8],
    header: &ElfHeader,
    count: u64,
) -> Result<Vec<ProgramHeader>, ElfError> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if u64::from(header.e_phentsize) != PHDR_SIZE {
        return Err(bad_field("e_phentsize", header.e_phentsize.into(), "56"));
    }
    // count <= 2^32, so the product cannot overflow.
    slice(
        data,
        header.e_phoff,
        count * PHDR_SIZE,
        "program header table",
    )?;
    (0..count)
        .map(|i| {
            let rec = Record(slice(
                data,
                header.e_phoff + i * PHDR_SIZE,
                PHDR_SIZE,
                &format!("program header {i}"),
            )?);
            Ok(ProgramHeader {
                index: i as usize,
                p_type: rec.u32(0),
                p_flags: rec.u32(4),
                p_offset: rec.u64(8),
                p_vaddr: rec.u64(16),
                p_paddr: rec.u64(24),
                p_filesz: rec.u64(32),
                p_memsz: rec.u64(40),
                p_align: rec.u64(48),
            })
        })
        .collect()
}

fn resolve_shstrndx(
    header: &ElfHeader,
    shdrs: &[SectionHeader],
) -> Result<Option<usize>, ElfError> {
    let index = match header.e_shstrndx {
        SHN_UNDEF => return Ok(None),
        SHN_XINDEX => shdrs.first().map_or(0, |s| u64::from(s.sh_link)),
        n => u64::from(n),
    };
    match usize::try_from(index).ok().filter(|&i| i < shdrs.len()) {
        Some(i) => Ok(Some(i)),
        None => Err(ElfError::BadSectionIndex {
            what: "e_shstrndx".to_string(),
            index,
            count: shdrs.len(),
        }),
    }
}

fn name_sections(
    data: &[u8],
    mut shdrs: Vec<SectionHeader>,
    shstrndx: Option<usize>,
) -> Result<Vec<SectionHeader>, ElfError> {
    let Some(strndx) = shstrndx else {
        return Ok(shdrs);
    };
    let strtab = shdrs
        .get(strndx)
        .cloned()
        .ok_or_else(|| bad_field("e_shstrndx", strndx as u64, "a valid section index"))?;
    if strtab.sh_type != SHT_STRTAB {
        return Err(ElfError::BadSectionType {
            index: strndx,
            name: String::new(),
            found: strtab.sh_type,
            expected: "SHT_STRTAB for the section name table (e_shstrndx)",
        });
    }
    let table = slice(
        data,
        strtab.sh_offset,
        strtab.sh_size,
        &format!("section name table [{strndx}]"),
    )?;
    for section in &mut shdrs {
        let name = c_str(table, section.sh_name.into()).ok_or_else(|| ElfError::BadString {
            table: strndx,
            table_offset: strtab.sh_offset,
            index: section.sh_name.into(),
            size: strtab.sh_size,
            what: format!("the name of section [{}]", section.index),
        })?;
        section.name = String::from_utf8_lossy(name).into_owned();
    }
    Ok(shdrs)
}
