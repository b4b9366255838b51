//! A process-wide gate on the bytes of one kind of working memory alive at once (decoded
//! bundles, compression contexts), across every thread and job of the process.
//!
//! Each holder reserves an estimate before it allocates and releases it when done. A
//! reservation waits while others hold memory and it would not fit the budget; it is
//! granted when the gate is empty, however large, so an item larger than the budget still
//! runs, alone. Holders never wait on anything while holding, so the gate cannot deadlock.

use std::sync::{Condvar, Mutex};

/// See the module doc. Declared as a `static`, one per kind of memory.
pub struct MemoryGate {
    budget: u64,
    in_use: Mutex<u64>,
    released: Condvar,
}

/// A granted reservation of a [`MemoryGate`], released on drop.
pub struct Reservation<'g> {
    gate: &'g MemoryGate,
    bytes: u64,
}

impl MemoryGate {
    /// A gate letting `budget` bytes be reserved at once.
    pub const fn new(budget: u64) -> Self {
        MemoryGate {
            budget,
            in_use: Mutex::new(0),
            released: Condvar::new(),
        }
    }

    /// Reserves `bytes`, waiting until they fit beside the others' (or the gate is empty).
    pub fn reserve(&self, bytes: u64) -> Reservation<'_> {
        let mut in_use = self.in_use.lock().unwrap_or_else(|e| e.into_inner());
        while *in_use != 0 && in_use.saturating_add(bytes) > self.budget {
            in_use = self
                .released
                .wait(in_use)
                .unwrap_or_else(|e| e.into_inner());
        }
        *in_use += bytes;
        Reservation { gate: self, bytes }
    }

    /// The bytes reserved now.
    pub fn in_use(&self) -> u64 {
        *self.in_use.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        *self.gate.in_use.lock().unwrap_or_else(|e| e.into_inner()) -= self.bytes;
        self.gate.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn an_item_larger_than_the_budget_is_granted_alone() {
        static GATE: MemoryGate = MemoryGate::new(10);
        let big = GATE.reserve(50);
        assert_eq!(GATE.in_use(), 50);
        drop(big);
        assert_eq!(GATE.in_use(), 0);
    }

    #[test]
    fn reservations_held_at_once_never_exceed_the_budget() {
        static GATE: MemoryGate = MemoryGate::new(100);
        static PEAK: AtomicU64 = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..8u64 {
                s.spawn(move || {
                    for i in 0..200u64 {
                        let r = GATE.reserve(10 + (t * 7 + i) % 40);
                        PEAK.fetch_max(GATE.in_use(), Ordering::Relaxed);
                        drop(r);
                    }
                });
            }
        });
        assert!(PEAK.load(Ordering::Relaxed) <= 100);
        assert_eq!(GATE.in_use(), 0);
    }
}
