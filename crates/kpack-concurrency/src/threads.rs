//! How many worker threads kpack's pools use: one per core, unless the process set a limit
//! ([`set_limit`]: the CLI's `--threads`, for runners shared with other jobs). Every pool
//! asks here, so one setting bounds them all. Output never depends on the count: each pool
//! places its results in input order.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// The process-wide limit; 0 = one per core.
static LIMIT: AtomicUsize = AtomicUsize::new(0);

/// Limits every pool of this process to `threads` workers; 0 lifts the limit. rayon's
/// global pool (the `unified` coder's) is sized by the first call, if rayon has not started
/// it already: call this before any work.
pub fn set_limit(threads: usize) {
    LIMIT.store(threads, Ordering::Relaxed);
    // An error means the pool exists already; its size then stays as it was.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global();
}

/// Workers for a pool: `requested` when not 0, else the process limit, else one per core.
pub fn count(requested: usize) -> usize {
    if requested > 0 {
        return requested;
    }
    match LIMIT.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        limit => limit,
    }
}

/// Runs `f` over `items` on `threads` workers (from [`count`]); results come back in item
/// order, and on failure the error of the first failing item (in item order) is returned, so
/// the outcome never depends on scheduling. Workers stop taking items after a failure.
///
/// Scoped std threads, not rayon: the tasks of kpack's file-level pools (split, recombine
/// and verify of artifacts, publishing split wheels) hold reservations of a
/// [`MemoryGate`](crate::MemoryGate) (decoded bundles, compression contexts) while the `unified`
/// coder inside them runs on rayon's pool. Were these tasks rayon's too, a rayon worker
/// blocked on the gate would be one the coder waits for, and with every worker so blocked
/// nothing would release the gate: a deadlock.
pub fn map<T: Sync, R: Send, E: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(usize, &T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Vec<Mutex<Option<Result<R, E>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = f(i, &items[i]);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
                }
            });
        }
    });
    let mut out = Vec::with_capacity(items.len());
    for slot in slots {
        match slot.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(r)) => out.push(r),
            Some(Err(e)) => return Err(e),
            // Items are taken in order and skipped only once one has failed, so that
            // failure came first.
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::map;

    #[test]
    fn a_map_returns_results_in_item_order_whatever_the_thread_count() {
        let items: Vec<u32> = (0..100).collect();
        for threads in [1, 3, 200] {
            let out = map(&items, threads, |i, x| Ok::<_, ()>((i, x * 2))).unwrap();
            assert_eq!(
                out,
                items
                    .iter()
                    .map(|&x| (x as usize, x * 2))
                    .collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_failed_map_returns_the_first_failing_items_error() {
        let items: Vec<u32> = (0..100).collect();
        for threads in [1, 3, 200] {
            let r = map(
                &items,
                threads,
                |_, &x| if x % 10 == 7 { Err(x) } else { Ok(x) },
            );
            assert_eq!(r, Err(7));
        }
    }
}
