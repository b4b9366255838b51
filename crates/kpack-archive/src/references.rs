//! The decoded `unified` reference frames an archive keeps, so that the entries coded against
//! one frame decode it once while they are read, not once each ([`crate::unified`]: a leaf
//! decodes its middle and root frames first). Reading every entry of librocsparse's v2
//! archive decoded 1.8× the bytes of its v1 archive without it.
//!
//! Bounded by bytes held ([`REFERENCE_CACHE_BUDGET`]), least recently used out first; a frame
//! larger than the budget is decoded each time instead. Shared by every thread reading the
//! archive behind one lock held only to look up or insert, never while decoding: two threads
//! missing the same frame both decode it, and the second insert is dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Bytes of decoded reference frames one archive holds at most. A group's root and middle
/// frames are a few code objects (librocsparse's are 1.7 MB on average), and a process may
/// hold an archive per library it loads.
pub const REFERENCE_CACHE_BUDGET: usize = 32 << 20;

#[derive(Default)]
pub(crate) struct ReferenceCache {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    /// Least recently used first.
    frames: VecDeque<(u32, Arc<Vec<u8>>)>,
    bytes: usize,
}

impl ReferenceCache {
    /// The decoded content of frame `ordinal`, if held; it becomes the most recently used.
    pub(crate) fn get(&self, ordinal: u32) -> Option<Arc<Vec<u8>>> {
        let mut held = self.lock();
        let i = held.frames.iter().position(|(o, _)| *o == ordinal)?;
        let frame = held.frames.remove(i)?;
        let content = Arc::clone(&frame.1);
        held.frames.push_back(frame);
        Some(content)
    }

    /// Holds `content` as frame `ordinal`'s, dropping the least recently used frames beyond
    /// the budget.
    pub(crate) fn insert(&self, ordinal: u32, content: Arc<Vec<u8>>) {
        if content.len() > REFERENCE_CACHE_BUDGET {
            return;
        }
        let mut held = self.lock();
        if held.frames.iter().any(|(o, _)| *o == ordinal) {
            return;
        }
        held.bytes += content.len();
        held.frames.push_back((ordinal, content));
        while held.bytes > REFERENCE_CACHE_BUDGET {
            let Some((_, dropped)) = held.frames.pop_front() else {
                break;
            };
            held.bytes -= dropped.len();
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Nothing in the cache can be left inconsistent by a panic (it holds no invariant across
    /// a call that could panic), so a poisoned lock is still good.
    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> Arc<Vec<u8>> {
        Arc::new(vec![0u8; len])
    }

    #[test]
    fn holds_at_most_the_budget_dropping_the_least_recently_used() {
        let cache = ReferenceCache::default();
        let third = REFERENCE_CACHE_BUDGET / 3;
        cache.insert(0, frame(third));
        cache.insert(1, frame(third));
        cache.insert(2, frame(third));
        assert!(cache.get(0).is_some(), "0 becomes the most recent");
        cache.insert(3, frame(third));
        assert!(cache.get(1).is_none(), "1 was the least recently used");
        assert!(cache.get(0).is_some() && cache.get(2).is_some() && cache.get(3).is_some());
        assert!(cache.bytes() <= REFERENCE_CACHE_BUDGET);
        assert_eq!(cache.bytes(), 3 * third);
    }

    #[test]
    fn a_frame_larger_than_the_budget_is_not_held() {
        let cache = ReferenceCache::default();
        cache.insert(0, frame(REFERENCE_CACHE_BUDGET + 1));
        assert!(cache.get(0).is_none());
        assert_eq!(cache.bytes(), 0);
    }
}
