//! The timer's entries, in an arena: no allocation per timeout, and the wheel's links live in the
//! entry itself. An entry is named by its [`Key`], an index. Its `refs` count says who still names
//! it: the timer (from `schedule` until the worker is done with it), each `Timeout` and `Sleep`,
//! and a key in the driver's mailbox. A key is never used after its holder released it, so a reused
//! slot is never mistaken for its previous entry.
//!
//! Entries sit in chunks of `CHUNK` under a two-level directory, each chunk allocated with its
//! first key and kept until the timer drops. Entries are packed, 32 bytes each:
//! a cache line apiece measured no faster in the RPC pattern (ARCHITECTURE.md). A freed slot goes
//! to its thread's lane if it has room (`intake/lane.rs`), else to the shared free list.

use std::sync::OnceLock;

use crate::engine::entry::{key::Key, Entry};
use crate::engine::sync::{AtomicU64, Ordering, Queue};
#[cfg(test)]
use crate::engine::{clock::Nanos, entry::task::Task};

/// Entries per chunk (a few under loom, which tracks every atomic).
const CHUNK_BITS: u32 = if cfg!(loom) { 2 } else { 10 };
const CHUNK: usize = 1 << CHUNK_BITS;
/// Chunks per table, and tables in the directory (fewer under loom, whose models leak them).
const TABLE_BITS: u32 = if cfg!(loom) { 3 } else { 9 };
const TABLE: usize = 1 << TABLE_BITS;

/// Entries a timer holds at once, live or still named: 2^28 (12 GiB).
pub(crate) const MAX_ENTRIES: usize = CHUNK * TABLE * TABLE;

// Fixed-size arrays: masked indices need no bounds checks.
type Chunk = Box<[Entry; CHUNK]>;
type Table = Box<[OnceLock<Chunk>; TABLE]>;

pub(crate) struct Slots {
    directory: Box<[OnceLock<Table>; TABLE]>,
    free: Queue<Key>,
    /// Keys below this have been handed out at least once.
    fresh: AtomicU64,
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            directory: boxed_array(OnceLock::new),
            free: Queue::new(),
            fresh: AtomicU64::new(0),
        }
    }

    /// The entry named by `key`, which the caller holds a reference to.
    #[inline]
    pub(crate) fn get(&self, key: Key) -> &Entry {
        let i = key.index();
        let table = self.directory[(i >> (CHUNK_BITS + TABLE_BITS)) & (TABLE - 1)]
            .get()
            .expect("a held key's table exists");
        let chunk = table[(i >> CHUNK_BITS) & (TABLE - 1)]
            .get()
            .expect("a held key's chunk exists");
        &chunk[i & (CHUNK - 1)]
    }

    /// A new pending entry holding `refs` references; `None` at `MAX_ENTRIES`.
    #[cfg(test)]
    pub(crate) fn insert(&self, deadline: Nanos, task: Task, refs: u32) -> Option<Key> {
        let key = self.take_key()?;
        self.get(key).occupy(deadline, task, refs);
        Some(key)
    }

    /// A vacant slot to fill: a freed one, or a fresh one, its chunk
    /// allocated. `None` when `MAX_ENTRIES` are taken.
    pub(crate) fn take_key(&self) -> Option<Key> {
        if let Some(key) = self.free.pop() {
            return Some(key);
        }
        let i = self
            .fresh
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_ENTRIES as u64).then_some(n + 1)
            })
            .ok()? as usize;
        let table = self.directory[(i >> (CHUNK_BITS + TABLE_BITS)) & (TABLE - 1)]
            .get_or_init(|| boxed_array(OnceLock::new));
        table[(i >> CHUNK_BITS) & (TABLE - 1)].get_or_init(|| boxed_array(Entry::vacant));
        Key::unpack(i as u32 + 1) // entry i's key
    }

    /// Gives up one reference; the last frees the slot and drops any task left.
    #[inline]
    pub(crate) fn release(&self, key: Key) {
        let entry = self.get(key);
        if entry.release(1) {
            drop(entry.vacate());
            self.push_free(key);
        }
    }

    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.fresh.load(Ordering::Acquire) as usize - self.free.len()
    }

    pub(crate) fn push_free(&self, key: Key) {
        self.free.push(key);
    }
}

/// Under loom, leaked: loom cannot see std's `Arc`, so it would see the
/// last `Arc`'s drop of the arena racing every entry's last user.
#[cfg(loom)]
impl Drop for Slots {
    fn drop(&mut self) {
        std::mem::forget(std::mem::replace(
            &mut self.directory,
            boxed_array(OnceLock::new),
        ));
    }
}

/// `[make(); N]` on the heap, without building it on the stack first.
pub(crate) fn boxed_array<T, const N: usize>(make: impl FnMut() -> T) -> Box<[T; N]> {
    let items: Box<[T]> = std::iter::repeat_with(make).take(N).collect();
    items
        .try_into()
        .unwrap_or_else(|_| unreachable!("took exactly N items"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_release_frees_the_slot_for_reuse_first_and_drops_an_untaken_task() {
        let slots = Slots::new();
        let keys: Vec<Key> = (0..4)
            .map(|i| slots.insert(i as u64, Task::Wake(None), 2).unwrap())
            .collect();
        assert_eq!(slots.live(), 4);
        let a = keys[1];
        slots.release(a);
        assert_eq!(slots.live(), 4, "a still has a reference");
        slots.release(a);
        assert_eq!(slots.live(), 3);
        let c = slots.insert(9, Task::Wake(None), 1).unwrap();
        assert_eq!(c, a, "the freed slot comes back");
        assert_eq!(slots.get(c).deadline(), 9);
        keys.iter().for_each(|&k| slots.release(k));
        keys.iter()
            .filter(|&&k| k != a)
            .for_each(|&k| slots.release(k));
        assert_eq!(slots.live(), 0);

        let alive = std::sync::Arc::new(());
        let held = alive.clone();
        let task = Task::callback(move |_: &crate::Timeout| drop(held));
        let key = slots.insert(0, task, 2).unwrap();
        slots.release(key);
        assert_eq!(std::sync::Arc::strong_count(&alive), 2, "not yet dropped");
        slots.release(key);
        assert_eq!(std::sync::Arc::strong_count(&alive), 1, "dropped");
    }

    #[test]
    #[cfg_attr(miri, ignore = "half a million entries: too slow under Miri")]
    fn keys_cross_chunks_and_tables() {
        let slots = Slots::new();
        let n = CHUNK * TABLE + 3 * CHUNK + 5;
        let keys: Vec<Key> = (0..n)
            .map(|i| slots.insert(i as u64, Task::Wake(None), 1).unwrap())
            .collect();
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(slots.get(key).deadline(), i as u64);
        }
        keys.iter().for_each(|&k| slots.release(k));
        assert_eq!(slots.live(), 0);
    }

    #[test]
    fn concurrent_insert_and_release_never_share_a_slot() {
        let slots = Slots::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let slots = &slots;
                s.spawn(move || {
                    for i in 0..if cfg!(miri) { 200 } else { 20_000u64 } {
                        let mark = t << 32 | i;
                        let key = slots.insert(mark, Task::Wake(None), 1).unwrap();
                        assert_eq!(slots.get(key).deadline(), mark, "slot shared");
                        slots.release(key);
                    }
                });
            }
        });
        assert_eq!(slots.live(), 0);
    }
}
