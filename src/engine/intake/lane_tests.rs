//! The lane's unit tests: withdraw, reclaim, a full ring, order, holding.

use super::*;
use crate::engine::entry::task::Task;
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
            lane: Lane::new(0),
            slots,
            marked,
        }
    }

    fn push(&self, keys: Range<u32>) {
        keys.for_each(|n| self.push_at(n, 0, false));
    }

    fn push_at(&self, n: u32, now: Nanos, urgent: bool) {
        assert!(self.try_push_at(n, now, urgent), "the ring is full");
    }

    fn try_push_at(&self, n: u32, now: Nanos, urgent: bool) -> bool {
        let entry = self.slots.get(self.marked);
        self.lane.try_push(key(n), entry, now, urgent)
    }

    /// Takes up to `limit` keys, holding none.
    fn drain(&self, limit: usize) -> (Vec<u32>, bool) {
        let (out, drained) = self.drain_by(0, true, limit);
        (out, drained.more)
    }

    /// What a drain at `now` takes, and when it must look again.
    fn drain_at(&self, now: Nanos) -> (Vec<u32>, Option<Nanos>) {
        let (out, drained) = self.drain_by(now, false, usize::MAX);
        (out, drained.look_by)
    }

    fn drain_by(&self, now: Nanos, all: bool, limit: usize) -> (Vec<u32>, Drained) {
        let all = if all { KEEP_NONE } else { KEEP_YOUNG };
        let mut out = Vec::new();
        let mut push = |k: Key| out.push(k.index() as u32);
        let drained = self.lane.drain(now, all, limit, &mut push);
        (out, drained)
    }
}

#[test]
fn a_full_ring_refuses_keys_and_a_short_drain_says_more() {
    let f = Fixture::new();
    f.push(0..R);
    assert!(!f.try_push_at(R, 0, false), "the ring holds {R}");
    // A withdrawn cell at the head is reclaimed by the owner.
    assert!(f.lane.withdraw(0, key(0)));
    f.push(R..R + 1);
    assert!(!f.try_push_at(R + 1, 0, false));
    let (out, more) = f.drain(usize::MAX);
    assert_eq!(out, (1..R + 1).collect::<Vec<_>>(), "in push order");
    assert!(!more && f.lane.len() == 0);
    f.push(R + 1..R + 2);
    assert_eq!(f.drain(usize::MAX).0, vec![R + 1]);

    let f = Fixture::new();
    f.push(0..10);
    assert_eq!(f.drain(7), ((0..7).collect(), true));
    assert_eq!(f.drain(7), ((7..10).collect(), false));
}

/// `n` stamps, in nanoseconds.
fn stamps(n: u64) -> Nanos {
    n << STAMP_SHIFT
}

const HOLD_NS: Nanos = HOLD.as_nanos() as Nanos;
/// When a drain that held a key stamped 0 says to look again.
const LOOK_NS: Nanos = HOLD_NS + BATCH_NANOS;

