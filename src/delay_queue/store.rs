//! Where a delay queue keeps its items: shards of slabs, one lock each, a thread inserting into
//! the shard its thread picks. A key names its slot by index; `compact` moves items into the holes
//! and records where (`moved`, and back: `moved_from`), where a look-up that misses looks.
//!
//! No user code runs under a shard's lock (but wakers a refused `put` drops): items leave it first.
//! The locks are loom's under `cfg(loom)`, so that the models in `tests/loom/` see them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use slab::Slab;

use crate::delay_queue::key::{DelayKey, GENERATION_MASK};
use crate::engine::{clock::Nanos, entry::key::Key, sync::lock, sync::Mutex, sync::MutexGuard};

/// An item, and its timer entry.
pub(crate) struct Slot<T> {
    /// Its key's generation: the rest of the key is where it is, unless `compact` moved it.
    generation: u32,
    /// Holds one of the entry's references, given back when the item leaves: not a `Timeout`, whose
    /// `Arc` of the timer each insert and removal would count on a line both cores write.
    pub(crate) entry: Key,
    /// The entry's deadline, kept as it is reset: reading it loads no entry.
    pub(crate) deadline: Nanos,
    pub(crate) item: T,
}

pub(crate) struct Shard<T> {
    index: u32,
    pub(crate) slots: Slab<Slot<T>>,
    next_generation: u32,
    /// Where `compact` moved the items it moved, by key, and their keys by where they are.
    moved: HashMap<DelayKey, usize>,
    moved_from: HashMap<usize, DelayKey>,
}

pub(crate) struct Store<T> {
    shards: Box<[CachePadded<Mutex<Shard<T>>>]>,
}

impl<T> Store<T> {
    /// A store with room for `capacity` items in this thread's shard (see `Shard::reserve`).
    pub(crate) fn new(capacity: usize, limit: usize) -> Store<T> {
        // Queues start generations apart: a key of one names nothing in another but by chance.
        static NEXT_QUEUE: AtomicU32 = AtomicU32::new(1);
        let start = NEXT_QUEUE
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9);
        let store = Store {
            shards: shards(|index| Shard {
                index: index as u32,
                slots: Slab::new(),
                next_generation: start,
                moved: HashMap::new(),
                moved_from: HashMap::new(),
            }),
        };
        store.lock_mine().reserve(capacity, limit);
        store
    }

    /// This thread's shard: threads are numbered as they first ask, so they spread over the shards.
    pub(crate) fn lock_mine(&self) -> MutexGuard<'_, Shard<T>> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static HINT: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        lock(&self.shards[HINT.with(|hint| *hint) & (self.shards.len() - 1)])
    }

    /// The shard `key` names, locked, if it is one of this queue's.
    pub(crate) fn lock_of(&self, key: &DelayKey) -> Option<MutexGuard<'_, Shard<T>>> {
        self.shards.get(key.shard()).map(|s| lock(s))
    }

    pub(crate) fn each(&self) -> impl Iterator<Item = MutexGuard<'_, Shard<T>>> {
        self.shards.iter().map(|s| lock(s))
    }
}

impl<T> Shard<T> {
    /// Where the next item goes: its key, before its timeout is known.
    pub(crate) fn next_key(&mut self) -> DelayKey {
        self.next_generation = self.next_generation.wrapping_add(1) & GENERATION_MASK;
        DelayKey::new(self.index, self.slots.vacant_key(), self.next_generation)
    }

    /// Room for `additional` more items, `limit` in all, if memory allows: a hint, never an abort.
    pub(crate) fn reserve(&mut self, additional: usize, limit: usize) {
        let additional = additional.min(limit.saturating_sub(self.slots.len()));
        let mut probe = Vec::<(usize, Slot<T>)>::new(); // entries no smaller than slab's
        let wanted = self.slots.len() + additional;
        if self.slots.capacity() < wanted && probe.try_reserve_exact(wanted).is_ok() {
            drop(probe); // before slab allocates
            self.slots.reserve(additional);
        }
    }

