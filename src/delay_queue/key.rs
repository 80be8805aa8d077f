//! `DelayKey`, the name of an item in a delay queue, and `Expired`, an item
//! the queue's stream yields.

use std::time::Instant;

use crate::engine::entry::task::TOKEN_BITS;

/// The name of an item in a [`DelayQueue`](crate::DelayQueue), returned by
/// [`insert`](crate::DelayQueue::insert) and given back with the item by the stream. tokio-util's
/// `delay_queue::Key`.
///
/// It is `Copy` and holds nothing, however long it is kept. It is one `u64` (the item's shard, its
/// slot, and a 30-bit generation), and converts to and from `u64`, and `usize` on 64-bit targets,
/// for slab-style code: a key comes to name another item only after 2^30 inserts into its shard
/// reused its slot, or, made up from a number, by chance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DelayKey(u64);

/// Bits of a key: the slab index (the arena holds at most 2^28 entries, so no shard holds more
/// items), and the generation below it.
const INDEX_BITS: u32 = 28;
const GENERATION_BITS: u32 = 30;
pub(crate) const GENERATION_MASK: u32 = (1 << GENERATION_BITS) - 1;

impl DelayKey {
    pub(crate) fn new(shard: u32, index: usize, generation: u32) -> DelayKey {
        debug_assert!(shard < 64 && index < 1 << INDEX_BITS);
        let high = (u64::from(shard) << INDEX_BITS) | index as u64;
        DelayKey((high << GENERATION_BITS) | u64::from(generation & GENERATION_MASK))
    }

    pub(crate) fn shard(self) -> usize {
        (self.0 >> (GENERATION_BITS + INDEX_BITS)) as usize
    }

    pub(crate) fn index(self) -> usize {
        ((self.0 >> GENERATION_BITS) & ((1 << INDEX_BITS) - 1)) as usize
    }

    pub(crate) fn generation(self) -> u32 {
        self.0 as u32 & GENERATION_MASK
    }

    /// What a notice of its timeout carries, in `TOKEN_BITS`: its shard, its index, and the low
    /// `TOKEN_GENERATION` bits of its generation.
    pub(crate) fn token(self) -> u64 {
        (self.0 >> GENERATION_BITS) << TOKEN_GENERATION | (self.0 & TOKEN_GENERATION_MASK)
    }

    /// The key a token came from, but for its generation's high bits, 0 here.
    pub(crate) fn from_token(token: u64) -> DelayKey {
        let high = token >> TOKEN_GENERATION << GENERATION_BITS;
        DelayKey(high | (token & TOKEN_GENERATION_MASK))
    }

    /// True if a key made `from_token` may name an item of `generation`: its low bits match.
    pub(crate) fn low_generation_of(self, generation: u32) -> bool {
        u64::from(generation) & TOKEN_GENERATION_MASK == u64::from(self.generation())
    }
}

/// The generation's bits a token keeps: it has `TOKEN_BITS` for the shard's 6, the index's 28 and
/// these.
const TOKEN_GENERATION: u32 = TOKEN_BITS - 6 - INDEX_BITS;
const TOKEN_GENERATION_MASK: u64 = (1 << TOKEN_GENERATION) - 1;

impl From<DelayKey> for u64 {
    fn from(key: DelayKey) -> u64 {
        key.0
    }
}

impl From<u64> for DelayKey {
    /// A key from a number a key was converted to.
    fn from(raw: u64) -> DelayKey {
        DelayKey(raw)
    }
}

#[cfg(target_pointer_width = "64")]
impl From<DelayKey> for usize {
    fn from(key: DelayKey) -> usize {
        key.0 as usize
    }
}

#[cfg(target_pointer_width = "64")]
impl From<usize> for DelayKey {
    /// As `From<u64>`.
    fn from(raw: usize) -> DelayKey {
        DelayKey(raw as u64)
    }
}

/// An item whose deadline has passed, as the stream of a [`DelayQueue`](crate::DelayQueue) yields
/// it, or an item [`try_remove`](crate::DelayQueue::try_remove) took out. tokio-util's
/// `delay_queue::Expired`.
#[derive(Debug)]
pub struct Expired<T> {
    pub(crate) item: T,
    pub(crate) key: DelayKey,
    pub(crate) deadline: Instant,
}

impl<T> Expired<T> {
    /// The item.
    pub fn get_ref(&self) -> &T {
        &self.item
    }

    /// The item, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.item
    }

    /// The item, by value.
    pub fn into_inner(self) -> T {
        self.item
    }

    /// The deadline it expired at (the last one it was reset to), on the timer's clock. The stream
    /// never yields an item before it.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The key it was inserted with. It names nothing in the queue any more.
    pub fn key(&self) -> DelayKey {
        self.key
    }
}