#[test]
fn the_hold_keeps_young_keys_in_order_past_withdrawn_cells_and_sets_the_next_look() {
    let f = Fixture::new();
    f.push_at(0, 0, false);
    f.push_at(1, stamps(10), false);
    assert_eq!(f.drain_at(HOLD_NS - 1), (vec![], Some(LOOK_NS)));
    assert_eq!(f.drain_at(HOLD_NS), (vec![0], Some(stamps(10) + LOOK_NS)));
    assert_eq!(f.drain_at(stamps(10) + HOLD_NS), (vec![1], None));
    assert_eq!(f.lane.len(), 0);

    let f = Fixture::new();
    // Stamped at 5 stamps: rounded down, so looked at a little early.
    f.push_at(0, stamps(5) + 999, false);
    f.push_at(1, stamps(7), false);
    assert_eq!(f.drain_at(stamps(6)).1, Some(stamps(5) + LOOK_NS));
    // A producer may read the clock after the driver did.
    assert_eq!(f.drain_at(stamps(4)).1, Some(stamps(5) + LOOK_NS));
    assert_eq!(f.drain_at(stamps(5) + HOLD_NS).1, Some(stamps(7) + LOOK_NS));

    let f = Fixture::new();
    f.push_at(0, 0, false);
    f.push_at(1, 0, false);
    f.push_at(2, 0, true);
    f.push_at(3, 0, false);
    assert_eq!(f.drain_at(0), (vec![0, 1, 2], Some(LOOK_NS)));
    assert_eq!(f.drain_at(0), (vec![], Some(LOOK_NS)), "the last held");

    let f = Fixture::new();
    f.push_at(0, 0, false);
    f.push_at(1, 0, false);
    f.push_at(2, stamps(50), false);
    assert!(f.lane.withdraw(0, key(0)));
    let (out, drained) = f.drain_by(HOLD_NS, false, usize::MAX);
    assert_eq!(out, vec![1], "past the withdrawn cell");
    assert!(drained.skipped);
    assert_eq!(drained.look_by, Some(stamps(50) + LOOK_NS));
    // The last key withdrawn too: nothing held, nothing to look at.
    assert!(f.lane.withdraw(2, key(2)));
    assert_eq!(f.drain_at(HOLD_NS), (vec![], None));

    // A key stamped earlier than the one before it (its producer read the
    // clock, then pushed another first) waits for that one: filed in order.
    let f = Fixture::new();
    f.push_at(0, stamps(10), false);
    f.push_at(1, 0, false);
    assert_eq!(f.drain_at(HOLD_NS), (vec![], Some(stamps(10) + LOOK_NS)));
    assert_eq!(f.drain_at(stamps(10) + HOLD_NS), (vec![0, 1], None));
}

/// A steady stream of held keys, one a millisecond: a driver that looks only when told to files
/// each key once it is `HOLD` old, and before it is `HOLD + BATCH` old (and a stamp, for rounding),
/// in a look per `BATCH`, a tick or more before a key that is not urgent can be due.
#[test]
fn a_look_files_a_batch_of_held_keys() {
    let f = Fixture::new();
    let ms = 1_000_000;
    let keys = 320;
    (0..keys).for_each(|n| f.push_at(n, n as Nanos * ms, false));
    let (mut now, mut looks, mut filed) = (0, 0, 0);
    while filed < keys {
        let (out, look_by) = f.drain_at(now);
        for n in out {
            assert_eq!(n, filed, "in push order");
            let age = now - n as Nanos * ms;
            assert!(age >= HOLD_NS - stamps(1), "key {n} filed {age} ns old");
            assert!(age <= LOOK_NS + stamps(1), "key {n} filed {age} ns old");
            // Filed by the end of the look's tick, a tick before the
            // earliest deadline a key that is not urgent can have.
            let filed_by = age - stamps(1) + ms;
            assert!(filed_by + ms <= urgent_nanos(ms), "key {n} filed late");
            filed += 1;
        }
        now = look_by.unwrap_or(now);
        looks += 1;
    }
    let batches = keys as u64 * ms / BATCH_NANOS;
    assert!(looks <= batches + 3, "{looks} looks for {batches} batches");
}

/// Stamps wrap after 2^32; the age is their difference, signed.
#[test]
fn a_stamps_age_wraps_round() {
    let top = stamps(1 << 32);
    let (before, after) = (top - stamps(2), top + stamps(3));
    assert_eq!(wait(stamp_of(before), after), HOLD_NS - stamps(5));
    assert_eq!(wait(stamp_of(after), before), HOLD_NS + stamps(5));
    assert_eq!(wait(stamp_of(top - HOLD_NS), top), 0);
}

/// A drain reads a key, then its stamp; meanwhile the key is withdrawn and
/// the owner wraps the ring (4 cells under loom), writing a younger stamp
/// there. The drain must not hold on it and leave the next key, due now, behind.
#[cfg(loom)]
#[test]
fn loom_models_a_drain_holding_a_key_against_its_owner_wrapping_round() {
    loom::model(|| {
        let f = std::sync::Arc::new(Fixture::new());
        f.push_at(0, 0, false);
        f.push_at(1, 0, false); // due at HOLD_NS, as is the first
        let owner = {
            let f = f.clone();
            loom::thread::spawn(move || {
                if f.lane.withdraw(0, key(0)) {
                    (2..5).for_each(|n| f.push_at(n, HOLD_NS, false));
                }
            })
        };
        let (out, drained) = f.drain_by(HOLD_NS, false, usize::MAX);
        owner.join().unwrap();
        assert!(out.contains(&1) || drained.more, "{out:?}, {drained:?}");
    });
}
