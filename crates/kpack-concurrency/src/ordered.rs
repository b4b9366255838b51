//! Parallel work whose results are consumed in order, with the memory in flight bounded.
//!
//! Transforming a library decodes its bundles (up to 100 MB each decompressed) on worker
//! threads and appends their compressed code objects to the archives in file order, so the
//! output is the same for any thread count. Each item has a cost (the bytes it holds while in
//! flight); items are admitted in index order while the costs of those admitted and not yet
//! consumed fit the budget (an item is always admitted when nothing else is in flight, so
//! one larger than the budget still runs, alone). Admission in index order means the next
//! item to consume is always admitted or next in line, so the pipeline cannot deadlock.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Condvar, Mutex, MutexGuard};

/// How many items may be in flight, in bytes.
pub const DEFAULT_BUDGET: u64 = 192 << 20;

type Outcome<R, E> = std::thread::Result<Result<R, E>>;

struct State<R, E> {
    next: usize,
    in_flight: u64,
    done: BTreeMap<usize, Outcome<R, E>>,
    stop: bool,
}

/// Runs `work(&mut local, i)` for `i` in `0..n` on `threads` workers (each with its own
/// `local = init()`), and `sink(i, result)` on the calling thread in index order. Stops at
/// the first error (of `work` or `sink`) and returns it; a panic in `work` is resumed here.
pub fn for_each_ordered<L, R: Send, E: Send>(
    n: usize,
    threads: usize,
    budget: u64,
    cost: impl Fn(usize) -> u64 + Sync,
    init: impl Fn() -> L + Sync,
    work: impl Fn(&mut L, usize) -> Result<R, E> + Sync,
    mut sink: impl FnMut(usize, R) -> Result<(), E>,
) -> Result<(), E> {
    let state = Mutex::new(State {
        next: 0,
        in_flight: 0,
        done: BTreeMap::new(),
        stop: false,
    });
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
                    let i = {
                        let mut st = lock();
                        loop {
                            if st.stop || st.next >= n {
                                return;
                            }
                            let c = cost(st.next);
                            if st.in_flight == 0 || st.in_flight.saturating_add(c) <= budget {
                                st.in_flight += c;
                                st.next += 1;
                                break st.next - 1;
                            }
                            st = wait(&changed, st);
                        }
                    };
                    let outcome = catch_unwind(AssertUnwindSafe(|| work(&mut local, i)));
                    lock().done.insert(i, outcome);
                    changed.notify_all();
                }
            });
        }
        let result = (|| {
            for i in 0..n {
                let outcome = {
                    let mut st = lock();
                    loop {
                        if let Some(o) = st.done.remove(&i) {
                            break o;
                        }
                        st = wait(&changed, st);
                    }
                };
                let result = match outcome {
                    Ok(r) => r.and_then(|r| sink(i, r)),
                    Err(panic) => {
                        lock().stop = true;
                        changed.notify_all();
                        resume_unwind(panic);
                    }
                };
                lock().in_flight -= cost(i);
                changed.notify_all();
                result?;
            }
            Ok(())
        })();
        lock().stop = true;
        changed.notify_all();
        result
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_arrive_in_order_for_any_thread_count_and_budget() {
        for threads in [1, 2, 7] {
            for budget in [0, 3, 1000] {
                let mut seen = Vec::new();
                for_each_ordered::<_, _, ()>(
                    50,
                    threads,
                    budget,
                    |i| (i % 5) as u64,
                    || 0usize,
                    |calls, i| {
                        *calls += 1;
                        Ok(i * 2)
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
        let r = for_each_ordered(
            100,
            3,
            10,
            |_| 1,
            || (),
            |_, i| if i == 40 || i == 60 { Err(i) } else { Ok(i) },
            |_, _| Ok(()),
        );
        assert_eq!(r, Err(40));
        let r = for_each_ordered(
            100,
            3,
            10,
            |_| 1,
            || (),
            |_, i| Ok::<_, usize>(i),
            |i, _| if i == 7 { Err(7) } else { Ok(()) },
        );
        assert_eq!(r, Err(7));
    }
}
