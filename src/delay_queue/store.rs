//! Where a delay queue keeps its items: shards of slabs, each behind its own
//! lock, a thread inserting into the shard its thread picks. An item's slot
//! holds the item and the timeout that will tell the stream its key.
//!
//! No user code runs under a shard's lock: items are taken out, and
//! dropped or returned after it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_utils::CachePadded;
use slab::Slab;

use crate::delay_queue::key::DelayKey;
use crate::delay_queue::stream::{listener, Signal};
use crate::engine::task::Listener;
use crate::Timeout;

/// An item and its timeout.
pub(crate) struct Slot<T> {
    pub(crate) generation: u64,
    pub(crate) timeout: Timeout,
    pub(crate) item: T,
}

pub(crate) struct Shard<T> {
    pub(crate) slots: Slab<Slot<T>>,
    next_generation: u64,
    /// What this shard's items' timeouts notify when they fire.
    pub(crate) listener: Arc<Listener>,
}

pub(crate) struct Store<T> {
    shards: Box<[CachePadded<Mutex<Shard<T>>>]>,
}

/// Bits of a generation below the queue's id: 2^40 inserts per shard.
const QUEUE_ID_SHIFT: u32 = 40;

impl<T> Store<T> {
    pub(crate) fn new(signal: &Arc<Signal>) -> Store<T> {
        static NEXT_QUEUE: AtomicU64 = AtomicU64::new(1);
        let queue = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        let count = (threads * 2).next_power_of_two().clamp(2, 64);
        let shards = (0..count)
            .map(|index| {
                CachePadded::new(Mutex::new(Shard {
                    slots: Slab::new(),
                    next_generation: queue << QUEUE_ID_SHIFT,
                    listener: listener(signal, index as u32),
                }))
            })
            .collect();
        Store { shards }
    }

    /// This thread's shard, locked, and its index.
    pub(crate) fn lock_mine(&self) -> (u32, MutexGuard<'_, Shard<T>>) {
        let index = thread_hint() & (self.shards.len() - 1);
        (index as u32, lock(&self.shards[index]))
    }

    /// The shard `key` names, locked, if it is one of this queue's.
    pub(crate) fn lock_of(&self, key: &DelayKey) -> Option<MutexGuard<'_, Shard<T>>> {
        self.shards.get(key.shard as usize).map(|s| lock(s))
    }

    /// Takes out the item whose timeout fired with `token` in `shard`, and
    /// gives its key, if the slot still holds that item.
    pub(crate) fn take_fired(&self, shard: u32, token: u64) -> Option<(DelayKey, Slot<T>)> {
        let index = (token >> 32) as usize;
        let mut guard = lock(self.shards.get(shard as usize)?);
        let slot = guard.slots.get(index)?;
        if slot.generation & 0xffff_ffff != token & 0xffff_ffff {
            return None;
        }
        let slot = guard.slots.remove(index);
        let key = DelayKey {
            shard,
            index: index as u32,
            generation: slot.generation,
        };
        Some((key, slot))
    }

    /// Each shard in turn, locked.
    pub(crate) fn each(&self) -> impl Iterator<Item = MutexGuard<'_, Shard<T>>> {
        self.shards.iter().map(|s| lock(s))
    }
}

impl<T> Shard<T> {
    /// Where the next item goes: its key, before its timeout is known.
    pub(crate) fn next_key(&mut self, shard: u32) -> DelayKey {
        self.next_generation += 1;
        DelayKey {
            shard,
            index: self.slots.vacant_key() as u32,
            generation: self.next_generation,
        }
    }

    /// Stores the item `key` names, `key` being the last from `next_key`,
    /// and returns its whole key.
    pub(crate) fn put(&mut self, key: DelayKey, timeout: Timeout, item: T) -> DelayKey {
        let index = self.slots.insert(Slot {
            generation: key.generation,
            timeout,
            item,
        });
        debug_assert_eq!(index, key.index as usize);
        key
    }

    /// The slot `key` names, if it still holds that item.
    pub(crate) fn get(&self, key: &DelayKey) -> Option<&Slot<T>> {
        self.slots
            .get(key.index as usize)
            .filter(|slot| slot.generation == key.generation)
    }

    /// Takes out the slot `key` names, if it still holds that item.
    pub(crate) fn take(&mut self, key: &DelayKey) -> Option<Slot<T>> {
        self.get(key)?;
        Some(self.slots.remove(key.index as usize))
    }
}

fn lock<T>(shard: &Mutex<Shard<T>>) -> MutexGuard<'_, Shard<T>> {
    // No user code runs under the lock; recover rather than propagate.
    shard.lock().unwrap_or_else(|p| p.into_inner())
}

/// A number fixed per thread, counting threads as they first ask, so that
/// threads spread over the shards.
fn thread_hint() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    HINT.with(|hint| {
        if hint.get() == usize::MAX {
            hint.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        hint.get()
    })
}
