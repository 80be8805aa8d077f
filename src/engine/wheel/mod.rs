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
//! Entries live in the timer's arena (`slots.rs`); buckets and overflow
//! rounds are doubly-linked lists through the entries' own links (see
//! `list.rs`), so the wheel adds no memory per entry. Insert, cancel and
//! expire are O(1) apart from the overflow map's O(log rounds). Lists keep
//! insertion order, which keeps equal deadlines first-in, first-out.
//!
//! An entry's tick is not stored: it is its deadline's tick, except for an
//! entry that arrived after that tick was processed, which goes to the next
//! tick. Such a late entry stays in the wheel only until that next tick, so
//! while it is there its tick is `current + 1` (at a cascade, the round's
//! first tick).

mod bitmap;
mod list;

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use crate::engine::clock::{tick_of, Nanos};
use crate::engine::entry::Entry;
use crate::engine::key::Key;
use crate::engine::slots::Slots;
use bitmap::Bitmap;
use list::List;

/// The most entries a bucket may hold for `one_wake_for_two_ticks` to walk
/// it: busier ticks have a wake-up each.
const WALK_AT_MOST: usize = 16;

/// Where an entry due at some tick is kept right now.
#[derive(Clone, Copy)]
enum Place {
    Bucket(usize),
    Round(u64),
}

pub(crate) struct Wheel {
    /// One packed `List` per bucket of the current round.
    buckets: Vec<Option<NonZeroU64>>,
    occupied: Bitmap,
    /// Entries of later rounds, by round.
    overflow: BTreeMap<u64, List>,
    shift: u32,
    mask: u64,
    tick_nanos: u64,
    /// The last tick processed. Every entry's tick is later than this.
    current: u64,
    len: usize,
    /// The second tick of the last wake-up planned to serve two ticks
    /// (see `one_wake_for_two_ticks`): the only tick worth walking early.
    two_ticks: Option<u64>,
}

impl Wheel {
    /// `ticks_per_wheel` must be a power of two.
    pub(crate) fn new(ticks_per_wheel: usize, tick_nanos: u64) -> Wheel {
        debug_assert!(ticks_per_wheel.is_power_of_two());
        Wheel {
            buckets: vec![None; ticks_per_wheel],
            occupied: Bitmap::new(ticks_per_wheel),
            overflow: BTreeMap::new(),
            shift: ticks_per_wheel.trailing_zeros(),
            mask: ticks_per_wheel as u64 - 1,
            tick_nanos,
            current: 0,
            len: 0,
            two_ticks: None,
        }
    }

    /// Entries in the wheel, cancelled-but-not-yet-removed ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Ticks in one turn of the wheel.
    pub(crate) fn ticks_per_round(&self) -> u64 {
        self.mask + 1
    }

    pub(crate) fn current_tick(&self) -> u64 {
        self.current
    }

    /// Files `key` under its deadline's tick, or under the next tick if that
    /// one has already been processed (it fires late, never early).
    pub(crate) fn insert(&mut self, slots: &Slots, key: Key) {
        let entry = slots.get(key);
        entry.set_in_wheel(true);
        let place = self.place_of(self.tick_in_wheel(entry));
        self.with_list(place, |list| list.push_back(slots, key));
        self.len += 1;
    }

    /// Takes `key` out of the wheel if it is there. Returns whether it was.
    pub(crate) fn remove(&mut self, slots: &Slots, key: Key) -> bool {
        let entry = slots.get(key);
        if !entry.in_wheel() {
            return false;
        }
        let place = self.place_of(self.tick_in_wheel(entry));
        self.with_list(place, |list| list.unlink(slots, key));
        entry.set_in_wheel(false);
        self.len -= 1;
        true
    }

