//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use rmpv::Value;
use sha2::{Digest, Sha256};

pub fn vector_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/vectors")
        .join(name)
}

pub fn vector(name: &str) -> Vec<u8> {
    std::fs::read(vector_path(name)).unwrap()
}

/// First 8 bytes of the SHA-256, in hex, as the vectors README lists them.
pub fn sha256_prefix(bytes: &[u8]) -> String {
    Sha256::digest(bytes)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The msgpack of `value`, as the reference writes it.
pub fn encode(value: &Value) -> Result<Vec<u8>, rmpv::encode::Error> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, value)?;
    Ok(out)
}

/// The one msgpack value that `bytes` holds, all of them.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let mut rest = bytes;
    let value = rmpv::decode::read_value(&mut rest).map_err(|e| e.to_string())?;
    match rest.len() {
        0 => Ok(value),
        n => Err(format!("{n} bytes after the value")),
    }
}

/// Splits an archive into (bytes before the TOC, decoded TOC entries).
pub fn split_toc(archive: &[u8]) -> (Vec<u8>, Vec<(Value, Value)>) {
    let toc_offset = u64::from_le_bytes(archive[8..16].try_into().unwrap()) as usize;
    let toc = decode(&archive[toc_offset..]).unwrap();
    let Value::Map(top) = toc else {
        panic!("TOC is not a map")
    };
    (archive[..toc_offset].to_vec(), top)
}

/// Re-encodes a TOC after `edit` and puts it back at the same offset (the TOC is last). A
/// TOC that carried its digest gets it recomputed, as a writer would, so that the edit
/// reaches the checks behind the digest.
pub fn edit_toc(archive: &[u8], edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    let sealed = split_toc(archive)
        .1
        .iter()
        .any(|(k, _)| k.as_str() == Some(TOC_DIGEST_KEY));
    rewrite_toc(archive, sealed, edit)
}

/// The TOC key of the TOC digest.
pub const TOC_DIGEST_KEY: &str = "toc_xxh3";

/// `archive` without its digests: the TOC as the reference's writer would write it.
pub fn without_digests(archive: &[u8]) -> Vec<u8> {
    rewrite_toc(archive, false, |top| {
        let Value::Map(toc) = top_field(top, "toc") else {
            panic!("toc is not a map")
        };
        for (_, arches) in toc {
            let Value::Map(arches) = arches else {
                panic!("toc binary is not a map")
            };
            for (_, entry) in arches {
                let Value::Map(entry) = entry else {
                    panic!("toc entry is not a map")
                };
                take_key(entry, "xxh3").expect("every entry carries its digest");
            }
        }
    })
}

/// The TOC re-encoded after `edit`, without its digest, then (`seal`) with a digest of the
/// result ending it.
fn rewrite_toc(archive: &[u8], seal: bool, edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    let (mut out, mut top) = split_toc(archive);
    take_key(&mut top, TOC_DIGEST_KEY);
    edit(&mut top);
    if !seal {
        out.extend(encode(&Value::Map(top)).unwrap());
        return out;
    }
    top.push((TOC_DIGEST_KEY.into(), Value::Binary(vec![0; 8])));
    let mut toc = encode(&Value::Map(top)).unwrap();
    toc.truncate(toc.len() - 8);
    let digest = kpack_archive::digest::toc_digest(&out, &toc);
    toc.extend(digest.to_be_bytes());
    out.extend(toc);
    out
}

/// Removes `key` from a map's pairs; its value, if it was there.
pub fn take_key(map: &mut Vec<(Value, Value)>, key: &str) -> Option<Value> {
    let i = map.iter().position(|(k, _)| k.as_str() == Some(key))?;
    Some(map.remove(i).1)
}

/// The value under string key `key` of a map value, mutably.
pub fn field<'v>(map: &'v mut Value, key: &str) -> &'v mut Value {
    let Value::Map(m) = map else {
        panic!("not a map")
    };
    top_field(m, key)
}

pub fn top_field<'v>(map: &'v mut [(Value, Value)], key: &str) -> &'v mut Value {
    &mut map
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some(key))
        .unwrap()
        .1
}

/// Walks a zstd-per-kernel blob region independently of the reader: the frames in order.
pub fn zstd_frames(archive: &[u8]) -> Vec<Vec<u8>> {
    let (_, top) = split_toc(archive);
    let get = |k: &str| {
        top.iter()
            .find(|(key, _)| key.as_str() == Some(k))
            .unwrap()
            .1
            .as_u64()
            .unwrap() as usize
    };
    let (offset, size) = (get("zstd_offset"), get("zstd_size"));
    let region = &archive[offset..offset + size];
    let count = u32::from_le_bytes(region[..4].try_into().unwrap()) as usize;
    let mut pos = 4;
    let mut frames = Vec::new();
    for _ in 0..count {
        let len = u32::from_le_bytes(region[pos..pos + 4].try_into().unwrap()) as usize;
        frames.push(region[pos + 4..pos + 4 + len].to_vec());
        pos += 4 + len;
    }
    assert_eq!(pos, size, "region is exactly its frames");
    frames
}
