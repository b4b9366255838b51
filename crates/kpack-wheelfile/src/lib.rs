//! The Python wheel as a file format: reading hostile zips ([`reader`]: every name checked
//! before anything is written, sizes bounded, every member checked against its CRC-32 and its
//! RECORD line, [`record`]), the text files of `.dist-info` and wheel file names
//! ([`metadata`]), and the deterministic writer ([`writer`]).
//!
//! It knows nothing of what a wheel holds: splitting a ROCm wheel into host and device
//! wheels is `kpack-wheel`'s, and `inspect`, `report`, `unbundle` and `prune` of a `.whl`
//! read it here. It depends on no kpack crate but `kpack-fs` (the tree walk, the one
//! reading of `SOURCE_DATE_EPOCH`).
//!
//! Hand-written here, because no crate does it: the RFC 822 header lines of METADATA and
//! WHEEL (only `Name`, `Version`, `Tag` and `Build` are read, and a rewrite must keep every
//! other byte, which a parse-and-reprint would not). Zip, CSV (RECORD), hashing and base64
//! come from `zip`, `csv`, `sha2` and `base64`.
//!
//! Depends on `kpack-fs` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod error;
pub mod metadata;
pub mod reader;
pub mod record;
pub mod writer;

pub use error::{WheelFileError, io};
pub use reader::Limits;
pub use record::Listed;
pub use writer::OutputFormat;
