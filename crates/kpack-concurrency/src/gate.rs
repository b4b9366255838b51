//! Process-wide gates on the bytes of working memory alive at once (decoded bundles,
//! compression contexts), across every thread and job of the process.
//!
//! Each holder reserves an estimate before it allocates and releases it when done. A
//! [`MemoryGate`] bounds one kind of memory; every gate also draws from one
//! [`WorkingMemory`] of the process ([`WORKING_BUDGET`] bytes), which bounds what all kinds
//! hold together. So a decoded bundle and the contexts that code it share one budget: while
//! `pack` holds a 190 MB bundle decoded whole, the coder's contexts get what is left of
//! [`WORKING_BUDGET`], not a budget of their own beside it (issue 38: a library of 235
//! bundles peaked at 523 MiB with a decoded bundle and a full context budget alive
//! together; docs/memory.md).
//!
//! An item of an ordered map ([`crate::ordered`]) reserves its cost (a bundle's decoded
//! size) before its work decodes that bundle, which reserves the same bytes from the
//! decoding gate: counted twice in the working memory, fewer items would run at once than it
//! holds. So while the work and the consumption of an item run
//! ([`Reservation::covering`]), the reservations they make on that thread from a gate of the
//! same working memory draw from it only what the item's reservation does not already cover;
//! each still counts in full in its own gate.
//!
//! A reservation waits while its gate holds memory and it would not fit either budget; it is
//! granted when its own gate is empty, however large, so an item larger than a budget still
//! runs, alone of its kind. No holder waits on a gate while holding a reservation of that
//! same gate, and a reservation of an empty gate is never refused, so the gates cannot
//! deadlock: a holder of one gate waiting on another waits for that gate's own holders,
//! which release without waiting on it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Bytes every gate of the process may hold together (decoded bundles and compression
/// contexts): with the memory no gate accounts for (the input's pages, frames, the
/// allocator's slack; about 130 MiB at the peak of `pack --compression unified`), within
/// the 512 MiB standard.
pub const WORKING_BUDGET: u64 = 320 << 20;

/// The process's working memory, which every [`MemoryGate`] draws from unless given another.
static WORKING: WorkingMemory = WorkingMemory::new(WORKING_BUDGET);

/// A budget shared by several [`MemoryGate`]s: the bytes they reserve together, and the lock
/// under which each of them counts its own.
pub struct WorkingMemory {
    budget: u64,
    in_use: Mutex<u64>,
    released: Condvar,
}

impl WorkingMemory {
    /// Working memory of `budget` bytes.
    pub const fn new(budget: u64) -> Self {
        WorkingMemory {
            budget,
            in_use: Mutex::new(0),
            released: Condvar::new(),
        }
    }

