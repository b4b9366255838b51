//! A strict ELF64 little-endian parser over a byte slice.
//!
//! Parsing validates the ELF header, the program header table, the section header
//! table, every section name and the file range of every section and segment, so that
//! later accessors only fail on content they decode (symbols, relocations, dynamic
//! entries). Raw header fields are kept unchanged so that a rewriter can reproduce
//! them exactly.
//!
//! Records are `object::elf`'s plain-data structs, read through `kpack_hostbin::bytes`'s
//! range checks; `object`'s own reader is not used because it is lenient where this
//! parser must be strict (and its errors carry no file offsets).

mod tables;

use object::LittleEndian as LE;
use object::elf::{
    DT_NULL, Dyn64, ELFMAG, ET_EXEC, ET_REL, PT_DYNAMIC, PT_INTERP, PT_LOAD, ProgramHeader64,
    Rel64, Rela64, Relr64, SHN_ABS, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX, SHT_DYNAMIC, SHT_DYNSYM,
    SHT_NOBITS, SHT_NULL, SHT_REL, SHT_RELA, SHT_RELR, SHT_SYMTAB, STT_SECTION, SectionHeader64,
    Sym64,
};

use crate::ElfError;
use crate::relr::{self, RelrEntry};
use kpack_hostbin::bytes::{c_str, record, record_size, slice, whole_records};
use tables::{
    name_sections, parse_header, read_program_table, read_section_table, resolve_phnum,
    resolve_shstrndx,
};

/// Size of one ELF64 program header.
pub(crate) const PHDR_SIZE: u64 = record_size::<ProgramHeader64<LE>>();
/// Size of one ELF64 section header.
pub(crate) const SHDR_SIZE: u64 = record_size::<SectionHeader64<LE>>();
const SYM_SIZE: u64 = record_size::<Sym64<LE>>();
const DYN_SIZE: u64 = record_size::<Dyn64<LE>>();
/// Size of one `Elf64_Rela`.
pub(crate) const RELA_SIZE: u64 = record_size::<Rela64<LE>>();
/// Size of one `Elf64_Rel`.
pub(crate) const REL_SIZE: u64 = record_size::<Rel64<LE>>();
const RELR_SIZE: u64 = record_size::<Relr64<LE>>();

/// The ELF header, fields as stored (`e_phnum`/`e_shnum`/`e_shstrndx` before
/// extended-numbering resolution; see [`ElfFile::program_headers`] and
/// [`ElfFile::section_headers`] for the resolved tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfHeader {
    /// `e_ident`: magic, class, data encoding, version, OS ABI, padding.
    pub ident: [u8; 16],
    /// Object file type (`ET_*`).
    pub e_type: u16,
    /// Architecture (`EM_*`).
    pub e_machine: u16,
    /// Object file version.
    pub e_version: u32,
    /// Entry point address.
    pub e_entry: u64,
    /// File offset of the program header table.
    pub e_phoff: u64,
    /// File offset of the section header table.
    pub e_shoff: u64,
    /// Processor-specific flags.
    pub e_flags: u32,
    /// Size of this header.
    pub e_ehsize: u16,
    /// Size of one program header.
    pub e_phentsize: u16,
    /// Number of program headers (`PN_XNUM`: see section 0).
    pub e_phnum: u16,
    /// Size of one section header.
    pub e_shentsize: u16,
    /// Number of section headers (0: see section 0).
    pub e_shnum: u16,
    /// Index of the section name table (`SHN_XINDEX`: see section 0).
    pub e_shstrndx: u16,
}

/// One program header, with its position in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramHeader {
    /// Position in the program header table.
    pub index: usize,
    /// Segment type (`PT_*`).
    pub p_type: u32,
    /// Segment permissions (`PF_*`).
    pub p_flags: u32,
    /// File offset of the segment.
    pub p_offset: u64,
    /// Address of the segment.
    pub p_vaddr: u64,
    /// Physical address (as stored; unused by loaders).
    pub p_paddr: u64,
    /// Bytes of the segment in the file.
    pub p_filesz: u64,
    /// Bytes of the segment in memory (the excess is zero-filled).
    pub p_memsz: u64,
    /// Alignment of the segment.
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
    /// Position in the section header table.
    pub index: usize,
    /// The name from the section name string table (lossy UTF-8; empty without one).
    pub name: String,
    /// Offset of the name in the section name table.
    pub sh_name: u32,
    /// Section type (`SHT_*`).
    pub sh_type: u32,
    /// Section flags (`SHF_*`).
    pub sh_flags: u64,
    /// Address of the section (0 if not allocated).
    pub sh_addr: u64,
    /// File offset of the section.
    pub sh_offset: u64,
    /// Size of the section.
    pub sh_size: u64,
    /// Linked section (string table of a symbol table, symbol table of relocations).
    pub sh_link: u32,
    /// Extra information (the section relocations apply to).
    pub sh_info: u32,
    /// Alignment of the section.
    pub sh_addralign: u64,
    /// Size of one entry of a table section.
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
    /// Offset of the name in the linked string table.
    pub st_name: u32,
    /// Type (low 4 bits) and binding (high 4 bits).
    pub st_info: u8,
    /// Visibility.
    pub st_other: u8,
    /// Index of the defining section, or `SHN_*`.
    pub st_shndx: u16,
    /// Value (an address in linked files).
    pub st_value: u64,
    /// Size of the object.
    pub st_size: u64,
}

