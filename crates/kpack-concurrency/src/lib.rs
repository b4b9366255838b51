//! kpack's concurrency tools, which know nothing of any format:
//!
//! * [`MemoryGate`]: the process-wide budget of one kind of working memory (decoded
//!   bundles, compression contexts) that every thread reserves from before allocating,
//!   every kind within one [`WorkingMemory`] of [`WORKING_BUDGET`] bytes;
//! * [`threads`]: how many workers every pool uses (one per core, or the process's
//!   `--threads` limit), and [`threads::map`], the pool of the file-level jobs;
//! * [`ordered`]: parallel work whose results are consumed in input order, with the memory
//!   in flight bounded.
//!
//! Why a crate of its own: the archive coder (kpack-archive), transform and prune
//! (kpack-pipeline, kpack-prune), split, recombine and verify (kpack-artifact) and the wheel
//! split share them, and none of those is about concurrency. Hand-written over std threads
//! rather than rayon's pool for the reasons [`threads::map`] gives.
//!
//! Depends on no other kpack crate (the layering: docs/CONTRIBUTING.md).

#![warn(missing_docs)]

mod gate;
pub mod ordered;
pub mod threads;

pub use gate::{MemoryGate, Reservation, WORKING_BUDGET, WorkingMemory};
