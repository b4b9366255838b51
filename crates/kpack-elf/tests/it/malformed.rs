//! Malformed input: typed errors, never a panic. Real fixtures are patched only
//! where a specific defect is needed.

use kpack_elf::relr::{RelrError, decode};
use kpack_elf::{ElfError, ElfFile, PointerSource, RelrEntry, inspect};
use kpack_testkit::{ELF_FIXTURES, read_fixture};
use object::LittleEndian as LE;
use object::elf::*;

const PHDR_SIZE: u64 = size_of::<ProgramHeader64<LE>>() as u64;
const SHDR_SIZE: u64 = size_of::<SectionHeader64<LE>>() as u64;
const RELA_SIZE: u64 = size_of::<Rela64<LE>>() as u64;
const REL_SIZE: u64 = size_of::<Rel64<LE>>() as u64;
const RELR_SIZE: u64 = size_of::<Relr64<LE>>() as u64;

fn put(buf: &mut [u8], at: u64, bytes: &[u8]) {
    buf[at as usize..][..bytes.len()].copy_from_slice(bytes);
}

/// File offset of the section header of `name`.
fn shdr_at(data: &[u8], name: &str) -> u64 {
    let elf = ElfFile::parse(data).unwrap();
    let index = elf.section_by_name(name).unwrap().index as u64;
    elf.header().e_shoff + index * SHDR_SIZE
}

#[test]
fn every_truncation_of_libone_is_an_error() {
    let data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let h = elf.header().clone();
    let mut lengths: Vec<u64> = (0..data.len() as u64).step_by(97).collect();
    lengths.extend([0, 1, 3, 4, 5, 6, 16, 63, 64]);
    lengths.extend([h.e_phoff + 9 * PHDR_SIZE - 1, h.e_phoff + 9 * PHDR_SIZE]);
    lengths.extend([h.e_shoff, h.e_shoff + SHDR_SIZE, data.len() as u64 - 1]);
    for s in elf.section_headers() {
        lengths.extend([s.sh_offset, s.sh_offset + s.sh_size.saturating_sub(1)]);
    }
    for len in lengths {
        let prefix = &data[..len as usize];
        assert!(
            ElfFile::parse(prefix).is_err(),
            "prefix of {len} bytes parsed"
        );
        assert!(inspect(prefix).is_err(), "prefix of {len} bytes inspected");
    }
}

#[test]
fn truncations_of_every_elf_fixture_never_panic() {
    for rel in ELF_FIXTURES {
        let data = read_fixture(rel);
        for len in (0..data.len()).step_by(499) {
            // Objects may end with sections the parser does not need; only the
            // absence of a panic is asserted here.
            let _ = inspect(&data[..len]);
        }
    }
}

#[test]
fn elf32_big_endian_and_non_elf_are_distinct_errors() {
    let data = read_fixture("bin/libone.so");
    let mut elf32 = data.clone();
    elf32[4] = ELFCLASS32;
    assert!(matches!(ElfFile::parse(&elf32), Err(ElfError::Elf32)));
    let mut big = data.clone();
    big[5] = ELFDATA2MSB;
    assert!(matches!(ElfFile::parse(&big), Err(ElfError::BigEndian)));
    let mut class = data.clone();
    class[4] = 3;
    assert!(matches!(
        ElfFile::parse(&class),
        Err(ElfError::InvalidClass(3))
    ));
    let mut encoding = data.clone();
    encoding[5] = 0;
    assert!(matches!(
        ElfFile::parse(&encoding),
        Err(ElfError::InvalidDataEncoding(0))
    ));
    assert!(matches!(
        ElfFile::parse(b"!<arch>\n"),
        Err(ElfError::NotElf { .. })
    ));
    assert!(matches!(ElfFile::parse(b""), Err(ElfError::NotElf { .. })));
    assert!(!kpack_elf::is_elf(b"\x7fEL"));
}

