//! Python wheels for ROCm: [`split_wheel`] turns a fat wheel (every GPU target's device
//! code in each binary) into a host wheel plus one device wheel per GPU target, sub-family
//! and family (reference spec REFERENCE_WHEELS.md), which pip installs through the host's
//! `device-<target>` extras; [`detect`] tells which extra this machine's GPUs need.
//!
//! This crate knows nothing of the command line; `kpack split-wheel` and `kpack detect`
//! only parse arguments and print what these functions return. The wheel as a file format
//! (the hostile-zip reader, RECORD, METADATA, the deterministic writer) is
//! `kpack-wheelfile`'s; the split builds on it, on `kpack-pipeline`'s transform and on
//! `kpack-artifact`'s database handlers and indexes. The packaging hierarchy is
//! hand-written here, because no crate has it.
//!
//! Depends on `kpack-archive`, `kpack-artifact`, `kpack-fs`, `kpack-pipeline`, `kpack-target`
//! and `kpack-wheelfile` (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

pub mod detect;
pub mod dist_info;
mod error;
pub mod hierarchy;
mod split;

pub use detect::{Gpu, detect};
pub use error::WheelError;
pub use hierarchy::{BundleKey, BundleKeyError, Level};
// What the split's options and summary are made of.
pub use kpack_wheelfile::{Limits, OutputFormat};
pub use split::{
    DeviceWheel, FatBinary, OutputWheel, Progress, SplitOptions, Summary, split_wheel,
    split_wheel_with_progress,
};
