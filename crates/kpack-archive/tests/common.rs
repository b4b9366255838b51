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

/// Re-encodes a TOC after `edit` and puts it back at the same offset (the TOC is last).
pub fn edit_toc(archive: &[u8], edit: impl FnOnce(&mut Vec<(Value, Value)>)) -> Vec<u8> {
    let (mut out, mut top) = split_toc(archive);
    edit(&mut top);
    out.extend(encode(&Value::Map(top)).unwrap());
    out
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
