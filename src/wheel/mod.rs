//! The hashed timing wheel (Varghese & Lauck, scheme 6; Netty's
//! `HashedWheelTimer`), reworked so a tick costs what fires, not what waits.
//!
//! # Layout
//!
//! Time is cut into ticks; `ticks_per_wheel` (a power of two, default 512)
//! buckets make one *round*. An entry due at tick `t` belongs to round
//! `t >> shift` and bucket `t & mask`.
//!
//! Netty keeps every entry in its bucket with a `remainingRounds` counter and
//! decrements all of them on every visit, so each tick costs
//! O(pending / 512) even when nothing fires. Here the buckets hold only the
//! *current* round. Entries of later rounds wait in `overflow`, a map from
//! round to list, and move into the buckets once, when their round begins.
//! Every entry is touched a constant number of times, and a tick touches
//! only what fires (plus, once per round, what will fire in that round).
//!
//! A bitmap of non-empty buckets gives the next tick with work, so the
//! worker sleeps straight to it; with nothing pending it parks for good.
//!
//! # Storage
//!
//! Entries live in a slab; buckets and overflow rounds are doubly-linked
//! lists through it by index (see `list.rs`). Insert, cancel and expire are
//! O(1) apart from the overflow map's O(log rounds). Lists keep insertion
//! order, which keeps equal deadlines first-in, first-out.

mod bitmap;
mod list;

use std::collections::BTreeMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use slab::Slab;

use crate::entry::Entry;
use bitmap::Bitmap;
use list::{Link, Linked, List, NONE};

struct Node {
    entry: Arc<Entry>,
    /// The tick it fires at: its deadline's tick, or later if it arrived late.
    tick: u64,
    prev: Link,
    next: Link,
}

impl Linked for Node {
    fn links(&mut self) -> (&mut Link, &mut Link) {
        (&mut self.prev, &mut self.next)
    }
}

/// Where an entry due at some tick is kept right now.
#[derive(Clone, Copy)]
enum Place {
    Bucket(usize),
    Round(u64),
}

pub(crate) struct Wheel {
    nodes: Slab<Node>,
    /// One packed `List` per bucket of the current round.
    buckets: Vec<Option<NonZeroU64>>,
    occupied: Bitmap,
    /// Entries of later rounds, by round.
    overflow: BTreeMap<u64, List>,
    shift: u32,
    mask: u64,
    /// The last tick processed. Every entry's tick is later than this.
    current: u64,
}

impl Wheel {
    /// `ticks_per_wheel` must be a power of two.
    pub(crate) fn new(ticks_per_wheel: usize) -> Wheel {
        debug_assert!(ticks_per_wheel.is_power_of_two());
        Wheel {
            nodes: Slab::new(),
            buckets: vec![None; ticks_per_wheel],
            occupied: Bitmap::new(ticks_per_wheel),
            overflow: BTreeMap::new(),
            shift: ticks_per_wheel.trailing_zeros(),
            mask: ticks_per_wheel as u64 - 1,
            current: 0,
        }
    }

