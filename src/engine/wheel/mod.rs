//! The hashed timing wheel (Varghese & Lauck, scheme 6; Netty's
//! `HashedWheelTimer`), reworked so a tick costs what fires, not what waits.
//!
//! `ticks_per_wheel` buckets (a power of two) make one *round*: an entry due at tick `t` belongs to
//! round `t >> shift`, bucket `t & mask`. Netty keeps every entry in its bucket with a
//! `remainingRounds` counter, decremented at each visit: a tick costs O(pending / 512) even when
//! nothing fires. Here the buckets hold only the *current* round; later rounds wait in `overflow`
//! and move in once, when their round begins: a tick touches only what fires (and, at a round's
//! start, that round's entries). A bitmap of non-empty buckets gives the next tick with work, so
//! the worker sleeps straight to it.
//!
//! Buckets and rounds are lists through the entries' own links (`list.rs`), in insertion order: no
//! memory per entry, and equal deadlines stay FIFO. Insert, cancel and expire are O(1) but for
//! `overflow`'s O(log rounds). An entry's tick is its deadline's when filed, or, if that tick was
//! processed before the entry arrived, the next one (`current + 1`). The entry keeps the tick's low
//! bits (`Entry::set_filed`); one due further ahead than they reach is filed at their reach and
//! filed again from there.

mod bitmap;
mod list;

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use crate::engine::clock::{earliest, Nanos};
use crate::engine::entry::{arena::Slots, key::Key, TICKS_AHEAD};
use bitmap::Bitmap;
use list::List;

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
    overflow: BTreeMap<u64, List>,
    shift: u32,
    mask: u64,
    /// The last tick processed. Every entry's tick is later than this.
    current: u64,
}

