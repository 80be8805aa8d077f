//! The timer's entries, in an arena: no allocation per timeout, no
//! allocator header, and the wheel's links live in the entry itself.
//!
//! # Keys and references
//!
//! An entry is named by its [`Key`], an index. Its `refs` count says who
//! still names it: the timer (from `schedule` until the worker is done with
//! it), each `Timeout` handle and `Sleep`, and a key in the driver's
//! mailbox. The last `release` takes what is left of the task and frees the
//! slot for the next `schedule`. A key is never used after its holder
//! released it, so a reused slot is never mistaken for its previous entry.
//!
//! # Layout
//!
//! Chunks of `CHUNK` entries, found through a two-level directory of lazily
//! allocated tables. A chunk is allocated when its first key is handed out,
//! so a timer's memory follows its peak of live entries, not its capacity;
//! like a `Vec`'s capacity, it is kept until the timer is dropped: a freed
//! slot is reused, not returned.
//!
//! A chunk is made of cache-line-aligned *lines* of `LINE` entries, and
//! fresh keys are handed out a line at a time: the taker keeps the spares
//! on its lane, so two threads' hot entries never share a cache line.
//!
//! # The free list
//!
//! A freed slot goes to its thread's lane if it has room (see `lane/`), and
//! otherwise to the shared free list, a crossbeam `SegQueue`.

use std::sync::OnceLock;

use crossbeam_queue::SegQueue;

#[cfg(test)]
use crate::engine::clock::Nanos;
use crate::engine::entry::key::Key;
use crate::engine::entry::Entry;

#[cfg(test)]
use crate::engine::entry::task::Task;
use crate::engine::sync::{AtomicU64, Ordering};

/// Entries per chunk (a few under loom, which tracks every atomic).
const CHUNK_BITS: u32 = if cfg!(loom) { 2 } else { 10 };
const CHUNK: usize = 1 << CHUNK_BITS;
/// Chunks per table, and tables in the directory.
const TABLE_BITS: u32 = 9;
const TABLE: usize = 1 << TABLE_BITS;

/// How many entries one timer can hold at once: live timeouts, and those
/// still named by a handle. 2^28, about 15 GB of entries.
pub(crate) const MAX_ENTRIES: usize = CHUNK * TABLE * TABLE;

/// Entries per line: 8 × 56 bytes fill seven cache lines exactly (loom's
/// chunks hold only 4).
const LINE: usize = if cfg!(loom) { 4 } else { 8 };

/// A chunk's entries, starting on a cache line. A line is `LINE` entries
/// from a multiple of `LINE`: it fills whole cache lines, so it shares
/// none with another line. (A flat array, not an array of lines, so that
/// finding an entry is one multiplication: lines cost 15 instructions per
/// schedule+cancel.) `repr(C)`: the array starts the struct.
#[repr(C, align(64))]
struct Entries([Entry; CHUNK]);

#[cfg(not(loom))]
const _: () = assert!((LINE * std::mem::size_of::<Entry>()) % 64 == 0);

// Fixed-size arrays: masked indices need no bounds checks.
type Chunk = Box<Entries>;
type Table = Box<[OnceLock<Chunk>; TABLE]>;

pub(crate) struct Slots {
    directory: Box<[OnceLock<Table>; TABLE]>,
    /// Vacant slots freed by threads whose lane had no room.
    free: SegQueue<Key>,
    /// Keys below this have been handed out at least once.
    fresh: AtomicU64,
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            directory: boxed_array(OnceLock::new),
            free: SegQueue::new(),
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
        &chunk.0[i & (CHUNK - 1)]
    }

    /// A new pending entry holding `refs` references; `None` at `MAX_ENTRIES`.
    #[cfg(test)]
    pub(crate) fn insert(&self, deadline: Nanos, task: Task, refs: u32) -> Option<Key> {
        let key = self.take_key(|_, _| false)?;
        self.get(key).occupy(deadline, task, refs);
        Some(key)
    }

    /// A vacant slot for the caller to fill: a freed one, or the first of a
    /// fresh line, whose other slots go to `keep` (or, if it declines them,
    /// to the free list). `None` when `MAX_ENTRIES` are taken.
    pub(crate) fn take_key(&self, mut keep: impl FnMut(Key, &Entry) -> bool) -> Option<Key> {
        if let Some(key) = self.free.pop() {
            return Some(key);
        }
        let first = self.fresh_line()?;
        for spare in (first.index() as u32 + 1..first.index() as u32 + LINE as u32).map(Key::at) {
            let entry = self.get(spare);
            if !keep(spare, entry) {
                self.push_free(spare);
            }
        }
        Some(first)
    }

    /// One more reference to `key`, for a caller that holds one already.
    #[inline]
    pub(crate) fn retain(&self, key: Key) {
        self.get(key).retain();
    }

    /// Gives up one reference. The last one frees the slot, dropping the
    /// task if nobody took it.
    #[inline]
    pub(crate) fn release(&self, key: Key) {
        let entry = self.get(key);
        if entry.release() {
            drop(entry.vacate());
            self.push_free(key);
        }
    }

    /// `release` under the core lock, where no user code may run: the
    /// entry's task must be gone already (taken by whoever ended it). Tests
    /// and loom models check it; elsewhere a task left behind is still
    /// dropped, its panic caught.
    pub(crate) fn release_locked(&self, key: Key) {
        let entry = self.get(key);
        if entry.release() {
            let left = entry.vacate();
            #[cfg(any(debug_assertions, loom))]
            assert!(left.is_none(), "a task was dropped under the core lock");
            drop(left);
            self.push_free(key);
        }
    }

    /// Entries handed out and not yet freed; for tests and debugging.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.fresh.load(Ordering::Acquire) as usize - self.free.len()
    }

    /// The first key of a line never handed out, its chunk allocated.
    fn fresh_line(&self) -> Option<Key> {
        let i = self
            .fresh
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_ENTRIES as u64).then_some(n + LINE as u64)
            })
            .ok()? as usize;
        let table = self.directory[(i >> (CHUNK_BITS + TABLE_BITS)) & (TABLE - 1)]
            .get_or_init(|| boxed_array(OnceLock::new));
        table[(i >> CHUNK_BITS) & (TABLE - 1)].get_or_init(new_chunk);
        Some(Key::at(i as u32))
    }

    /// Puts the vacated `key` on the shared free list.
    pub(crate) fn push_free(&self, key: Key) {
        self.free.push(key);
    }
}