    /// The tick of an entry in the wheel (or about to enter it).
    fn tick_in_wheel(&self, entry: &Entry) -> u64 {
        let tick = tick_of(entry.deadline(), self.tick_nanos);
        tick.max(self.current.saturating_add(1))
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

    /// The tick at which the earliest entry fires: `next_work_tick`, but
    /// for a later round, the tick of its earliest entry rather than the
    /// round's start. Walks that round's list: for `advance_to_next`.
    pub(crate) fn next_due_tick(&self, slots: &Slots) -> Option<u64> {
        let tick = self.next_work_tick()?;
        let Place::Round(round) = self.place_of(tick) else {
            return Some(tick);
        };
        let round_start = round << self.shift;
        let list = self.overflow.get(&round)?;
        list.iter(slots)
            .map(|key| tick_of(slots.get(key).deadline(), self.tick_nanos).max(round_start))
            .min()
    }

    /// Processes the next tick with work if it is at or before `upto`,
    /// appending what is due to `due` in bucket order. Returns that tick, or
    /// `None` after moving the wheel to `upto`.
    pub(crate) fn expire_next(
        &mut self,
        slots: &Slots,
        upto: u64,
        due: &mut Vec<Key>,
    ) -> Option<u64> {
        let tick = match self.next_work_tick() {
            Some(tick) if tick <= upto => tick,
            _ => {
                self.current = self.current.max(upto);
                return None;
            }
        };
        self.current = tick;
        if tick & self.mask == 0 {
            self.cascade(slots, tick >> self.shift);
        }
        let bucket = (tick & self.mask) as usize;
        let list = List::unpack(std::mem::take(&mut self.buckets[bucket]));
        self.occupied.clear(bucket);
        self.drain_list(slots, list, due);
        Some(tick)
    }

    /// A time, past `tick`'s end, at which one wake-up could fire all of
    /// `tick` and all of the tick after it with none more than a tick
    /// late: the latest deadline of the next tick, if it is within a tick
    /// of `tick`'s earliest. `None` if there is no such time, or the ticks
    /// are not both in the current round (a later round's entries wait in
    /// one list for the whole round, too long to walk), or either holds more
    /// than `WALK_AT_MOST` entries. Walks the two buckets: their entries are
    /// the next to fire.
    /// Remembers the tick after `tick` when it says yes, for
    /// `expire_due_next_tick`.
    pub(crate) fn one_wake_for_two_ticks(&mut self, slots: &Slots, tick: u64) -> Option<Nanos> {
        self.two_ticks = None;
        let next = tick.checked_add(1)?;
        let (Place::Bucket(this), Place::Bucket(after)) =
            (self.place_of(tick), self.place_of(next))
        else {
            return None;
        };
        // The earliest or latest deadline of a bucket with few entries;
        // `None` for a crowded one, whose walk would cost more than the
        // wake-up it could save.
        let extreme = |bucket: usize, pick: fn(Nanos, Nanos) -> Nanos| {
            let mut found = None;
            let keys = List::unpack(self.buckets[bucket]).iter(slots);
            for (seen, key) in keys.enumerate() {
                if seen == WALK_AT_MOST {
                    return None;
                }
                let deadline = slots.get(key).deadline();
                found = Some(found.map_or(deadline, |so_far| pick(so_far, deadline)));
            }
            found
        };
        let last_after = extreme(after, Nanos::max)?;
        let first = extreme(this, Nanos::min)?;
        let both = (last_after <= first.saturating_add(self.tick_nanos)).then_some(last_after)?;
        self.two_ticks = Some(next);
        Some(both)
    }

    /// Appends to `due`, in bucket order, the entries filed under the
    /// tick after the current one whose deadline is at or before `now`,
    /// ahead of that tick's end: a driver that woke between two tick ends,
    /// as `one_wake_for_two_ticks` planned, fires what is due by then. Any
    /// other tick is not walked: its entries fire at its end, on time, and
    /// a busy tick's walk would cost a cache miss per entry.
    pub(crate) fn expire_due_next_tick(&mut self, slots: &Slots, now: Nanos, due: &mut Vec<Key>) {
        let next = self.current.saturating_add(1);
        if self.two_ticks != Some(next) {
            return;
        }
        let Place::Bucket(bucket) = self.place_of(next) else {
            return;
        };
        if self.buckets[bucket].is_none() {
            return;
        }
        let before = due.len();
        self.with_list(Place::Bucket(bucket), |list| {
            let mut at = list.head;
            while let Some(key) = at {
                let entry = slots.get(key);
                at = entry.next_link();
                if entry.deadline() <= now {
                    list.unlink(slots, key);
                    entry.set_in_wheel(false);
                    due.push(key);
                }
            }
        });
        self.len -= due.len() - before;
    }

    /// Moves round `round` from `overflow` into the (empty) buckets.
    fn cascade(&mut self, slots: &Slots, round: u64) {
        let Some(mut list) = self.overflow.remove(&round) else {
            return;
        };
        let round_start = round << self.shift;
        while let Some(key) = list.pop_front(slots) {
            // A late arrival filed into this round is due at its first tick.
            let tick = tick_of(slots.get(key).deadline(), self.tick_nanos).max(round_start);
            let bucket = (tick & self.mask) as usize;
            self.with_list(Place::Bucket(bucket), |list| list.push_back(slots, key));
        }
    }

    /// Empties the whole wheel into `out`, for `stop()`.
    pub(crate) fn drain_all(&mut self, slots: &Slots, out: &mut Vec<Key>) {
        for bucket in 0..self.buckets.len() {
            if let Some(packed) = self.buckets[bucket].take() {
                self.occupied.clear(bucket);
                self.drain_list(slots, List::unpack(Some(packed)), out);
            }
        }
        for (_, list) in std::mem::take(&mut self.overflow) {
            self.drain_list(slots, list, out);
        }
    }

    fn drain_list(&mut self, slots: &Slots, mut list: List, out: &mut Vec<Key>) {
        while let Some(key) = list.pop_front(slots) {
            slots.get(key).set_in_wheel(false);
            self.len -= 1;
            out.push(key);
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
    fn with_list(&mut self, place: Place, f: impl FnOnce(&mut List)) {
        match place {
            Place::Bucket(bucket) => {
                let mut list = List::unpack(self.buckets[bucket]);
                f(&mut list);
                self.buckets[bucket] = list.pack();
                if list.is_empty() {
                    self.occupied.clear(bucket);
                } else {
                    self.occupied.set(bucket);
                }
            }
            Place::Round(round) => {
                let list = self.overflow.entry(round).or_default();
                f(list);
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
    use crate::engine::task::Task;

    /// Ticks of 1 ns, so a deadline is its own tick.
    fn wheel(ticks_per_wheel: usize) -> (Wheel, Slots) {
        (Wheel::new(ticks_per_wheel, 1), Slots::new())
    }

    fn entry(slots: &Slots, deadline: u64) -> Key {
        slots.insert(deadline, Task::Wake(None), 1).unwrap()
    }

    fn insert(wheel: &mut Wheel, slots: &Slots, deadline: u64) -> Key {
        let key = entry(slots, deadline);
        wheel.insert(slots, key);
        key
    }

    /// Ticks of 10 ns: deadlines 11-20 are tick 2's, 21-30 tick 3's.
    fn wheel_of_10ns_ticks() -> (Wheel, Slots) {
        (Wheel::new(64, 10), Slots::new())
    }

    #[test]
    fn one_wake_up_serves_two_ticks_only_if_none_is_more_than_a_tick_late() {
        let (mut wheel, slots) = wheel_of_10ns_ticks();
        insert(&mut wheel, &slots, 14);
        assert_eq!(
            wheel.one_wake_for_two_ticks(&slots, 2),
            None,
            "tick 3 is empty"
        );
        insert(&mut wheel, &slots, 22);
        insert(&mut wheel, &slots, 23);
        // Tick 2's earliest is 14: a wake-up at 23 fires it 9 ns late.
        assert_eq!(wheel.one_wake_for_two_ticks(&slots, 2), Some(23));
        insert(&mut wheel, &slots, 25);
        // At 25 the one due at 14 would be 11 ns late: more than a tick.
        assert_eq!(wheel.one_wake_for_two_ticks(&slots, 2), None);
    }

    #[test]
    fn a_crowded_tick_is_not_walked() {
        let (mut wheel, slots) = wheel_of_10ns_ticks();
        for _ in 0..WALK_AT_MOST {
            insert(&mut wheel, &slots, 14);
        }
        insert(&mut wheel, &slots, 22);
        assert_eq!(wheel.one_wake_for_two_ticks(&slots, 2), Some(22));
        insert(&mut wheel, &slots, 15);
        assert_eq!(wheel.one_wake_for_two_ticks(&slots, 2), None);
    }

    #[test]
    fn entries_of_the_next_tick_due_by_now_fire_ahead_of_its_end() {
        let (mut wheel, slots) = wheel_of_10ns_ticks();
        let keys: Vec<Key> = [14, 22, 23, 24]
            .iter()
            .map(|&d| insert(&mut wheel, &slots, d))
            .collect();
        // Planned at tick 1's end: one wake-up, at 24, for ticks 2 and 3.
        assert_eq!(wheel.one_wake_for_two_ticks(&slots, 2), Some(24));
        let mut due = vec![];
        assert_eq!(wheel.expire_next(&slots, 2, &mut due), Some(2));
        wheel.expire_due_next_tick(&slots, 23, &mut due);
        assert_eq!(due, keys[..3].to_vec(), "never one not due yet");
        assert_eq!(wheel.len(), 1);
        assert!(!slots.get(keys[1]).in_wheel());
        // The rest of tick 3 fires at its end.
        due.clear();
        assert_eq!(wheel.expire_next(&slots, 3, &mut due), Some(3));
        assert_eq!(due, vec![keys[3]]);
        assert_eq!(wheel.len(), 0);
    }

    #[test]
    fn the_next_tick_is_walked_only_when_a_wake_up_was_planned_for_it() {
        let (mut wheel, slots) = wheel_of_10ns_ticks();
        let keys: Vec<Key> = [14, 22, 29]
            .iter()
            .map(|&d| insert(&mut wheel, &slots, d))
            .collect();
        assert_eq!(
            wheel.one_wake_for_two_ticks(&slots, 2),
            None,
            "29 is too late"
        );
        let mut due = vec![];
        assert_eq!(wheel.expire_next(&slots, 2, &mut due), Some(2));
        wheel.expire_due_next_tick(&slots, 23, &mut due);
        assert_eq!(due, keys[..1].to_vec(), "22 waits for its tick's end");
    }

    fn run_to(wheel: &mut Wheel, slots: &Slots, upto: u64) -> Vec<(u64, u64)> {
        let mut fired = vec![];
        let mut due = vec![];
        while let Some(tick) = wheel.expire_next(slots, upto, &mut due) {
            fired.extend(due.drain(..).map(|k| (tick, slots.get(k).deadline())));
        }
        fired
    }

    #[test]
    fn fires_each_entry_at_its_tick_across_rounds() {
        let (mut wheel, slots) = wheel(8);
        let ticks = [1u64, 7, 8, 9, 15, 16, 17, 64, 65, 1000];
        for &t in &ticks {
            insert(&mut wheel, &slots, t);
        }
        let fired = run_to(&mut wheel, &slots, 2000);
        let expected: Vec<(u64, u64)> = ticks.iter().map(|&t| (t, t)).collect();
        assert_eq!(fired, expected);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_work_tick(), None);
    }

    #[test]
    fn stops_at_upto_and_resumes() {
        let (mut wheel, slots) = wheel(4);
        insert(&mut wheel, &slots, 10);
        assert!(run_to(&mut wheel, &slots, 9).is_empty());
        assert_eq!(wheel.current_tick(), 9);
        assert_eq!(run_to(&mut wheel, &slots, 10), vec![(10, 10)]);
    }

    #[test]
    fn late_arrivals_fire_on_the_next_tick() {
        let (mut wheel, slots) = wheel(4);
        assert!(run_to(&mut wheel, &slots, 6).is_empty());
        insert(&mut wheel, &slots, 3);
        assert_eq!(run_to(&mut wheel, &slots, 7), vec![(7, 3)]);
    }

    #[test]
    fn a_late_arrival_at_a_round_end_fires_at_the_next_round_start() {
        let (mut wheel, slots) = wheel(4);
        assert!(run_to(&mut wheel, &slots, 7).is_empty());
        let late = insert(&mut wheel, &slots, 2); // due at 8, in round 2
        insert(&mut wheel, &slots, 9);
        assert!(wheel.remove(&slots, late), "found where it was filed");
        insert(&mut wheel, &slots, 2);
        assert_eq!(run_to(&mut wheel, &slots, 9), vec![(8, 2), (9, 9)]);
    }

    #[test]
    fn a_late_arrival_can_be_removed_before_it_fires() {
        let (mut wheel, slots) = wheel(4);
        assert!(run_to(&mut wheel, &slots, 5).is_empty());
        let late = insert(&mut wheel, &slots, 1);
        assert!(wheel.remove(&slots, late));
        assert!(run_to(&mut wheel, &slots, 10).is_empty());
    }

    #[test]
    fn remove_works_in_buckets_and_overflow() {
        let (mut wheel, slots) = wheel(4);
        let near = insert(&mut wheel, &slots, 2);
        let far = insert(&mut wheel, &slots, 50);
        insert(&mut wheel, &slots, 51);
        assert!(wheel.remove(&slots, near));
        assert!(!wheel.remove(&slots, near), "second remove finds nothing");
        assert!(wheel.remove(&slots, far));
        assert!(!slots.get(near).in_wheel());
        assert_eq!(wheel.len(), 1);
        assert_eq!(run_to(&mut wheel, &slots, 100), vec![(51, 51)]);
    }

    #[test]
    fn equal_ticks_keep_insertion_order() {
        let (mut wheel, slots) = (Wheel::new(4, 10), Slots::new());
        for deadline in [90u64, 85, 81] {
            insert(&mut wheel, &slots, deadline);
        }
        let fired: Vec<u64> = run_to(&mut wheel, &slots, 9)
            .into_iter()
            .map(|f| f.1)
            .collect();
        assert_eq!(fired, vec![90, 85, 81]);
    }

    #[test]
    fn drain_all_returns_everything() {
        let (mut wheel, slots) = wheel(4);
        for t in [1u64, 3, 5, 100, u64::MAX] {
            insert(&mut wheel, &slots, t);
        }
        let mut out = vec![];
        wheel.drain_all(&slots, &mut out);
        assert_eq!(out.len(), 5);
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_work_tick(), None);
    }

    #[test]
    fn a_tick_touches_only_what_fires() {
        let (mut wheel, slots) = wheel(512);
        for i in 0..10_000u64 {
            insert(&mut wheel, &slots, 60_000 + i);
        }
        // Nothing is due for ~117 rounds: the next work is at a round start,
        // and processing up to just before it touches no entry.
        assert_eq!(wheel.next_work_tick(), Some((60_000 >> 9) << 9));
        let mut due = vec![];
        assert_eq!(wheel.expire_next(&slots, 59_000, &mut due), None);
        assert!(due.is_empty());
        assert_eq!(wheel.len(), 10_000);
    }
}
