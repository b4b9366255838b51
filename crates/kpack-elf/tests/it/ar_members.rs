//! The ELF members of `ar` archives, inspected (the archive format's own tests are
//! kpack-ar's).

use kpack_elf::{FatBinaryKind, InspectArError, inspect_ar};
use kpack_testkit::read_fixture;

#[test]
fn libtwo_a_members_are_inspected_as_fat_objects() {
    let data = read_fixture("bin/libtwo.a");
    let inspected = inspect_ar(&data).unwrap();
    assert_eq!(inspected.len(), 2);
    for m in &inspected {
        let fat = m.fat.as_ref().expect("ELF member");
        assert_eq!(fat.kind, FatBinaryKind::Fat, "{}", m.member.name);
        assert_eq!(fat.wrappers.len(), 1);
        assert_eq!(fat.wrappers[0].bundle, Some(0));
    }
}

#[test]
fn a_truncated_elf_member_is_reported_with_its_name_and_offset() {
    // `!<arch>\n`, one member `short.o` of 4 bytes: the ELF magic and nothing else.
    let mut data = kpack_ar::MAGIC.to_vec();
    data.extend_from_slice(
        format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            "short.o/", 0, 0, 0, 644, 4
        )
        .as_bytes(),
    );
    data.extend_from_slice(b"\x7fELF");
    let err = inspect_ar(&data).unwrap_err();
    assert!(
        matches!(err, InspectArError::Elf { ref name, offset: 68, .. } if name == "short.o"),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("member short.o at offset 0x44: "),
        "{text}"
    );
    kpack_testkit::assert_no_debug_formatting(&text);
}
