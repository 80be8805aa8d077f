//! The lane's unit tests: ring, overflow, withdraw, reclaim, order.

use super::*;
use crate::engine::task::Task;
use std::ops::Range;

const R: u32 = RING as u32;

fn key(n: u32) -> Key {
    Key::unpack(n + 1).unwrap()
}

/// A lane, and one entry that takes every key's queue mark.
struct Fixture {
    lane: Lane,
    slots: Slots,
    marked: Key,
}

impl Fixture {
    fn new() -> Fixture {
        let slots = Slots::new();
        let marked = slots.insert(0, Task::Wake(None), 1).unwrap();
        Fixture {
            lane: Lane::new(0, 1),
            slots,
            marked,
        }
    }

    fn push(&self, keys: Range<u32>) {
        for n in keys {
            self.lane.push(key(n), self.slots.get(self.marked), false);
        }
    }

    /// Where the last key pushed went: true for the overflow.
    fn spilled_last(&self) -> bool {
        self.slots.get(self.marked).queue_mark() == 0
    }

    fn in_overflow(&self) -> u64 {
        let spilled = self.lane.producer.spilled.load(Ordering::Relaxed);
        spilled - self.lane.overflow_taken.load(Ordering::Relaxed)
    }

    fn drain(&self, limit: usize) -> (Vec<u32>, bool) {
        let mut out = Vec::new();
        let drained = self
            .lane
            .drain(limit, &mut |k: Key| out.push(k.index() as u32));
        (out, drained.more)
    }
}

#[test]
fn keys_spill_until_the_worker_took_every_spilled_one() {
    let f = Fixture::new();
    f.push(0..R);
    assert!(!f.spilled_last(), "the ring holds {R}");
    f.push(R..R + 1);
    assert!(f.spilled_last(), "the ring is full");
    // A cell frees, but the overflow still holds a key: spill.
    assert!(f.lane.withdraw(0, key(0)));
    f.push(R + 1..R + 2);
    assert!(f.spilled_last(), "behind the key in the overflow");
    assert_eq!((f.lane.len(), f.in_overflow()), (R as usize + 2, 2));
    let (out, more) = f.drain(usize::MAX);
    assert_eq!(out, (1..R + 2).collect::<Vec<_>>());
    assert!(!more && f.lane.is_empty());
    // All taken: back to the ring.
    f.push(R + 2..R + 3);
    assert!(!f.spilled_last());
    assert_eq!((f.lane.len(), f.in_overflow()), (1, 0));
    assert_eq!(f.drain(usize::MAX).0, vec![R + 2]);
}

#[test]
fn a_drain_cut_short_in_the_ring_leaves_the_overflow() {
    let f = Fixture::new();
    f.push(0..R + 5);
    assert_eq!(f.in_overflow(), 5);
    let (out, more) = f.drain(R as usize - 1);
    assert_eq!(out, (0..R - 1).collect::<Vec<_>>());
    assert!(more);
    assert_eq!(f.in_overflow(), 5, "a ring key is older");
    // The rest of the ring first, then the overflow, oldest first.
    assert_eq!(f.drain(3), (vec![R - 1, R, R + 1], true));
    assert_eq!(f.in_overflow(), 3);
    f.push(R + 5..R + 6);
    assert!(f.spilled_last(), "the overflow still holds keys");
    assert_eq!(f.drain(usize::MAX), ((R + 2..R + 6).collect(), false));
    assert!(f.lane.is_empty());
}

/// The owner fills the ring past the tail a drain read, and spills,
/// while that drain runs: the drain must not take the spilled key
/// before the ring keys pushed ahead of it.
#[test]
fn a_drain_takes_only_keys_spilled_before_its_tail() {
    let f = Fixture::new();
    f.push(0..2);
    let mut out = Vec::new();
    let mut first = true;
    f.lane.drain(usize::MAX, &mut |k: Key| {
        out.push(k.index() as u32);
        if std::mem::take(&mut first) {
            // Cell 0 is free now: R - 1 keys fill the ring, one spills.
            f.push(2..R + 2);
            assert!(f.spilled_last());
        }
    });
    assert_eq!(out, vec![0, 1], "the spilled key waits");
    assert_eq!(f.drain(usize::MAX).0, (2..R + 2).collect::<Vec<_>>());
    assert!(f.lane.is_empty());
}
