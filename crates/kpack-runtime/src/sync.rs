//! The synchronisation primitives of the cache: std's, or loom's for the model test.

#[cfg(feature = "loom-model")]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "loom-model")]
pub(crate) use loom::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(feature = "loom-model"))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(feature = "loom-model"))]
pub(crate) use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A read guard, ignoring poison: the guarded maps are only ever inserted into, so a panic in
/// another holder cannot leave them inconsistent.
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