impl Wheel {
    pub(crate) fn new(ticks_per_wheel: usize) -> Wheel {
        debug_assert!(ticks_per_wheel.is_power_of_two());
        Wheel {
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
    pub(crate) fn len(&self, slots: &Slots) -> usize {
        let buckets = self.buckets.iter().map(|&list| List::unpack(list));
        let lists = buckets.chain(self.overflow.values().copied());
        lists.map(|list| list.iter(slots).count()).sum()
    }

    pub(crate) fn current_tick(&self) -> u64 {
        self.current
    }

    /// Files `key` at its deadline's `tick`, or the next if that one is past: late, never early.
    /// One further ahead than an entry's tick bits reach is filed at their reach, `TICKS_AHEAD`
    /// ticks ahead, where its deadline has not come: the turn files it again from there.
    pub(crate) fn insert(&mut self, slots: &Slots, key: Key, tick: u64) {
        let next = self.current.saturating_add(1);
        let tick = tick.clamp(next, self.current.saturating_add(TICKS_AHEAD));
        slots.get(key).set_filed(tick);
        self.with_list(self.place_of(tick), |list| list.push_back(slots, key));
    }

    /// Takes `key` out of the wheel; false if it was not there.
    pub(crate) fn remove(&mut self, slots: &Slots, key: Key) -> bool {
        if !slots.get(key).in_wheel() {
            return false;
        }
        let place = self.place_of(self.filed_tick(slots, key));
        self.with_list(place, |list| list.unlink(slots, key));
        slots.get(key).set_out_of_wheel();
        true
    }

    pub(crate) fn filed_tick(&self, slots: &Slots, key: Key) -> u64 {
        slots.get(key).filed_tick(self.current)
    }

    /// The next occupied bucket's tick, or the first overflow round's start.
    pub(crate) fn next_work_tick(&self) -> Option<u64> {
        self.next_work_after(self.current)
    }

    /// `next_work_tick` after `after`, a tick no earlier than `current`.
    fn next_work_after(&self, after: u64) -> Option<u64> {
        let (round, round_start) = (after >> self.shift, self.current & !self.mask);
        let bucket = (round == self.current >> self.shift)
            .then(|| self.occupied.next_set((after & self.mask) as usize + 1))
            .flatten();
        let in_round = bucket.map(|bucket| round_start + bucket as u64);
        let later = self.overflow.range(round + 1..).next();
        earliest(in_round, later.map(|(round, _)| round << self.shift))
    }

    /// For `advance_to_next`: the tick the earliest entry at the next tick with work is due by (its
    /// filed tick, or if filed at the reach or moved later since, `tick_of` its deadline), or the
    /// tick with work after it if earlier. Walks that tick's bucket or round.
    pub(crate) fn next_due_tick(
        &self,
        slots: &Slots,
        tick_of: impl Fn(Nanos) -> u64,
    ) -> Option<u64> {
        let tick = self.next_work_tick()?;
        let list = match self.place_of(tick) {
            Place::Bucket(bucket) => List::unpack(self.buckets[bucket]),
            Place::Round(round) => *self.overflow.get(&round)?,
        };
        let filed = |key| self.filed_tick(slots, key);
        let due = list
            .iter(slots)
            .map(|key| filed(key).max(tick_of(slots.get(key).deadline())));
        earliest(due.min(), self.next_work_after(tick))
    }

    /// Processes the next tick with work up to `upto`, appending its keys to
    /// `due` in bucket order; `None`, the wheel moved to `upto`, if none.
    pub(crate) fn expire_next(
        &mut self,
        slots: &Slots,
        upto: u64,
        due: &mut Vec<Key>,
    ) -> Option<u64> {
        let Some(tick) = self.next_work_tick().filter(|&tick| tick <= upto) else {
            self.current = self.current.max(upto);
            return None;
        };
        self.current = tick;
        if tick & self.mask == 0 {
            self.cascade(slots, tick >> self.shift);
        }
        let bucket = (tick & self.mask) as usize;
        let list = List::unpack(std::mem::take(&mut self.buckets[bucket]));
        self.occupied.clear(bucket);
        drain_list(slots, list, due);
        Some(tick)
    }

    /// Takes out of the next tick's bucket (a round's first: its round in `overflow`, if
    /// `rounds_too`, as that walks the round), in order, the one-shot keys due by `now`, before
    /// the tick ends: a tokio clock's driver turns where tokio wakes it, on tokio's millisecond
    /// (`worker.rs`); a periodic key waits for its tick. Returns the earliest one-shot deadline it
    /// kept: the driver turns next at tokio's first millisecond after it, where tokio would fire it.
    pub(crate) fn expire_due_by(
        &mut self,
        slots: &Slots,
        now: Nanos,
        rounds_too: bool,
        due: &mut Vec<Key>,
    ) -> Option<Nanos> {
        let place = self.place_of(self.current.saturating_add(1));
        if matches!(place, Place::Round(_)) && !rounds_too {
            return None;
        }
        let mut kept = None;
        self.with_list(place, |list| {
            let mut next = list.head;
            while let Some(key) = next {
                let entry = slots.get(key);
                next = entry.next_link();
                let deadline = (!entry.is_periodic()).then(|| entry.deadline());
                if deadline.is_some_and(|deadline| deadline <= now) {
                    list.unlink(slots, key);
                    entry.set_out_of_wheel();
                    due.push(key);
                } else {
                    kept = earliest(kept, deadline);
                }
            }
        });
        kept
    }

    /// Moves round `round` from `overflow` into the (empty) buckets.
    fn cascade(&mut self, slots: &Slots, round: u64) {
        let Some(mut list) = self.overflow.remove(&round) else {
            return;
        };
        while let Some(key) = list.pop_front(slots) {
            let bucket = (self.filed_tick(slots, key) & self.mask) as usize;
            self.with_list(Place::Bucket(bucket), |list| list.push_back(slots, key));
        }
    }

    /// Empties the whole wheel into `out`, for `stop()`.
    pub(crate) fn drain_all(&mut self, slots: &Slots, out: &mut Vec<Key>) {
        self.occupied = Bitmap::new(self.buckets.len());
        let buckets = self.buckets.iter_mut().map(Option::take);
        let rounds = std::mem::take(&mut self.overflow).into_values();
        for list in buckets.map(List::unpack).chain(rounds) {
            drain_list(slots, list, out);
        }
    }

    fn place_of(&self, tick: u64) -> Place {
        if tick >> self.shift == self.current >> self.shift {
            Place::Bucket((tick & self.mask) as usize)
        } else {
            Place::Round(tick >> self.shift)
        }
    }

    /// Runs `f` on the list at `place`; keeps `occupied` and `overflow` in step.
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

fn drain_list(slots: &Slots, mut list: List, out: &mut Vec<Key>) {
    while let Some(key) = list.pop_front(slots) {
        slots.get(key).set_out_of_wheel();
        out.push(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::entry::task::Task;

    fn wheel(ticks_per_wheel: usize) -> (Wheel, Slots) {
        (Wheel::new(ticks_per_wheel), Slots::new())
    }

    /// Ticks of 1 ns: an entry due at `deadline` is filed at tick `deadline`. Returns the last key.
    fn insert(wheel: &mut Wheel, slots: &Slots, deadlines: impl IntoIterator<Item = u64>) -> Key {
        let mut last = None;
        for deadline in deadlines {
            last = slots.insert(deadline, Task::Wake(None), 1);
            wheel.insert(slots, last.unwrap(), deadline);
        }
        last.unwrap()
    }

    fn run_to(wheel: &mut Wheel, slots: &Slots, upto: u64) -> Vec<(u64, u64)> {
        let mut fired = vec![];
        let mut due = vec![];
        while let Some(tick) = wheel.expire_next(slots, upto, &mut due) {
            fired.extend(due.drain(..).map(|k| (tick, slots.get(k).deadline())));
        }
        fired
    }

    /// One due past the ticks' reach comes out at the reach: the turn files it again from there,
    /// by its deadline (`tests/far_ticks.rs`).
    #[test]
    fn fires_each_entry_at_its_tick_across_rounds() {
        let (mut wheel, slots) = wheel(8);
        let ticks = [1u64, 7, 8, 9, 15, 16, 17, 64, 65, 1000];
        insert(&mut wheel, &slots, ticks);
        insert(&mut wheel, &slots, [TICKS_AHEAD + 100]);
        let fired = run_to(&mut wheel, &slots, u64::MAX - 1);
        let mut expected: Vec<(u64, u64)> = ticks.iter().map(|&t| (t, t)).collect();
        expected.push((TICKS_AHEAD, TICKS_AHEAD + 100));
        assert_eq!(fired, expected);
        assert_eq!(wheel.len(&slots), 0);
        assert_eq!(wheel.next_work_tick(), None);
    }

    /// Mid-round, and at a round's end: then at the next round's start.
    #[test]
    fn a_late_arrival_fires_on_the_next_tick_unless_removed() {
        let (mut wheel, slots) = wheel(4);
        assert!(run_to(&mut wheel, &slots, 5).is_empty());
        let late = insert(&mut wheel, &slots, [1]); // due at 6
        assert!(wheel.remove(&slots, late));
        insert(&mut wheel, &slots, [3]);
        assert_eq!(run_to(&mut wheel, &slots, 7), vec![(6, 3)]);
        let late = insert(&mut wheel, &slots, [2]); // due at 8, in round 2
        insert(&mut wheel, &slots, [9]);
        assert!(wheel.remove(&slots, late), "found where it was filed");
        insert(&mut wheel, &slots, [2]);
        assert_eq!(run_to(&mut wheel, &slots, 9), vec![(8, 2), (9, 9)]);
    }

    #[test]
    fn drain_all_and_remove_find_entries_in_buckets_and_overflow() {
        let (mut wheel, slots) = wheel(4);
        insert(&mut wheel, &slots, [1, 3, 5, 100, u64::MAX]);
        let mut out = vec![];
        wheel.drain_all(&slots, &mut out);
        assert_eq!(out.len(), 5);
        assert_eq!(wheel.len(&slots), 0);
        assert_eq!(wheel.next_work_tick(), None);
        let near = insert(&mut wheel, &slots, [2]);
        let far = insert(&mut wheel, &slots, [50]);
        insert(&mut wheel, &slots, [51]);
        assert!(wheel.remove(&slots, near));
        assert!(!wheel.remove(&slots, near), "second remove finds nothing");
        assert!(wheel.remove(&slots, far));
        assert!(!slots.get(near).in_wheel());
        assert_eq!(wheel.len(&slots), 1);
        assert_eq!(run_to(&mut wheel, &slots, 100), vec![(51, 51)]);
    }

    #[test]
    fn a_tick_touches_only_what_fires() {
        let (mut wheel, slots) = wheel(512);
        insert(&mut wheel, &slots, 60_000..70_000);
        // Nothing is due for ~117 rounds: the next work is at a round start,
        // and processing up to just before it touches no entry.
        assert_eq!(wheel.next_work_tick(), Some((60_000 >> 9) << 9));
        let mut due = vec![];
        assert_eq!(wheel.expire_next(&slots, 59_000, &mut due), None);
        assert!(due.is_empty());
        assert_eq!(wheel.current_tick(), 59_000);
        assert_eq!(wheel.len(&slots), 10_000);
        // It resumes there: the round moves in at its start, the first entry fires at its tick.
        assert_eq!(run_to(&mut wheel, &slots, 60_000), vec![(60_000, 60_000)]);
    }
}
