//! Reading against a schema: where a value sits ([`Path`]), missing, mistyped and repeated
//! fields.

use std::fmt;

use crate::{Cursor, FieldError, WalkError};

/// Where a value sits in a document, rendered only for error messages.
#[derive(Debug, Clone, Copy)]
pub enum Path<'p> {
    /// The document's root value.
    Root,
    /// `base.key` for identifier-like keys, `base["key"]` otherwise; no dot at the root.
    Field(&'p Path<'p>, &'p str),
    /// `base["key"]`: the notation for data-valued keys (binaries, arches).
    Key(&'p Path<'p>, &'p str),
    /// `base[index]`: an array element.
    Index(&'p Path<'p>, usize),
    /// The keys of the map at `base`: `base key`, or `root key`.
    KeysOf(&'p Path<'p>),
}

impl Path<'_> {
    /// The path as an error spells it (its `Display`). Through `format!`, not `to_string()`:
    /// `ToString` of a `Display` type inlines the formatting into every crate that calls it,
    /// with its own copy of `String`'s writer, where `format!` calls the one in `alloc`; the
    /// readers librocm_kpack links build these paths in a dozen places (12 KB of its stripped size).
    #[cold]
    pub fn text(&self) -> String {
        format!("{self}")
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Path::Root => Ok(()),
            Path::Field(base, key) => {
                let plain =
                    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                match (base, plain) {
                    (Path::Root, true) => f.write_str(key),
                    (_, true) => write!(f, "{base}.{key}"),
                    _ => write!(f, "{base}[{key:?}]"),
                }
            }
            Path::Key(base, key) => write!(f, "{base}[{key:?}]"),
            Path::Index(base, i) => write!(f, "{base}[{i}]"),
            Path::KeysOf(Path::Root) => f.write_str("root key"),
            Path::KeysOf(base) => write!(f, "{base} key"),
        }
    }
}

/// `path` holds a `found` where the schema wants `expected`; the root is named `root`.
pub fn wrong(path: &Path<'_>, expected: &'static str, found: &'static str) -> FieldError {
    let path = match path {
        Path::Root => "root".to_owned(),
        p => p.text(),
    };
    FieldError::WrongType {
        path,
        expected,
        found,
    }
}

/// Fills `slot` with `value`; `key` of the map at `map` is a duplicate if it is full already.
#[inline]
pub fn once<T>(
    slot: &mut Option<T>,
    value: T,
    map: &Path<'_>,
    key: &str,
) -> Result<(), FieldError> {
    if slot.is_some() {
        return Err(duplicate_key(map, key));
    }
    *slot = Some(value);
    Ok(())
}

#[cold]
#[inline(never)]
fn duplicate_key(map: &Path<'_>, key: &str) -> FieldError {
    FieldError::DuplicateKey {
        path: map.text(),
        key: key.to_owned(),
    }
}

/// The value of a field that must be present.
pub fn required<T>(slot: Option<T>, map: &Path<'_>, key: &str) -> Result<T, FieldError> {
    slot.ok_or_else(|| FieldError::Missing {
        path: Path::Field(map, key).text(),
    })
}

/// The keys met in one map (those no field reads, where the fields are tracked apart), to find
/// repeats: a linear scan while few, a hash set beyond.
#[derive(Default)]
pub struct KeySet<'a> {
    few: Vec<&'a str>,
    many: std::collections::HashSet<&'a str>,
}

impl<'a> KeySet<'a> {
    const LINEAR: usize = 16;

    /// Forgets every key noted, for the next map.
    #[inline]
    pub fn clear(&mut self) {
        self.few.clear();
        if !self.many.is_empty() {
            self.many.clear();
        }
    }

    /// Notes `key` of the map at `map`; it must not repeat.
    pub fn note(&mut self, map: &Path<'_>, key: &'a str) -> Result<(), FieldError> {
        if self.insert(key) {
            return Ok(());
        }
        Err(duplicate_key(map, key))
    }

    /// Notes `key`, a key no field reads, and skips its value.
    pub fn skip_unknown<E: WalkError>(
        &mut self,
        c: &mut Cursor<'a>,
        map: &Path<'_>,
        key: &'a str,
    ) -> Result<(), E> {
        self.note(map, key)?;
        Ok(c.skip()?)
    }

    /// False if `key` was seen before.
    fn insert(&mut self, key: &'a str) -> bool {
        if self.many.is_empty() {
            if self.few.contains(&key) {
                return false;
            }
            if self.few.len() < Self::LINEAR {
                self.few.push(key);
                return true;
            }
            self.many.extend(self.few.drain(..));
        }
        self.many.insert(key)
    }
}
