//! How many worker threads kpack's pools use: one per core, unless the process set a limit
//! ([`set_limit`]: the CLI's `--threads`, for runners shared with other jobs). Every pool
//! asks here, so one setting bounds them all. Output never depends on the count: each pool
//! places its results in input order.

use std::sync::atomic::{AtomicUsize, Ordering};

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
