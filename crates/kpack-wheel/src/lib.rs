//! Python wheels for ROCm: [`split_wheel`] turns a fat wheel (every GPU target's device
//! code in each binary) into a host wheel plus one device wheel per GPU target, sub-family
//! and family (reference spec REFERENCE_WHEELS.md), which pip installs through the host's
//! `device-<target>` extras; [`detect`] tells which extra this machine's GPUs need.
//!
//! This crate knows nothing of the command line; `kpack split-wheel` and `kpack detect`
//! only parse arguments and print what these functions return.
//!
//! Hand-written here, because no crate does it: the RFC 822 header lines of METADATA and
//! WHEEL (only `Name`, `Version`, `Tag` and `Build` are read, and the rewrite must keep
//! every other byte, which a parse-and-reprint would not), and the packaging hierarchy.
//! Zip, CSV (RECORD), hashing and base64 come from `zip`, `csv`, `sha2` and `base64`.

#![warn(missing_docs)]

pub mod detect;
mod error;
pub mod hierarchy;
pub mod metadata;
pub mod reader;
pub mod record;
mod split;
pub mod writer;

pub use detect::{Gpu, detect};
pub use error::WheelError;
pub use hierarchy::{BundleKey, Level};
pub use reader::Limits;
pub use record::Listed;
pub use split::{
    DeviceWheel, FatBinary, OutputWheel, Progress, SplitOptions, Summary, split_wheel,
    split_wheel_with_progress,
};
pub use writer::OutputFormat;
