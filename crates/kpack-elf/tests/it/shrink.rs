//! Sections of a relocatable object shortened in place (`kpack prune` of `.llvm.offloading`).

use kpack_elf::ElfFile;
use kpack_elf::rewrite::RewriteError;
use kpack_testkit::read_fixture;

const OFFLOADING: &str = ".llvm.offloading";

#[test]
fn a_shortened_section_keeps_its_place_and_what_follows_moves_down_aligned() {
    let input = read_fixture("offload/mk_embedded.o");
    let elf = ElfFile::parse(&input).unwrap();
    let s = elf.section_by_name(OFFLOADING).unwrap();
    let old = elf.section_data(s).unwrap();
    let new = old[..old.len() / 2].to_vec();
    let out = kpack_elf::shrink::plan(&elf, &[(s.index, new.clone())])
        .unwrap()
        .to_vec(&input);

    let shrunk = ElfFile::parse(&out).unwrap();
    let t = shrunk.section_by_name(OFFLOADING).unwrap();
    assert_eq!((t.sh_offset, t.sh_size), (s.sh_offset, new.len() as u64));
    assert_eq!(shrunk.section_data(t).unwrap(), new);
    let saved = input.len() - out.len();
    assert!(saved > 0 && saved <= old.len() - new.len());
    for (before, after) in elf.section_headers().iter().zip(shrunk.section_headers()) {
        assert_eq!(before.name, after.name);
        if before.sh_offset > s.sh_offset && before.sh_size > 0 {
            assert_eq!(
                before.sh_offset - after.sh_offset,
                saved as u64,
                "{}",
                before.name
            );
            assert_eq!(
                after.sh_offset % after.sh_addralign.max(1),
                0,
                "{}",
                after.name
            );
            assert_eq!(
                elf.section_data(before).unwrap(),
                shrunk.section_data(after).unwrap(),
                "{}",
                before.name
            );
        }
    }
    assert_eq!(elf.header().e_shoff - shrunk.header().e_shoff, saved as u64);
}

#[test]
fn contents_longer_than_the_section_are_refused() {
    let input = read_fixture("offload/mk_embedded.o");
    let elf = ElfFile::parse(&input).unwrap();
    let s = elf.section_by_name(OFFLOADING).unwrap();
    let longer = vec![0; s.sh_size as usize + 1];
    let e = kpack_elf::shrink::plan(&elf, &[(s.index, longer)]).unwrap_err();
    assert!(matches!(e, RewriteError::Layout(_)), "{e}");
}
