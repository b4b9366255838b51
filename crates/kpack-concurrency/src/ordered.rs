//! Parallel work whose results are consumed in order, with the memory in flight bounded.
//!
//! Transforming a library decodes its bundles (up to 100 MB each decompressed) on worker
//! threads and appends their compressed code objects to the archives in file order, so the
//! output is the same for any thread count. Each item has a cost (the bytes it holds while in
//! flight), reserved from a [`MemoryGate`] when the item is admitted and released once it is
//! consumed. One gate, [`IN_FLIGHT`], serves every map of the process, so maps running at
//! once (the fat binaries of a split, the artifacts of `split --batch`, the files verify
//! reads on its workers) share one budget instead of each having its own.
//!
//! An item's reservation covers what its work and its consumption reserve again for the
//! same bytes (the bundle an item's cost stands for, decoded within the decoding gate): they
//! count once in the process's working memory ([`Reservation::covering`]).
//!
//! An item's work returns its result with the bytes that result holds until it is consumed
//! (a bundle's coded output, once its decoded bytes are dropped): the item's reservation
//! shrinks to them, so finished items waiting for their turn hold only what they keep, and
//! the items after them are admitted in their place (a large bundle at the head of the line
//! no longer keeps the budget full of finished ones).
//!
//! Items of one map are admitted in index order, one waiting on the gate at a time: the next
//! item to consume is then always admitted or next in line, and an admitted item never waits
//! on the gate, so every reservation is released in finite time and maps cannot deadlock one
//! another (an item larger than the budget is admitted once the gate is empty, and runs
//! alone). A map's work must not run another map: its reservations would wait on ones that
//! wait on it.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::{MemoryGate, Reservation};

/// How many bytes [`IN_FLIGHT`] lets be in flight at once: the whole working memory, which
/// bounds them with every other gate's. So two bundles read as streams (each holding a
/// 128 MiB zstd window, and each keeping two threads busy: its decoding and coding, and its
/// MD5) run at once; under a budget of 192 MiB each ran alone, and `split` of the largest
/// packages kept 1.1 cores of 2 busy (issue 38).
pub const DEFAULT_BUDGET: u64 = crate::WORKING_BUDGET;

/// The gate every map of the process reserves its items' costs from (see the module doc).
pub static IN_FLIGHT: MemoryGate = MemoryGate::new(DEFAULT_BUDGET);

type Outcome<R, E> = std::thread::Result<Result<R, E>>;

struct State<'g, R, E> {
    /// Finished items not yet consumed, each with its reservation.
    done: BTreeMap<usize, (Outcome<R, E>, Reservation<'g>)>,
    stop: bool,
}

/// Runs `work(&mut local, i)` for `i` in `0..n` on `threads` workers (each with its own
/// `local = init()`), and `sink(i, result)` on the calling thread in index order, the cost of
/// the items admitted and not yet consumed reserved from `gate`. `work` returns its result
/// and the bytes that result holds until consumed, to which the item's reservation shrinks
/// (never grows). Stops at the first error (of `work` or `sink`) and returns it; a panic in
/// `work` is resumed here.
pub fn for_each_ordered<L, R: Send, E: Send>(
    n: usize,
    threads: usize,
    gate: &MemoryGate,
    cost: impl Fn(usize) -> u64 + Sync,
    init: impl Fn() -> L + Sync,
    work: impl Fn(&mut L, usize) -> Result<(R, u64), E> + Sync,
    mut sink: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    let state = Mutex::new(State {
        done: BTreeMap::new(),
        stop: false,
    });
    // The next index to admit; held while that item waits on the gate, so admission keeps
    // index order.
    let next = Mutex::new(0usize);
    let changed = Condvar::new();
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    fn wait<'g, T>(changed: &Condvar, g: MutexGuard<'g, T>) -> MutexGuard<'g, T> {
        changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| {
                let mut local = init();
                loop {
                    let (i, mut reservation) = {
                        let mut next = next.lock().unwrap_or_else(|e| e.into_inner());
                        if lock().stop || *next >= n {
                            return;
                        }
                        let reservation = gate.reserve(cost(*next));
                        *next += 1;
                        (*next - 1, reservation)
                    };
                    let outcome = catch_unwind(AssertUnwindSafe(|| {
                        reservation.covering(|| work(&mut local, i))
                    }))
                    .map(|r| {
                        r.map(|(r, held)| {
                            reservation.shrink_to(held);
                            r
                        })
                    });
                    let mut st = lock();
                    if st.stop {
                        return;
                    }
                    st.done.insert(i, (outcome, reservation));
                    drop(st);
                    changed.notify_all();
                }
            });
        }
        let result = (|| {
            for i in 0..n {
                let (outcome, reservation) = {
                    let mut st = lock();
                    loop {
                        if let Some(o) = st.done.remove(&i) {
                            break o;
                        }
                        st = wait(&changed, st);
                    }
                };
                let result = match outcome {
                    Ok(r) => reservation.covering(|| r.and_then(|r| sink(i, r))),
                    Err(panic) => {
                        stop(&state);
                        resume_unwind(panic);
                    }
                };
                drop(reservation);
                result?;
            }
            Ok(())
        })();
        stop(&state);
        result
    })
}