    /// Stores the item `key` names, `key` being the last from `next_key`.
    pub(crate) fn put(&mut self, key: DelayKey, entry: Key, deadline: Nanos, item: T) {
        let index = self.slots.insert(Slot {
            generation: key.generation(),
            entry,
            deadline,
            item,
        });
        debug_assert_eq!(index, key.index());
    }

    pub(crate) fn key_at(&self, index: usize, slot: &Slot<T>) -> DelayKey {
        let key = || DelayKey::new(self.index, index, slot.generation);
        self.moved_from.get(&index).copied().unwrap_or_else(key)
    }

    /// Where the item `key` names is now, if it is still here. Generations tell items apart: a
    /// shard hands out 2^30 before one comes again.
    fn find(&self, key: &DelayKey) -> Option<usize> {
        let holds = |index: usize| {
            let slot = self.slots.get(index);
            slot.is_some_and(|slot| slot.generation == key.generation())
        };
        if holds(key.index()) {
            return Some(key.index());
        }
        let index = *self.moved.get(key)?;
        holds(index).then_some(index)
    }

    /// The key of the fired item whose notice carried `token` (`DelayKey::token`), if it is still
    /// here: at the token's index, or moved from there by `compact`, its generation's low bits the
    /// token's and its entry's notice gone out (`fired`). (The bits alone may name an item inserted
    /// since, its notice still in its entry, pending or stopped: `fired` tells it apart. One whose
    /// notice went out meanwhile may come out instead; its own notice then finds nothing.)
    pub(crate) fn fired_key(&self, token: u64, fired: impl Fn(Key) -> bool) -> Option<DelayKey> {
        let named = DelayKey::from_token(token);
        let here = |index: usize| {
            let slot = self.slots.get(index)?;
            let yes = named.low_generation_of(slot.generation) && fired(slot.entry);
            yes.then(|| self.key_at(index, slot))
        };
        here(named.index()).or_else(|| {
            let mut from_there = self
                .moved
                .iter()
                .filter(|(key, _)| key.index() == named.index());
            from_there.find_map(|(_, &to)| here(to))
        })
    }

    /// The slot `key` names, if it still holds that item.
    pub(crate) fn get(&mut self, key: &DelayKey) -> Option<&mut Slot<T>> {
        self.find(key).map(|index| &mut self.slots[index])
    }

    /// Takes out the slot `key` names, if it still holds that item.
    pub(crate) fn take(&mut self, key: &DelayKey) -> Option<Slot<T>> {
        let index = self.find(key)?;
        if !self.moved.is_empty() {
            self.moved.remove(key);
            self.moved_from.remove(&index);
        }
        Some(self.slots.remove(index))
    }

    /// Moves items into the holes removals left, and gives back the
    /// memory past the last: `capacity` becomes `len`.
    pub(crate) fn compact(&mut self) {
        let (shard, moved, moved_from) = (self.index, &mut self.moved, &mut self.moved_from);
        self.slots.compact(|slot, from, to| {
            let key = moved_from.remove(&from);
            let key = key.unwrap_or_else(|| DelayKey::new(shard, from, slot.generation));
            moved.insert(key, to);
            moved_from.insert(to, key);
            true
        });
        moved.shrink_to_fit();
        moved_from.shrink_to_fit();
    }

    pub(crate) fn take_all(&mut self) -> Slab<Slot<T>> {
        self.moved.clear();
        self.moved_from.clear();
        std::mem::take(&mut self.slots)
    }
}

/// The shards of a store, or of a `DelayMap`'s map, `make(index)` each, behind locks on cache
/// lines of their own: two per core rounded up to a power of two, from 2 to 64.
pub(crate) fn shards<S>(make: impl FnMut(usize) -> S) -> Box<[CachePadded<Mutex<S>>]> {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new(); // a look at /proc
    let count = *COUNT.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        (threads * 2).next_power_of_two().clamp(2, 64)
    });
    (0..count)
        .map(make)
        .map(|s| CachePadded::new(Mutex::new(s)))
        .collect()
}
