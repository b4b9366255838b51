//! What the integration tests (and benchmarks) of several kpack crates share: the repository's
//! fixtures and their roles, the real-world corpus, external witnesses, tree helpers, the
//! check that a message shows no Rust debug formatting ([`assert_no_debug_formatting`]), and
//! the stand-in HIP runtime ([`standin`]) that loads binaries the way the HIP runtime does.
//!
//! Everything here panics with a message naming what is missing: a test either runs what it
//! promises or fails.
//!
//! Depends on `kpack-bundle` and `kpack-fs`, and on `kpack-archive`, `kpack-artifact`,
//! `kpack-elf`, `kpack-hostbin`, `kpack-package` and `kpack-pipeline` behind features; a
//! dev-dependency only (the layering: docs/CONTRIBUTING.md).

mod artifacts;
mod bench;
mod corpus;
#[cfg(feature = "transform")]
mod device_code;
mod fixtures;
#[cfg(feature = "transform")]
pub mod flips;
pub mod large_ccob;
// A child's peak RSS and CPU time come from `wait4`: Unix only, and only the Linux tests and
// benches of kpack-cli and kpack-capi measure children.
#[cfg(unix)]
pub mod measured;
mod messages;
pub mod refmade;
mod standin;
mod tree;
mod wheels;
mod wine;
mod witness;

#[cfg(feature = "shards")]
pub use artifacts::split_shards;
pub use artifacts::{SHARDS, shared_installed_paths};
pub use bench::{cpu_time, median, mib, peak_rss_kib, reset_peak_rss, time};
pub use corpus::{
    JAX_VERSIONS, corpus, corpus_wheel, jax_wheel_dir, librocblas, librocrand_arm64, librocsparse,
};
#[cfg(feature = "transform")]
pub use device_code::{
    assert_fetched_are_the_originals, ccob_frames, fetch_through_markers, originals, transform_into,
};
pub use fixtures::{
    DEBUG_FIXTURES, ELF_FIXTURE_ROLES, ELF_FIXTURES, LINKED_FAT, PE_FIXTURES, PLATFORM_FIXTURES,
    PeFixture, Role, fixture, fixtures, read_fixture,
};
pub use messages::assert_no_debug_formatting;
pub use standin::{AARCH64, Foreign, PPC64LE, Registration, Standin, foreign_standin, standin};
pub use tree::{copied_elsewhere, copy_tree, listing, sha256_hex, snapshot, snapshot_digests};
pub use wheels::{flip_member_byte, rezip_wheel, unhashed_record};
pub use wine::{Wine, WineRegistration};
#[cfg(feature = "transform")]
pub use witness::fatbin_bundles;
pub use witness::{run_llvm22, run_tool, witness_entries};