impl Symbol {
    /// `STT_*`: the low 4 bits of `st_info`.
    pub fn symbol_type(&self) -> u8 {
        self.st_info & 0xf
    }
    /// `STB_*`: the high 4 bits of `st_info`.
    pub fn binding(&self) -> u8 {
        self.st_info >> 4
    }
}

/// One `Elf64_Dyn` entry of the dynamic section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynEntry {
    /// File offset of the entry.
    pub offset: u64,
    /// `d_tag` (`DT_*`).
    pub tag: u64,
    /// `d_val`/`d_ptr`.
    pub val: u64,
}

/// One `Elf64_Rela` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rela {
    /// Address (linked files) or section offset (relocatable objects) relocated.
    pub r_offset: u64,
    /// Symbol index (0: none).
    pub r_sym: u32,
    /// Relocation type (machine-specific).
    pub r_type: u32,
    /// Addend.
    pub r_addend: i64,
}

/// One `Elf64_Rel` entry (the addend is the value stored at `r_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rel {
    /// Address (linked files) or section offset (relocatable objects) relocated.
    pub r_offset: u64,
    /// Symbol index (0: none).
    pub r_sym: u32,
    /// Relocation type (machine-specific).
    pub r_type: u32,
}

/// The decoded entries of a relocation section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelocationEntries {
    /// `SHT_RELA` entries.
    Rela(Vec<Rela>),
    /// `SHT_REL` entries.
    Rel(Vec<Rel>),
    /// The addresses an `SHT_RELR` section relocates.
    Relr(Vec<RelrEntry>),
}

/// A relocation section (`SHT_RELA`, `SHT_REL` or `SHT_RELR`) and its entries.
/// For `Rela`/`Rel`, entry `i` is at file offset `header.sh_offset + i * sh_entsize`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocationSection {
    /// The section header.
    pub header: SectionHeader,
    /// The decoded entries.
    pub entries: RelocationEntries,
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

    /// The ELF header.
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

    /// Whether the file is an executable (`ET_EXEC`, or a PIE with `PT_INTERP`), whose
    /// program header table old kernels locate through the first `PT_LOAD`.
    pub fn is_executable(&self) -> bool {
        self.header.e_type == ET_EXEC || self.phdrs.iter().any(|p| p.p_type == PT_INTERP)
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
        .map_err(ElfError::from)
    }

    /// The file bytes of a segment (`p_filesz` bytes at `p_offset`); none when `p_filesz` is
    /// 0, wherever `p_offset` points: a separated debug file keeps its library's program
    /// headers, offsets included, but can end before them.
    pub fn segment_data(&self, segment: &ProgramHeader) -> Result<&'a [u8], ElfError> {
        if segment.p_filesz == 0 {
            return Ok(&[]);
        }
        slice(
            self.data,
            segment.p_offset,
            segment.p_filesz,
            &format!("program header {}", segment.index),
        )
        .map_err(ElfError::from)
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
        let sym: &Sym64<LE> = record(self.data, symtab.sh_offset + index * SYM_SIZE, &what)?;
        let st_name = sym.st_name.get(LE);
        let st_info = sym.st_info;
        let st_shndx = sym.st_shndx.get(LE);
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
            st_other: sym.st_other,
            st_shndx,
            st_value: sym.st_value.get(LE),
            st_size: sym.st_size.get(LE),
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
            // Extended section index (the real one in `SHT_SYMTAB_SHNDX`): in linked files
            // `st_value` is the address whatever the section.
            SHN_XINDEX if self.header.e_type != ET_REL => Ok(Some(sym.st_value)),
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
        Ok(whole_records::<Dyn64<LE>>(bytes)
            .iter()
            .take_while(|d| d.d_tag.get(LE) != u64::from(DT_NULL))
            .enumerate()
            .map(|(i, d)| DynEntry {
                offset: offset + i as u64 * DYN_SIZE,
                tag: d.d_tag.get(LE),
                val: d.d_val.get(LE),
            })
            .collect())
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
        let entries = match section.sh_type {
            SHT_RELA => RelocationEntries::Rela(
                whole_records::<Rela64<LE>>(bytes)
                    .iter()
                    .map(|r| Rela {
                        r_offset: r.r_offset.get(LE),
                        r_sym: r.r_sym(LE, false),
                        r_type: r.r_type(LE, false),
                        r_addend: r.r_addend.get(LE),
                    })
                    .collect(),
            ),
            SHT_REL => RelocationEntries::Rel(
                whole_records::<Rel64<LE>>(bytes)
                    .iter()
                    .map(|r| Rel {
                        r_offset: r.r_offset.get(LE),
                        r_sym: r.r_sym(LE),
                        r_type: r.r_type(LE),
                    })
                    .collect(),
            ),
            _ => {
                let words: Vec<u64> = whole_records::<Relr64<LE>>(bytes)
                    .iter()
                    .map(|w| w.0.get(LE))
                    .collect();
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
