//! The kpack-cli integration tests, one module per behaviour, linked into one test binary
//! (one link of the dependency graph instead of one per file).

#[path = "../common/mod.rs"]
mod common;

mod ccob_integrity;
mod ci_workflow;
mod cli;
mod crash;
mod debug_files;
mod input_forms;
mod integrity;
mod map_reduce;
mod prune;
mod prune_forms;
mod refmade;
mod refmade_artifacts;
mod report;
mod restore;
mod spirv;
mod tarball;
mod threads;
mod verify_original;
mod verify_trees;
mod wheels;
mod windows_names;