#[test]
fn section_header_table_beyond_eof_is_out_of_bounds() {
    let mut data = read_fixture("bin/libone.so");
    let len = data.len() as u64;
    put(&mut data, 40, &(len - 10).to_le_bytes());
    match ElfFile::parse(&data) {
        Err(ElfError::OutOfBounds {
            offset, file_len, ..
        }) => {
            assert_eq!((offset, file_len), (len - 10, len));
        }
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    // An offset that overflows when the table size is added.
    put(&mut data, 40, &u64::MAX.to_le_bytes());
    assert!(matches!(
        ElfFile::parse(&data),
        Err(ElfError::OutOfBounds { .. })
    ));
}

#[test]
fn program_header_table_beyond_eof_and_bad_entry_sizes_are_rejected() {
    let data = read_fixture("bin/libone.so");
    let mut phoff = data.clone();
    put(&mut phoff, 32, &(data.len() as u64 - 56).to_le_bytes());
    let err = ElfFile::parse(&phoff).unwrap_err();
    assert!(
        matches!(err, ElfError::OutOfBounds { ref what, .. } if what == "program header table"),
        "{err}"
    );
    let mut phentsize = data.clone();
    put(&mut phentsize, 54, &32u16.to_le_bytes());
    assert!(matches!(
        ElfFile::parse(&phentsize),
        Err(ElfError::BadHeaderField {
            field: "e_phentsize",
            found: 32,
            ..
        })
    ));
    let mut shentsize = data.clone();
    put(&mut shentsize, 58, &40u16.to_le_bytes());
    assert!(matches!(
        ElfFile::parse(&shentsize),
        Err(ElfError::BadHeaderField {
            field: "e_shentsize",
            found: 40,
            ..
        })
    ));
}

#[test]
fn section_contents_beyond_eof_name_the_section() {
    let mut data = read_fixture("bin/libone.so");
    let at = shdr_at(&data, ".hip_fatbin");
    put(&mut data, at + 32, &u64::MAX.to_le_bytes());
    let err = ElfFile::parse(&data).unwrap_err();
    assert!(err.to_string().contains(".hip_fatbin"), "{err}");
}

#[test]
fn section_name_outside_the_string_table_is_rejected() {
    let mut data = read_fixture("bin/libone.so");
    let at = shdr_at(&data, ".text");
    put(&mut data, at, &0x7fff_0000u32.to_le_bytes());
    assert!(matches!(
        ElfFile::parse(&data),
        Err(ElfError::BadString {
            index: 0x7fff_0000,
            ..
        })
    ));
}

#[test]
fn e_shstrndx_out_of_range_is_rejected() {
    let mut data = read_fixture("bin/libone.so");
    put(&mut data, 62, &40u16.to_le_bytes());
    assert!(matches!(
        ElfFile::parse(&data),
        Err(ElfError::BadSectionIndex {
            index: 40,
            count: 32,
            ..
        })
    ));
}

#[test]
fn extended_section_numbering_reads_counts_from_section_0() {
    let mut data = read_fixture("bin/libone.so");
    let shoff = ElfFile::parse(&data).unwrap().header().e_shoff;
    put(&mut data, 60, &0u16.to_le_bytes()); // e_shnum = 0: count in sh_size
    put(&mut data, 62, &SHN_XINDEX.to_le_bytes()); // index in sh_link
    put(&mut data, shoff + 32, &32u64.to_le_bytes());
    put(&mut data, shoff + 40, &31u32.to_le_bytes());
    let elf = ElfFile::parse(&data).unwrap();
    assert_eq!(elf.section_headers().len(), 32);
    assert_eq!(elf.shstrndx(), Some(31));
    assert_eq!(elf.section_headers()[16].name, ".hip_fatbin");
}

#[test]
fn wrapper_section_size_not_a_multiple_of_24_is_an_error() {
    let mut data = read_fixture("bin/libone.so");
    let at = shdr_at(&data, ".hipFatBinSegment");
    put(&mut data, at + 32, &23u64.to_le_bytes());
    match inspect(&data) {
        Err(ElfError::WrapperSectionSize {
            size: 23,
            offset: 0xc048,
            ..
        }) => {}
        other => panic!("expected WrapperSectionSize, got {other:?}"),
    }
}

#[test]
fn relocation_entry_size_and_count_are_validated() {
    let data = read_fixture("bin/libone.so");
    let at = shdr_at(&data, ".rela.dyn");
    let mut entsize = data.clone();
    put(&mut entsize, at + 56, &16u64.to_le_bytes());
    let elf = ElfFile::parse(&entsize).unwrap();
    assert!(matches!(
        elf.relocations(),
        Err(ElfError::BadEntsize {
            found: 16,
            expected: 24,
            ..
        })
    ));
    assert!(
        inspect(&entsize).is_err(),
        "wrapper pointers need the relocations"
    );

    let mut size = data.clone();
    put(&mut size, at + 32, &0x107u64.to_le_bytes());
    let elf = ElfFile::parse(&size).unwrap();
    assert!(matches!(
        elf.relocations(),
        Err(ElfError::SizeNotMultiple { size: 0x107, .. })
    ));
}

#[test]
fn symbol_index_beyond_the_table_is_an_error() {
    let data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let dynsym = elf.section_by_name(".dynsym").unwrap();
    assert!(matches!(
        elf.symbol(dynsym, 16),
        Err(ElfError::BadSymbolIndex {
            index: 16,
            count: 16,
            ..
        })
    ));
}

fn relr(words: &[u64]) -> Vec<u64> {
    decode(words).unwrap().iter().map(|e| e.r_offset).collect()
}

#[test]
fn relr_decodes_addresses_and_bitmaps() {
    assert!(decode(&[]).unwrap().is_empty());
    // Address words only.
    assert_eq!(relr(&[0x1000, 0x2000]), [0x1000, 0x2000]);
    // A bitmap continues at address + 8; bit i (from 1) is next + (i - 1) * 8.
    assert_eq!(relr(&[0x1000, 0b1011]), [0x1000, 0x1008, 0x1018]);
    // All 63 bits: 63 consecutive words after the address.
    let all = relr(&[0x1000, u64::MAX]);
    assert_eq!(all.len(), 64);
    assert_eq!(all[63], 0x1000 + 63 * 8);
    // An empty bitmap still advances by 63 words: the next bitmap's bit 1 is
    // 0x1008 + 63 * 8.
    assert_eq!(relr(&[0x1000, 1, 0b11]), [0x1000, 0x1008 + 63 * 8]);
    // Bit 63 of consecutive bitmaps.
    assert_eq!(
        relr(&[0, 1 << 63 | 1, 1 << 63 | 1]),
        [0, 8 + 62 * 8, 8 + 63 * 8 + 62 * 8]
    );
    // A new address resets the base.
    assert_eq!(
        relr(&[0x1000, 0x3, 0x8000, 0x3]),
        [0x1000, 0x1008, 0x8000, 0x8008]
    );
    // Word indices are kept for the rewriter.
    assert_eq!(
        decode(&[0x10, 0x5]).unwrap(),
        [
            RelrEntry {
                word_index: 0,
                r_offset: 0x10
            },
            RelrEntry {
                word_index: 1,
                r_offset: 0x20
            },
        ]
    );
}

#[test]
fn relr_rejects_a_leading_bitmap_and_overflow() {
    assert_eq!(
        decode(&[0x3]),
        Err(RelrError::BitmapFirst { word_index: 0 })
    );
    assert_eq!(
        decode(&[u64::MAX - 7]).map(|v| v.len()),
        Ok(1),
        "no bitmap uses the overflowed base"
    );
    assert_eq!(
        decode(&[u64::MAX - 7, 0x3]),
        Err(RelrError::Overflow { word_index: 1 })
    );
    assert_eq!(
        decode(&[u64::MAX - 0xff, 1 << 63 | 1]),
        Err(RelrError::Overflow { word_index: 1 })
    );
}

/// libone.so with the wrapper's RELA entry moved away and `.rela.plt` turned into
/// a section of `sh_type` holding `content`.
fn libone_with_pointer_relocation(sh_type: u32, entsize: u64, content: &[u8]) -> Vec<u8> {
    let mut data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let rela_dyn = elf.section_by_name(".rela.dyn").unwrap().sh_offset;
    let plt = elf.section_by_name(".rela.plt").unwrap().sh_offset;
    let plt_hdr = shdr_at(&data, ".rela.plt");
    // Entry 4 of .rela.dyn relocates the wrapper pointer at 0xd050.
    put(&mut data, rela_dyn + 4 * RELA_SIZE, &0u64.to_le_bytes());
    put(&mut data, plt, content);
    put(&mut data, plt_hdr + 4, &sh_type.to_le_bytes());
    put(
        &mut data,
        plt_hdr + 32,
        &(content.len() as u64).to_le_bytes(),
    );
    put(&mut data, plt_hdr + 56, &entsize.to_le_bytes());
    data
}

#[test]
fn relr_and_rel_pointers_take_the_value_in_the_file() {
    // RELR: address 0xd040, then a bitmap whose bit 2 is 0xd048 + 8 = 0xd050.
    let words: Vec<u8> = [0xd040u64, 0b101]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let data = libone_with_pointer_relocation(SHT_RELR, RELR_SIZE, &words);
    let fat = inspect(&data).unwrap();
    let w = &fat.wrappers[0];
    assert!(
        matches!(
            w.pointer,
            PointerSource::Relr {
                word_index: 1,
                in_file: 0x3000,
                ..
            }
        ),
        "{:?}",
        w.pointer
    );
    assert_eq!((w.target, w.bundle), (Some(0x3000), Some(0)));

    let rel: Vec<u8> = [0xd050u64, u64::from(R_X86_64_RELATIVE)]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let data = libone_with_pointer_relocation(SHT_REL, REL_SIZE, &rel);
    let fat = inspect(&data).unwrap();
    let w = &fat.wrappers[0];
    assert!(
        matches!(
            w.pointer,
            PointerSource::Rel {
                entry_index: 0,
                r_type: R_X86_64_RELATIVE,
                in_file: 0x3000,
                ..
            }
        ),
        "{:?}",
        w.pointer
    );
    assert_eq!((w.target, w.bundle), (Some(0x3000), Some(0)));

    // With no relocation left at all, the file value is taken as is.
    let data = libone_with_pointer_relocation(SHT_PROGBITS, 0, &[]);
    assert_eq!(
        inspect(&data).unwrap().wrappers[0].pointer,
        PointerSource::InPlace(0x3000)
    );
}

#[test]
fn malformed_relr_section_names_the_section_and_word() {
    let data = libone_with_pointer_relocation(SHT_RELR, RELR_SIZE, &3u64.to_le_bytes());
    let err = inspect(&data).unwrap_err();
    match &err {
        ElfError::Relr {
            name,
            offset,
            source: RelrError::BitmapFirst { word_index: 0 },
            ..
        } => {
            assert_eq!(name, ".rela.plt");
            assert_eq!(*offset, 0x750);
        }
        other => panic!("expected a RELR error, got {other:?}"),
    }
}

#[test]
fn hipk_wrapper_or_nobits_fatbin_marks_the_file_kpacked() {
    let mut data = read_fixture("bin/libone.so");
    put(&mut data, 0xc048, b"HIPK");
    let fat = inspect(&data).unwrap();
    assert_eq!(fat.kind, kpack_elf::FatBinaryKind::Kpacked);
    assert_eq!(fat.wrappers[0].magic, kpack_elf::WrapperMagic::Hipk);
    put(&mut data, 0xc048, b"HIPF");
    let fatbin_hdr = shdr_at(&data, ".hip_fatbin");
    put(&mut data, fatbin_hdr + 4, &SHT_NOBITS.to_le_bytes());
    let fat = inspect(&data).unwrap();
    assert_eq!(
        fat.kind,
        kpack_elf::FatBinaryKind::Kpacked,
        "NOBITS .hip_fatbin"
    );
    assert!(fat.fatbin.as_ref().unwrap().nobits && fat.bundles.is_empty());
    assert_eq!(fat.wrappers[0].bundle, None);
    put(&mut data, 0xc048, b"ABCD");
    let fat = inspect(&data).unwrap();
    assert_eq!(
        fat.wrappers[0].magic,
        kpack_elf::WrapperMagic::Other(u32::from_le_bytes(*b"ABCD"))
    );
}

#[test]
fn a_nobits_wrapper_section_beside_a_fatbin_with_contents_is_refused_not_taken_for_a_debug_file() {
    // Only both device sections without bytes make a separated debug file; wrappers
    // without bytes beside device code are a broken file.
    let mut data = read_fixture("bin/libone.so");
    let segment_hdr = shdr_at(&data, ".hipFatBinSegment");
    put(&mut data, segment_hdr + 4, &SHT_NOBITS.to_le_bytes());
    let segment_offset = ElfFile::parse(&data)
        .unwrap()
        .section_by_name(".hipFatBinSegment")
        .unwrap()
        .sh_offset;
    match inspect(&data) {
        Err(ElfError::WrapperSectionNobits { offset, .. }) => assert_eq!(offset, segment_offset),
        other => panic!("expected WrapperSectionNobits, got {other:?}"),
    }
}

#[test]
fn marker_section_is_exposed_with_its_bytes() {
    // Rename .note.gnu.build-id (a longer name) to .rocm_kpack_ref.
    let mut data = read_fixture("bin/libone.so");
    let elf = ElfFile::parse(&data).unwrap();
    let note = elf.section_by_name(".note.gnu.build-id").unwrap().clone();
    let names_at = elf.section_headers()[elf.shstrndx().unwrap()].sh_offset;
    put(
        &mut data,
        names_at + u64::from(note.sh_name),
        b".rocm_kpack_ref\0",
    );
    let fat = inspect(&data).unwrap();
    assert_eq!(fat.kind, kpack_elf::FatBinaryKind::Kpacked);
    let marker = fat.marker.unwrap();
    assert_eq!(
        (
            marker.section_index,
            marker.offset,
            marker.vaddr,
            marker.size,
            marker.alloc
        ),
        (note.index, 0x238, 0x238, 0x24, true)
    );
    assert_eq!(marker.bytes(&data), Some(&data[0x238..0x25c]));
    assert_eq!(marker.bytes(&data[..0x240]), None);
}
