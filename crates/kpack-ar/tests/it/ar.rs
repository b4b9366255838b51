//! `ar` archives: the real libtwo.a, and hand-made headers for the name variants
//! and malformed cases.

use kpack_ar::{self as ar, ArError};
use kpack_testkit::{ELF_FIXTURES, fixtures, read_fixture, run_tool};

/// One member: 60-byte header (name field as given) + data + padding.
fn member(name: &str, data: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
        0,
        0,
        0,
        644,
        data.len()
    )
    .into_bytes();
    assert_eq!(out.len(), 60);
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(b'\n');
    }
    out
}

fn archive(members: &[Vec<u8>]) -> Vec<u8> {
    let mut out = ar::MAGIC.to_vec();
    for m in members {
        out.extend_from_slice(m);
    }
    out
}

#[test]
fn libtwo_a_holds_k1_and_k2_byte_for_byte() {
    let data = read_fixture("bin/libtwo.a");
    assert!(ar::is_ar(&data));
    let members = ar::members(&data).unwrap();
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["k1.o", "k2.o"]);
    for m in &members {
        assert_eq!(
            m.data,
            read_fixture(&format!("bin/{}", m.name)),
            "{}",
            m.name
        );
        assert_eq!(m.offset, m.header_offset + 60);
        assert_eq!(m.header_offset % 2, 0);
        assert_eq!(&data[m.offset as usize..][..m.data.len()], m.data);
    }
}

#[test]
#[cfg_attr(
    windows,
    ignore = "needs GNU ar, a Linux tool, as the witness; the Linux run checks it"
)]
fn libtwo_a_names_match_ar_t() {
    let path = fixtures().join("bin/libtwo.a");
    let out = run_tool(
        "ar",
        &["t", path.to_str().expect("fixture paths are UTF-8")],
    );
    let listed: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect();
    let ours: Vec<String> = ar::members(&read_fixture("bin/libtwo.a"))
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(ours, listed);
}

#[test]
fn gnu_long_names_bsd_names_and_symbol_tables_are_handled() {
    let long = "a_rather_long_member_name.o";
    let data = archive(&[
        member("/", b"\0\0\0\0"),
        member("//", format!("{long}/\nother_long_name_x.o/\n").as_bytes()),
        member("/0", b"one"),
        member(&format!("/{}", long.len() + 2), b"two!"),
        member("short.o/", b"\x7fELF"),
        member("#1/12", b"bsd_name.o\0\0payload"),
        member("__.SYMDEF SORTED", b""),
        member("plain", b"x"),
    ]);
    let members = ar::members(&data).unwrap();
    let got: Vec<(&str, &[u8])> = members.iter().map(|m| (m.name.as_str(), m.data)).collect();
    assert_eq!(
        got,
        [
            (long, &b"one"[..]),
            ("other_long_name_x.o", b"two!"),
            ("short.o", b"\x7fELF"),
            ("bsd_name.o", b"payload"),
            ("plain", b"x"),
        ]
    );
    // The BSD name is not part of the member data.
    let bsd = &members[3];
    assert_eq!(bsd.offset, bsd.header_offset + 60 + 12);
}

#[test]
fn empty_archive_has_no_members_and_non_archives_are_rejected() {
    assert!(ar::members(ar::MAGIC).unwrap().is_empty());
    assert!(matches!(ar::members(b"!<thin>\n"), Err(ArError::Thin)));
    assert!(matches!(ar::members(b"!<arch"), Err(ArError::NotAr)));
    for rel in ELF_FIXTURES {
        assert!(!ar::is_ar(&read_fixture(rel)), "{rel}");
    }
}

#[test]
fn malformed_member_headers_are_errors() {
    let good = member("a.o/", b"abcd");

    let mut truncated = archive(std::slice::from_ref(&good));
    truncated.extend_from_slice(&good[..59]);
    assert!(matches!(
        ar::members(&truncated),
        Err(ArError::TruncatedHeader {
            offset: 72,
            available: 59
        })
    ));

    let mut terminator = good.clone();
    terminator[58] = b'x';
    assert!(matches!(
        ar::members(&archive(&[terminator])),
        Err(ArError::BadTerminator { offset: 8, .. })
    ));

    let mut size = good.clone();
    size[48..58].copy_from_slice(b"12x4      ");
    assert!(matches!(
        ar::members(&archive(&[size])),
        Err(ArError::BadSize { offset: 8, .. })
    ));
    let mut blank = good.clone();
    blank[48..58].copy_from_slice(b"          ");
    assert!(matches!(
        ar::members(&archive(&[blank])),
        Err(ArError::BadSize { .. })
    ));

    let mut beyond = good.clone();
    beyond[48..58].copy_from_slice(b"99999999  ");
    assert!(matches!(
        ar::members(&archive(&[beyond])),
        Err(ArError::BeyondEof {
            size: 99_999_999,
            ..
        })
    ));
    let mut huge = good.clone();
    huge[48..58].copy_from_slice(b"9999999999");
    assert!(matches!(
        ar::members(&archive(&[huge])),
        Err(ArError::BeyondEof { .. })
    ));

    let mut padding = archive(&[member("odd/", b"abc")]);
    let pad = padding.len() - 1;
    padding[pad] = b'!';
    padding.extend_from_slice(&good);
    assert!(matches!(
        ar::members(&padding),
        Err(ArError::BadPadding { found: b'!', .. })
    ));
    // A missing final padding byte at EOF is tolerated.
    let mut unpadded = archive(&[member("odd/", b"abc")]);
    unpadded.pop();
    assert_eq!(ar::members(&unpadded).unwrap()[0].data, b"abc");

    assert!(matches!(
        ar::members(&archive(&[member("/5", b"x")])),
        Err(ArError::BadLongName { .. })
    ));
    assert!(matches!(
        ar::members(&archive(&[member("//", b"a/\n"), member("/99", b"x")])),
        Err(ArError::BadLongName { .. })
    ));
    assert!(matches!(
        ar::members(&archive(&[member("#1/20", b"short")])),
        Err(ArError::BadBsdName {
            name_len: 20,
            size: 5,
            ..
        })
    ));
}

#[test]
fn every_truncation_of_libtwo_a_is_an_error_or_a_prefix_of_its_members() {
    let data = read_fixture("bin/libtwo.a");
    let full = ar::members(&data).unwrap();
    let boundaries = full
        .iter()
        .map(|m| (m.offset as usize + m.data.len()).next_multiple_of(2));
    for len in (0..data.len())
        .step_by(53)
        .chain([7, 8, 67, 68, 69, 182])
        .chain(boundaries)
    {
        // A cut between members is a valid, shorter archive; anywhere else it fails.
        if let Ok(members) = ar::members(&data[..len]) {
            assert_eq!(members, full[..members.len()], "prefix of {len} bytes");
        }
    }
}