/// Under loom, the arena is leaked, not dropped. The timer's last `Arc`
/// drops it after every other thread's last touch of an entry, but loom
/// cannot see std's `Arc`, so it would see that drop racing every entry's
/// last user.
#[cfg(loom)]
impl Drop for Slots {
    fn drop(&mut self) {
        std::mem::forget(std::mem::replace(
            &mut self.directory,
            boxed_array(OnceLock::new),
        ));
    }
}

/// A chunk of vacant entries, built in place on the heap: built on the
/// stack, its 40 KiB overflowed small thread stacks in debug builds, and
/// std's safe way (`Box::new_uninit`) needs Rust 1.82.
fn new_chunk() -> Chunk {
    let layout = std::alloc::Layout::new::<Entries>();
    // SAFETY: `Entries` is not zero-sized.
    let raw = unsafe { std::alloc::alloc(layout) }.cast::<Entries>();
    if raw.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    let first = raw.cast::<Entry>();
    for i in 0..CHUNK {
        // SAFETY: `Entries` is `repr(C)` around `[Entry; CHUNK]`, so entry
        // `i` is at `first + i`, inside the allocation; each is written
        // once, before anything reads it.
        unsafe { first.add(i).write(Entry::vacant()) };
    }
    // SAFETY: allocated by the global allocator with `Entries`' layout,
    // and every entry of it is now initialised.
    unsafe { Box::from_raw(raw) }
}

/// `[make(); N]` on the heap, without building it on the stack first.
fn boxed_array<T, const N: usize>(make: impl FnMut() -> T) -> Box<[T; N]> {
    let items: Box<[T]> = std::iter::repeat_with(make).take(N).collect();
    match items.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("took exactly N items"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::Wake(None)
    }

    #[test]
    fn a_released_slot_is_reused_before_a_fresh_one() {
        let slots = Slots::new();
        let line: Vec<Key> = (0..LINE)
            .map(|i| slots.insert(i as u64, task(), 2).unwrap())
            .collect();
        assert_eq!(slots.live(), LINE, "one line, all in use");
        let a = line[1];
        slots.release(a);
        assert_eq!(slots.live(), LINE, "a still has a reference");
        slots.release(a);
        assert_eq!(slots.live(), LINE - 1);
        let c = slots.insert(9, task(), 1).unwrap();
        assert_eq!(c, a, "the freed slot comes back");
        assert_eq!(slots.get(c).deadline(), 9);
        line.iter().for_each(|&k| slots.release(k));
        line.iter()
            .filter(|&&k| k != a)
            .for_each(|&k| slots.release(k));
        assert_eq!(slots.live(), 0);
    }

    #[test]
    fn fresh_lines_start_on_a_cache_line_and_spares_go_to_the_taker() {
        let slots = Slots::new();
        let mut kept = Vec::new();
        let first = slots.take_key(|key, _| {
            kept.push(key);
            true
        });
        let first = first.unwrap();
        assert_eq!(kept.len(), LINE - 1, "the rest of the line");
        let second = slots.take_key(|_, _| true).unwrap();
        assert_eq!(second.index(), first.index() + LINE, "a new line");
        for key in [first, second] {
            let at = slots.get(key) as *const Entry as usize;
            assert_eq!(at % 64, 0, "line {key:?} starts a cache line");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "half a million entries: too slow under Miri")]
    fn keys_cross_chunks_and_tables() {
        let slots = Slots::new();
        let n = CHUNK * TABLE + 3 * CHUNK + 5;
        let keys: Vec<Key> = (0..n)
            .map(|i| slots.insert(i as u64, task(), 1).unwrap())
            .collect();
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(slots.get(key).deadline(), i as u64);
        }
        keys.iter().for_each(|&k| slots.release(k));
        assert_eq!(slots.live(), 0);
    }

    #[test]
    fn the_last_release_drops_an_untaken_task() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dropped = Arc::new(AtomicBool::new(false));
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Flag(dropped.clone());
        let slots = Slots::new();
        let task = Task::callback(Box::new(move |_: &crate::Timeout| drop(flag)));
        let key = slots.insert(0, task, 2).unwrap();
        slots.release(key);
        assert!(!dropped.load(Ordering::SeqCst));
        slots.release(key);
        assert!(dropped.load(Ordering::SeqCst));
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
                        let key = slots.insert(mark, task(), 1).unwrap();
                        assert_eq!(slots.get(key).deadline(), mark, "slot shared");
                        slots.release(key);
                    }
                });
            }
        });
        assert_eq!(slots.live(), 0);
    }
}
