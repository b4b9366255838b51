//! What a kpack package holds beside its archives, shared by the applications that make,
//! check, prune and report on packages: the kernel-database handlers ([`handlers`]: which
//! files of an install prefix belong to one GPU architecture), the `.kpm` index ([`index`]:
//! which package provides which architecture) and group archives ([`group`]: several
//! targets' archives as one).
//!
//! Why a crate of its own, below `kpack-artifact`: `kpack prune` and `kpack report` sort
//! kernel-database files by target, and `kpack split-wheel` writes indexes and group
//! archives, without the split/recombine/verify application.
//!
//! Depends on `kpack-archive`, `kpack-fs` and `kpack-target` (the layering:
//! docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod error;
pub mod group;
pub mod handlers;
pub mod index;

pub use error::PackageError;
