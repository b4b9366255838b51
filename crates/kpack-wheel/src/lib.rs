//! Python wheels for ROCm: [`split_wheel`] turns a fat wheel (every GPU target's device
//! code in each binary) into a host wheel plus one device wheel per GPU target, sub-family
//! and family (reference spec REFERENCE_WHEELS.md), which pip installs through the host's
//! `device-<target>` extras; the hierarchy ([`BundleKey`]) tells which extra a GPU target
//! needs (`kpack detect` asks it for each GPU `kpack-detect` finds).
//!
//! This crate knows nothing of the command line; `kpack split-wheel` only parses arguments
//! and prints what these functions return. The wheel as a file format
//! (the hostile-zip reader, RECORD, METADATA, the deterministic writer) is
//! `kpack-wheelfile`'s; the split builds on it, on `kpack-pipeline`'s transform and on
//! `kpack-artifact`'s database handlers and indexes. The packaging hierarchy is
//! hand-written here, because no crate has it.
//!
//! Depends on `kpack-archive`, `kpack-artifact`, `kpack-concurrency`, `kpack-fs`,
//! `kpack-package`, `kpack-pipeline`, `kpack-target` and `kpack-wheelfile` (the layering:
//! docs/CONTRIBUTING.md).

#![warn(missing_docs)]

pub mod dist_info;
mod error;
pub mod hierarchy;
mod split;

pub use error::WheelError;
pub use hierarchy::{BundleKey, BundleKeyError, Level};
// What the split's options and summary are made of.
pub use kpack_wheelfile::{Limits, OutputFormat};
pub use split::{
    DeviceWheel, FatBinary, OutputWheel, Progress, SplitOptions, Summary, split_wheel,
    split_wheel_with_progress,
};
