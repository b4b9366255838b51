//! Fixture wheels damaged or written otherwise: zipped again with edits, RECORD unhashed,
//! a member's byte flipped.

use std::path::Path;

/// The wheel `from` zipped again at `to`, member by member in its order, each member's
/// content first passed through `edit(name, content)`; members named in `stored` are
/// written uncompressed, the others deflated. Tests make damaged wheels, or wheels whose
/// RECORD is written otherwise, from the fixture wheel with it.
pub fn rezip_wheel(
    from: &Path,
    to: &Path,
    stored: &[&str],
    mut edit: impl FnMut(&str, &mut Vec<u8>),
) {
    let mut src = zip::ZipArchive::new(std::fs::File::open(from).unwrap()).unwrap();
    let mut w = zip::ZipWriter::new(std::fs::File::create(to).unwrap());
    for i in 0..src.len() {
        let mut f = src.by_index(i).unwrap();
        let name = f.name().to_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut data).unwrap();
        edit(&name, &mut data);
        let method = if stored.contains(&name.as_str()) {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .unix_permissions(f.unix_mode().unwrap_or(0o644) & 0o7777);
        w.start_file(name, options).unwrap();
        std::io::Write::write_all(&mut w, &data).unwrap();
    }
    w.finish().unwrap();
}

/// `record` (a wheel's RECORD) with every hash field emptied, as some wheels on PyPI list
/// their files (`pkg/LICENSE,,1073`), and the size field too where `no_size(path)`.
pub fn unhashed_record(record: &[u8], no_size: impl Fn(&str) -> bool) -> Vec<u8> {
    let text = std::str::from_utf8(record).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut fields = line.rsplitn(3, ',');
        let (size, _hash, path) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        let size = if no_size(path) { "" } else { size };
        out.push_str(&format!("{path},,{size}\n"));
    }
    out.into_bytes()
}

/// Flips one byte in the middle of the stored (compressed) data of `member` of the zip at
/// `wheel`, in place: the central directory, sizes and CRC-32 stay as they were.
pub fn flip_member_byte(wheel: &Path, member: &str) {
    let (start, len) = {
        let mut z = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
        let f = z.by_name(member).unwrap();
        (f.data_start().unwrap(), f.compressed_size())
    };
    let mut bytes = std::fs::read(wheel).unwrap();
    bytes[(start + len / 2) as usize] ^= 0x20;
    std::fs::write(wheel, bytes).unwrap();
}