    /// The bytes reserved now, by every gate drawing from it.
    pub fn in_use(&self) -> u64 {
        *self.lock()
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        self.in_use.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// See the module doc. Declared as a `static`, one per kind of memory.
pub struct MemoryGate {
    budget: u64,
    working: &'static WorkingMemory,
    /// Changed only under `working`'s lock.
    in_use: AtomicU64,
}

/// A granted reservation of a [`MemoryGate`], released on drop.
pub struct Reservation<'g> {
    gate: &'g MemoryGate,
    bytes: u64,
    /// What it holds of its working memory: `bytes` but what a covering reservation
    /// already held (see the module doc).
    working_bytes: u64,
}

thread_local! {
    /// The reservation this thread works under ([`Reservation::covering`]): its working
    /// memory and the bytes of it not yet used by a reservation it covers.
    static COVER: Cell<Option<(&'static WorkingMemory, u64)>> = const { Cell::new(None) };
}

/// Restores the cover a thread had before [`Reservation::covering`], also on unwinding.
struct Uncover(Option<(&'static WorkingMemory, u64)>);

impl Drop for Uncover {
    fn drop(&mut self) {
        COVER.set(self.0);
    }
}

impl MemoryGate {
    /// A gate letting `budget` bytes be reserved at once, within the process's working
    /// memory ([`WORKING_BUDGET`]).
    pub const fn new(budget: u64) -> Self {
        MemoryGate::within(budget, &WORKING)
    }

    /// A gate letting `budget` bytes be reserved at once, within `working`.
    pub const fn within(budget: u64, working: &'static WorkingMemory) -> Self {
        MemoryGate {
            budget,
            working,
            in_use: AtomicU64::new(0),
        }
    }

    /// Reserves `bytes`, waiting until they fit beside this gate's others and within the
    /// working memory (or this gate is empty).
    /// Bytes a reservation covering this thread's work holds already (see the module doc)
    /// are not counted again in the working memory.
    pub fn reserve(&self, bytes: u64) -> Reservation<'_> {
        let covered = COVER.with(|cover| match cover.get() {
            Some((working, left)) if std::ptr::eq(working, self.working) => {
                let covered = left.min(bytes);
                cover.set(Some((working, left - covered)));
                covered
            }
            _ => 0,
        });
        let working_bytes = bytes - covered;
        let mut working = self.working.lock();
        loop {
            let own = self.in_use.load(Ordering::Relaxed);
            let fits = own.saturating_add(bytes) <= self.budget
                && working.saturating_add(working_bytes) <= self.working.budget;
            if own == 0 || fits {
                break;
            }
            working = self
                .working
                .released
                .wait(working)
                .unwrap_or_else(|e| e.into_inner());
        }
        self.in_use.fetch_add(bytes, Ordering::Relaxed);
        *working += working_bytes;
        Reservation {
            gate: self,
            bytes,
            working_bytes,
        }
    }

    /// The bytes reserved now.
    pub fn in_use(&self) -> u64 {
        let _working = self.working.lock();
        self.in_use.load(Ordering::Relaxed)
    }
}

impl Reservation<'_> {
    /// Runs `f` with this reservation covering the working memory that the reservations `f`
    /// makes on this thread draw (see the module doc): up to its bytes, in all.
    pub fn covering<T>(&self, f: impl FnOnce() -> T) -> T {
        let _restore = Uncover(COVER.replace(Some((self.gate.working, self.working_bytes))));
        f()
    }

    /// Gives back what this reservation holds beyond `bytes` (nothing if it holds no more):
    /// what an item still holds once its work is done, its decoded bundle dropped and only
    /// its output kept until it is consumed. What it covered is given back last.
    pub fn shrink_to(&mut self, bytes: u64) {
        let Some(freed) = self.bytes.checked_sub(bytes).filter(|&f| f > 0) else {
            return;
        };
        let working = self.gate.working;
        let mut in_use = working.lock();
        let working_freed = freed.min(self.working_bytes);
        *in_use -= working_freed;
        self.working_bytes -= working_freed;
        self.gate.in_use.fetch_sub(freed, Ordering::Relaxed);
        self.bytes = bytes;
        drop(in_use);
        working.released.notify_all();
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let working = self.gate.working;
        let mut in_use = working.lock();
        *in_use -= self.working_bytes;
        self.gate.in_use.fetch_sub(self.bytes, Ordering::Relaxed);
        drop(in_use);
        working.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A decoded bundle held in one gate leaves the other only what is left of the working
    /// memory: a reservation that fits its own gate but not beside the bundle waits until
    /// the bundle is released, and one alone in its gate is never refused.
    #[test]
    fn a_gate_admits_only_what_the_other_gates_leave_of_the_working_memory() {
        static WORK: WorkingMemory = WorkingMemory::new(300);
        static BUNDLES: MemoryGate = MemoryGate::within(256, &WORK);
        static CONTEXTS: MemoryGate = MemoryGate::within(192, &WORK);
        let bundle = BUNDLES.reserve(190);
        // Alone in its gate: granted beside the bundle, over the working memory.
        let first = CONTEXTS.reserve(150);
        assert_eq!(WORK.in_use(), 340);
        let admitted = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Fits CONTEXTS (150 + 40 <= 192), not the working memory beside the bundle.
                let second = CONTEXTS.reserve(40);
                admitted.store(WORK.in_use(), Ordering::SeqCst);
                drop(second);
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert_eq!(
                admitted.load(Ordering::SeqCst),
                0,
                "admitted beside the bundle"
            );
            drop(bundle);
        });
        assert_eq!(admitted.load(Ordering::SeqCst), 190);
        drop(first);
        assert_eq!(WORK.in_use(), 0);
    }

    /// An item's reservation covers the same bytes reserved again by its work: they count
    /// once in the working memory (in full in each gate), until the cover is used up; outside
    /// it, in full again.
    #[test]
    fn a_reservation_under_an_items_cover_counts_once_in_the_working_memory() {
        static WORK: WorkingMemory = WorkingMemory::new(300);
        static ITEMS: MemoryGate = MemoryGate::within(200, &WORK);
        static DECODED: MemoryGate = MemoryGate::within(256, &WORK);
        static ELSEWHERE: WorkingMemory = WorkingMemory::new(300);
        static OTHER: MemoryGate = MemoryGate::within(256, &ELSEWHERE);
        let item = ITEMS.reserve(150);
        item.covering(|| {
            let decoded = DECODED.reserve(150);
            assert_eq!((WORK.in_use(), DECODED.in_use()), (150, 150));
            // The cover is used up.
            let more = DECODED.reserve(20);
            assert_eq!(WORK.in_use(), 170);
            // A gate of another working memory is not covered.
            let other = OTHER.reserve(10);
            assert_eq!(ELSEWHERE.in_use(), 10);
            drop((decoded, more, other));
        });
        assert_eq!(WORK.in_use(), 150);
        let uncovered = DECODED.reserve(100);
        assert_eq!(WORK.in_use(), 250);
        drop((item, uncovered));
        assert_eq!((WORK.in_use(), ITEMS.in_use(), DECODED.in_use()), (0, 0, 0));
    }

    /// Many threads reserving from two gates of one working memory never hold more than it
    /// together, but for one reservation granted alone in its gate (at most 49 here): the
    /// two gates' own budgets would let them hold 200.
    #[test]
    fn reservations_of_two_gates_together_stay_within_the_working_memory() {
        static WORK: WorkingMemory = WorkingMemory::new(120);
        static A: MemoryGate = MemoryGate::within(100, &WORK);
        static B: MemoryGate = MemoryGate::within(100, &WORK);
        static PEAK: AtomicU64 = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..8u64 {
                s.spawn(move || {
                    let gate = if t % 2 == 0 { &A } else { &B };
                    for i in 0..200u64 {
                        let r = gate.reserve(10 + (t * 7 + i) % 40);
                        PEAK.fetch_max(WORK.in_use(), Ordering::Relaxed);
                        // Held a while, as a bundle or a context is, so that holders overlap.
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        drop(r);
                    }
                });
            }
        });
        assert!(PEAK.load(Ordering::Relaxed) <= 120 + 49);
        assert_eq!(WORK.in_use(), 0);
    }
}