/// Stops a map's workers, releasing what its finished items hold (a worker waiting on the
/// gate may be waiting for exactly that).
fn stop<R, E>(state: &Mutex<State<'_, R, E>>) {
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    st.stop = true;
    st.done.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WorkingMemory;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn results_arrive_in_order_for_any_thread_count_and_budget() {
        for threads in [1, 2, 7] {
            for budget in [0, 3, 1000] {
                let mut seen = Vec::new();
                for_each_ordered::<_, _, ()>(
                    50,
                    threads,
                    &MemoryGate::new(budget),
                    |i| (i % 5) as u64,
                    || 0usize,
                    |calls, i| {
                        *calls += 1;
                        Ok((i * 2, 0))
                    },
                    |i, r| {
                        assert_eq!(r, i * 2);
                        seen.push(i);
                        Ok(())
                    },
                )
                .unwrap();
                assert_eq!(seen, (0..50).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn the_first_error_in_order_is_returned() {
        let gate = MemoryGate::new(10);
        let r = for_each_ordered(
            100,
            3,
            &gate,
            |_| 1,
            || (),
            |_, i| {
                if i == 40 || i == 60 {
                    Err(i)
                } else {
                    Ok((i, 0))
                }
            },
            |_, _| Ok(()),
        );
        assert_eq!(r, Err(40));
        assert_eq!(gate.in_use(), 0);
        let r = for_each_ordered(
            100,
            3,
            &gate,
            |_| 1,
            || (),
            |_, i| Ok::<_, usize>((i, 0)),
            |i, _| if i == 7 { Err(7) } else { Ok(()) },
        );
        assert_eq!(r, Err(7));
        assert_eq!(gate.in_use(), 0);
    }

    /// The work and the consumption of an item reserving its cost again from another gate
    /// of the same working memory add nothing to it.
    #[test]
    fn an_items_work_reserving_its_cost_again_counts_once_in_the_working_memory() {
        static WORK: WorkingMemory = WorkingMemory::new(100);
        static ITEMS: MemoryGate = MemoryGate::within(100, &WORK);
        static DECODED: MemoryGate = MemoryGate::within(100, &WORK);
        let held = || {
            let _decoded = DECODED.reserve(40);
            (WORK.in_use(), DECODED.in_use())
        };
        for_each_ordered::<_, _, ()>(
            1,
            2,
            &ITEMS,
            |_| 40,
            || (),
            |_, _| Ok((held(), 40)),
            |_, in_work| {
                assert_eq!((in_work, held()), ((40, 40), (40, 40)));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(WORK.in_use(), 0);
    }

    /// The head item waits for the fourth item's work: that work can only be admitted if
    /// the finished items before it gave back their decoded bytes (60 each, keeping 5), the
    /// three costs being more than the budget together.
    #[test]
    fn finished_items_waiting_their_turn_hold_only_what_their_results_keep() {
        static GATE: MemoryGate = MemoryGate::new(100);
        let fourth_done = (Mutex::new(false), Condvar::new());
        let r = for_each_ordered(
            4,
            2,
            &GATE,
            |i| if i == 0 { 10 } else { 60 },
            || (),
            |_, i| {
                let (done, changed) = &fourth_done;
                let mut done = done.lock().unwrap();
                if i == 3 {
                    *done = true;
                    changed.notify_all();
                } else if i == 0 {
                    let timeout = std::time::Duration::from_secs(20);
                    done = changed
                        .wait_timeout_while(done, timeout, |d| !*d)
                        .unwrap()
                        .0;
                    if !*done {
                        return Err("the fourth item was never admitted");
                    }
                }
                Ok((i, 5))
            },
            |_, _| Ok(()),
        );
        assert_eq!(r, Ok(()));
        assert_eq!(GATE.in_use(), 0);
    }

    #[test]
    fn maps_running_at_once_share_one_gate_and_all_finish() {
        static GATE: MemoryGate = MemoryGate::new(100);
        static PEAK: AtomicU64 = AtomicU64::new(0);
        std::thread::scope(|s| {
            for m in 0..4u64 {
                s.spawn(move || {
                    let mut seen = 0;
                    for_each_ordered::<_, _, ()>(
                        60,
                        3,
                        &GATE,
                        // Some items larger than the whole budget.
                        |i| {
                            if i % 17 == 0 {
                                150
                            } else {
                                10 + (m + i as u64) % 30
                            }
                        },
                        || (),
                        |_, i| {
                            PEAK.fetch_max(GATE.in_use(), Ordering::Relaxed);
                            Ok((i, 0))
                        },
                        |i, r| {
                            assert_eq!((i, r), (seen, seen));
                            seen += 1;
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert_eq!(seen, 60);
                });
            }
        });
        assert!(PEAK.load(Ordering::Relaxed) <= 150);
        assert_eq!(GATE.in_use(), 0);
    }
}