    /// Entries in the wheel, cancelled-but-not-yet-removed ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn current_tick(&self) -> u64 {
        self.current
    }

    /// Files `entry` under `tick`, or under the next tick if `tick` has
    /// already been processed (it fires late, never early).
    pub(crate) fn insert(&mut self, entry: Arc<Entry>, tick: u64) {
        let tick = tick.max(self.current + 1);
        let key = self.nodes.insert(Node {
            entry,
            tick,
            prev: NONE,
            next: NONE,
        });
        self.nodes[key].entry.set_slot(Some(key));
        let place = self.place_of(tick);
        self.with_list(place, |nodes, list| list::push_back(nodes, list, key));
    }

    /// Takes `entry` out of the wheel if it is there. Returns whether it was.
    pub(crate) fn remove(&mut self, entry: &Entry) -> bool {
        let Some(key) = entry.slot() else {
            return false;
        };
        match self.nodes.get(key) {
            Some(node) if std::ptr::eq(Arc::as_ptr(&node.entry), entry) => {}
            _ => return false,
        }
        let place = self.place_of(self.nodes[key].tick);
        self.with_list(place, |nodes, list| list::unlink(nodes, list, key));
        self.nodes.remove(key).entry.set_slot(None);
        true
    }

    /// The next tick that has an entry, or the start of the next round that
    /// has one, whichever is first.
    pub(crate) fn next_work_tick(&self) -> Option<u64> {
        let round_start = self.current & !self.mask;
        let from = (self.current & self.mask) as usize + 1;
        let in_round = self
            .occupied
            .next_set(from)
            .map(|bucket| round_start + bucket as u64);
        let later = self.overflow.keys().next().map(|round| round << self.shift);
        match (in_round, later) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes the next tick with work if it is at or before `upto`,
    /// appending what is due to `due` in bucket order. Returns that tick, or
    /// `None` after moving the wheel to `upto`.
    pub(crate) fn expire_next(&mut self, upto: u64, due: &mut Vec<Arc<Entry>>) -> Option<u64> {
        let tick = match self.next_work_tick() {
            Some(tick) if tick <= upto => tick,
            _ => {
                self.current = self.current.max(upto);
                return None;
            }
        };
        self.current = tick;
        if tick & self.mask == 0 {
            self.cascade(tick >> self.shift);
        }
        let bucket = (tick & self.mask) as usize;
        let list = List::unpack(std::mem::take(&mut self.buckets[bucket]));
        self.occupied.clear(bucket);
        self.drain_list(list, due);
        Some(tick)
    }

    /// Moves round `round` from `overflow` into the (empty) buckets.
    fn cascade(&mut self, round: u64) {
        let Some(mut list) = self.overflow.remove(&round) else {
            return;
        };
        while !list.is_empty() {
            let key = list::key(list.head);
            list::unlink(&mut self.nodes, &mut list, key);
            let bucket = (self.nodes[key].tick & self.mask) as usize;
            self.with_list(Place::Bucket(bucket), |nodes, list| {
                list::push_back(nodes, list, key)
            });
        }
    }

    /// Empties the whole wheel into `out`, for `stop()`.
    pub(crate) fn drain_all(&mut self, out: &mut Vec<Arc<Entry>>) {
        for bucket in 0..self.buckets.len() {
            if let Some(packed) = self.buckets[bucket].take() {
                self.occupied.clear(bucket);
                self.drain_list(List::unpack(Some(packed)), out);
            }
        }
        for (_, list) in std::mem::take(&mut self.overflow) {
            self.drain_list(list, out);
        }
    }

    fn drain_list(&mut self, list: List, out: &mut Vec<Arc<Entry>>) {
        let mut at = list.head;
        while at != NONE {
            let node = self.nodes.remove(list::key(at));
            node.entry.set_slot(None);
            at = node.next;
            out.push(node.entry);
        }
    }

    fn place_of(&self, tick: u64) -> Place {
        if tick >> self.shift == self.current >> self.shift {
            Place::Bucket((tick & self.mask) as usize)
        } else {
            Place::Round(tick >> self.shift)
        }
    }

    /// Runs `f` on the list at `place`, keeping the bitmap and the overflow
    /// map in step with whether it is empty.
    fn with_list(&mut self, place: Place, f: impl FnOnce(&mut Slab<Node>, &mut List)) {
        match place {
            Place::Bucket(bucket) => {
                let mut list = List::unpack(self.buckets[bucket]);
                f(&mut self.nodes, &mut list);
                self.buckets[bucket] = list.pack();
                if list.is_empty() {
                    self.occupied.clear(bucket);
                } else {
                    self.occupied.set(bucket);
                }
            }
            Place::Round(round) => {
                let list = self.overflow.entry(round).or_default();
                f(&mut self.nodes, list);
                if list.is_empty() {
                    self.overflow.remove(&round);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Task;

    fn entry(deadline: u64) -> Arc<Entry> {
        Arc::new(Entry::new(deadline, Task::Wake(None)))
    }

    fn run_to(wheel: &mut Wheel, upto: u64) -> Vec<(u64, u64)> {
        let mut fired = vec![];
        let mut due = vec![];
        while let Some(tick) = wheel.expire_next(upto, &mut due) {
            fired.extend(due.drain(..).map(|e| (tick, e.deadline())));
        }
        fired
    }

    #[test]
    fn fires_each_entry_at_its_tick_across_rounds() {
        let mut wheel = Wheel::new(8);
        let ticks = [1u64, 7, 8, 9, 15, 16, 17, 64, 65, 1000];
        for &t in &ticks {
            wheel.insert(entry(t), t);
        }
        let fired = run_to(&mut wheel, 2000);
        let expected: Vec<(u64, u64)> = ticks.iter().map(|&t| (t, t)).collect();
        assert_eq!(fired, expected);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_work_tick(), None);
    }

    #[test]
    fn stops_at_upto_and_resumes() {
        let mut wheel = Wheel::new(4);
        wheel.insert(entry(10), 10);
        assert!(run_to(&mut wheel, 9).is_empty());
        assert_eq!(wheel.current_tick(), 9);
        assert_eq!(run_to(&mut wheel, 10), vec![(10, 10)]);
    }

    #[test]
    fn late_arrivals_fire_on_the_next_tick() {
        let mut wheel = Wheel::new(4);
        assert!(run_to(&mut wheel, 6).is_empty());
        wheel.insert(entry(3), 3);
        assert_eq!(run_to(&mut wheel, 7), vec![(7, 3)]);
    }

    #[test]
    fn remove_works_in_buckets_and_overflow() {
        let mut wheel = Wheel::new(4);
        let near = entry(2);
        let far = entry(50);
        wheel.insert(near.clone(), 2);
        wheel.insert(far.clone(), 50);
        wheel.insert(entry(51), 51);
        assert!(wheel.remove(&near));
        assert!(!wheel.remove(&near), "second remove finds nothing");
        assert!(wheel.remove(&far));
        assert_eq!(near.slot(), None);
        assert_eq!(wheel.len(), 1);
        assert_eq!(run_to(&mut wheel, 100), vec![(51, 51)]);
    }

    #[test]
    fn equal_ticks_keep_insertion_order() {
        let mut wheel = Wheel::new(4);
        for deadline in [30u64, 20, 10] {
            wheel.insert(entry(deadline), 9);
        }
        let fired: Vec<u64> = run_to(&mut wheel, 9).into_iter().map(|f| f.1).collect();
        assert_eq!(fired, vec![30, 20, 10]);
    }

    #[test]
    fn drain_all_returns_everything() {
        let mut wheel = Wheel::new(4);
        for t in [1u64, 3, 5, 100, u64::MAX] {
            wheel.insert(entry(t), t);
        }
        let mut out = vec![];
        wheel.drain_all(&mut out);
        assert_eq!(out.len(), 5);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_work_tick(), None);
    }

    #[test]
    fn a_tick_touches_only_what_fires() {
        let mut wheel = Wheel::new(512);
        for i in 0..10_000u64 {
            wheel.insert(entry(60_000 + i), 60_000 + i);
        }
        // Nothing is due for ~117 rounds: the next work is at a round start,
        // and processing up to just before it touches no entry.
        assert_eq!(wheel.next_work_tick(), Some((60_000 >> 9) << 9));
        let mut due = vec![];
        assert_eq!(wheel.expire_next(59_000, &mut due), None);
        assert!(due.is_empty());
        assert_eq!(wheel.len(), 10_000);
    }
}
