//! Holding: a timeout whose deadline is far waits in its producer's lane
//! until it is `hold` old, and only then reaches the wheel.
//!
//! RPC code cancels most timeouts a few milliseconds after it made them,
//! when the response comes. A cancel that finds its timeout still in the
//! lane withdraws it there: one swap on a cell its producer wrote, and the
//! slot goes back to the producer's free stack, warm in its cache (see
//! `lane/`). A cancel that comes after the driver filed the timeout costs
//! far more: a queue to the driver, an unlink from a bucket, a slot freed
//! on another core. So the driver files a lane's keys only once they are
//! old enough that most cancels have come: `HOLD` (64 ms). Those still in
//! the ring then are few, and the driver never touches the rest.
//!
//! Nothing may fire late for it. A producer marks a key *urgent* if its
//! deadline is within `urgent_nanos` of now (see `Policy`); the driver files
//! a lane's keys up to its last urgent one at every look, as it filed
//! everything before. A key that is not urgent is due at least `hold + gap`
//! ticks after it was pushed, and is filed by then.
//!
//! # Knowing when a key was pushed
//!
//! The driver does not read an entry to learn its age. At each look it
//! reads the lane's tail and notes the tick: every cell before that tail
//! was pushed by then, and every cell after it will be pushed later. So the
//! cells between two readings form a *segment* pushed within a known span
//! `[lo, hi]` of ticks. A segment is filed at `hi + hold` (each of its keys
//! is at least `hold` old), but no later than `lo + hold + gap`: a driver
//! that slept long between two readings (nothing else was due) knows only
//! that the keys are due at least `hold + gap` ticks after `lo`, and files
//! them then, younger than `hold` perhaps, but in time.
//!
//! Segments are filed oldest first, and a lane's keys in order, so equal
//! deadlines from one thread still fire in submission order.

use std::collections::VecDeque;
use std::time::Duration;

/// How old a key that is not urgent is when the driver files it.
pub(crate) const HOLD: Duration = Duration::from_millis(64);

/// The holding rules of one timer, in its ticks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// Ticks a key waits in its lane before it is filed.
    pub(crate) hold: u64,
    /// The longest span of pushes one segment may cover: readings closer
    /// than this merge into one segment, which bounds a lane's record.
    pub(crate) gap: u64,
    /// A key due within this many nanoseconds of its push is urgent.
    pub(crate) urgent_nanos: u64,
}

impl Policy {
    pub(crate) fn new(tick_nanos: u64) -> Policy {
        let hold = (HOLD.as_nanos() as u64).div_ceil(tick_nanos).max(1);
        let gap = (hold / 16).max(1);
        // Two ticks more: the producer reads its clock a moment before it
        // pushes, and the driver's reading is rounded down to a tick.
        let urgent_ticks = hold + gap + 2;
        Policy {
            hold,
            gap,
            urgent_nanos: urgent_ticks.saturating_mul(tick_nanos),
        }
    }

    /// The tick by which a segment pushed within `[lo, hi]` is filed.
    fn file_by(&self, lo: u64, hi: u64) -> u64 {
        hi.saturating_add(self.hold)
            .min(lo.saturating_add(self.hold + self.gap))
    }
}

/// Cells pushed within `[lo, hi]` (ticks), ending before cell `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    lo: u64,
    hi: u64,
    end: u64,
}

/// What the driver knows of one lane's cells not yet filed.
#[derive(Debug, Default)]
pub(crate) struct LaneHold {
    segments: VecDeque<Segment>,
    /// The tick of the last reading of the tail: cells past `seen_tail`
    /// were pushed at or after it.
    seen_tick: u64,
    seen_tail: u64,
}

/// One reading of a lane, for `LaneHold::upto`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    /// The driver's tick now.
    pub(crate) now: u64,
    /// The oldest cell not yet filed (the lane's head).
    pub(crate) head: u64,
    /// The next cell the owner writes.
    pub(crate) tail: u64,
    /// Just past the last urgent key pushed.
    pub(crate) urgent: u64,
    /// The most cells the driver may leave unfiled: fewer while the ring
    /// fills up, `u64::MAX` otherwise.
    pub(crate) keep_at_most: u64,
}

impl LaneHold {
    /// Takes `r` into the record and returns the cell up to which the
    /// driver files now: every urgent key, every segment due to be filed,
    /// and enough of the oldest to leave at most `keep_at_most` cells.
    pub(crate) fn upto(&mut self, policy: &Policy, r: Reading) -> u64 {
        self.note(policy, r.now, r.tail);
        let mut upto = r
            .head
            .max(r.urgent.min(r.tail))
            .max(r.tail.saturating_sub(r.keep_at_most));
        while let Some(front) = self.segments.front() {
            let due = policy.file_by(front.lo, front.hi) <= r.now;
            if !(due || front.end <= upto) {
                break;
            }
            upto = upto.max(front.end);
            self.segments.pop_front();
        }
        upto.min(r.tail)
    }

    /// Records the cells pushed since the last reading as a segment, or
    /// merges them into the newest one if that began at most `gap` ago.
    fn note(&mut self, policy: &Policy, now: u64, tail: u64) {
        if tail > self.seen_tail {
            let lo = self.seen_tick;
            match self.segments.back_mut() {
                Some(back) if now <= back.lo.saturating_add(policy.gap) => {
                    back.hi = now;
                    back.end = tail;
                }
                _ => self.segments.push_back(Segment {
                    lo,
                    hi: now,
                    end: tail,
                }),
            }
        }
        self.seen_tick = self.seen_tick.max(now);
        self.seen_tail = self.seen_tail.max(tail);
    }

    /// After a drain that left the lane's head at `head`: forgets segments
    /// it passed (the owner may also have moved the head past withdrawn
    /// cells).
    pub(crate) fn filed(&mut self, head: u64) {
        while self.segments.front().is_some_and(|s| s.end <= head) {
            self.segments.pop_front();
        }
    }

    /// The tick by which the driver must look at this lane again to file
    /// what it holds in time, if it holds anything.
    pub(crate) fn next_look(&self, policy: &Policy) -> Option<u64> {
        let front = self.segments.front()?;
        Some(policy.file_by(front.lo, front.hi))
    }

    /// For a lane whose tail is now `tail`, after the driver planned its
    /// sleep: if keys arrived since the last reading, the tick by which it
    /// must look at them (they were pushed at or after that reading).
    pub(crate) fn look_for_arrivals(&self, policy: &Policy, tail: u64) -> Option<u64> {
        (tail > self.seen_tail).then(|| policy.file_by(self.seen_tick, u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK_MS: u64 = 1_000_000;

    fn policy() -> Policy {
        Policy::new(TICK_MS)
    }

    /// A lane first read at tick `tick`, empty then.
    fn seen_at(tick: u64) -> LaneHold {
        LaneHold {
            seen_tick: tick,
            ..LaneHold::default()
        }
    }

    fn read(now: u64, head: u64, tail: u64) -> Reading {
        Reading {
            now,
            head,
            tail,
            urgent: 0,
            keep_at_most: u64::MAX,
        }
    }

    #[test]
    fn the_default_policy_holds_64_ticks_of_a_millisecond() {
        let p = policy();
        assert_eq!((p.hold, p.gap), (64, 4));
        assert_eq!(p.urgent_nanos, 70 * TICK_MS);
        // A tick longer than the hold: one tick.
        let coarse = Policy::new(100 * TICK_MS);
        assert_eq!((coarse.hold, coarse.gap), (1, 1));
        assert_eq!(coarse.urgent_nanos, 400 * TICK_MS);
    }

    #[test]
    fn keys_wait_until_they_are_a_hold_old() {
        let p = policy();
        // Last read empty at tick 10: these keys were pushed since.
        let mut h = seen_at(10);
        assert_eq!(h.upto(&p, read(10, 0, 100)), 0, "young: held");
        assert_eq!(h.next_look(&p), Some(74));
        // More arrive a tick later: merged into the same segment, which is
        // filed once its last keys are a hold old, at 11 + 64.
        assert_eq!(h.upto(&p, read(11, 0, 150)), 0);
        assert_eq!(h.upto(&p, read(74, 0, 150)), 0);
        assert_eq!(h.upto(&p, read(75, 0, 200)), 150);
        h.filed(150);
        // Pushed between the readings at 74 and 75: filed at 75 + 64.
        assert_eq!(h.next_look(&p), Some(139));
        assert_eq!(h.upto(&p, read(138, 150, 200)), 150);
        assert_eq!(h.upto(&p, read(139, 150, 200)), 200);
    }

    #[test]
    fn a_long_sleep_files_by_the_earliest_push_plus_hold_and_gap() {
        let p = policy();
        let mut h = seen_at(10);
        // Read at 10, then not again until 300: the keys between may have
        // been pushed at 10, so they are filed by 10 + 64 + 4 = 78.
        assert_eq!(h.upto(&p, read(10, 0, 0)), 0);
        assert_eq!(h.next_look(&p), None, "nothing held");
        assert_eq!(h.look_for_arrivals(&p, 5), Some(78));
        assert_eq!(h.upto(&p, read(78, 0, 5)), 5, "at risk: filed");
    }

    #[test]
    fn urgent_keys_and_a_filling_ring_are_filed_at_once() {
        let p = policy();
        let mut h = seen_at(5);
        let mut r = read(5, 0, 100);
        r.urgent = 40;
        assert_eq!(h.upto(&p, r), 40, "up to the last urgent key, in order");
        r.urgent = 0;
        r.keep_at_most = 30;
        assert_eq!(h.upto(&p, r), 70, "the oldest, leaving 30");
        // An urgent mark past the tail read (read in another order) is
        // capped: those keys come at the next look.
        r.urgent = 500;
        assert_eq!(h.upto(&p, r), 100);
    }

    #[test]
    fn readings_within_a_gap_merge_and_the_record_stays_short() {
        let p = policy();
        let mut h = seen_at(0);
        for now in 0..64 {
            h.upto(&p, read(now, 0, now + 1));
        }
        assert_eq!(h.segments.len(), 16, "one per {} readings", p.gap);
        // Merged segments are filed by their earliest push plus hold and
        // gap: never later than a key of theirs may be due.
        for s in &h.segments {
            assert!(p.file_by(s.lo, s.hi) <= s.lo + p.hold + p.gap);
            assert!(s.hi - s.lo <= p.gap);
        }
    }

    #[test]
    fn segments_the_owner_reclaimed_are_forgotten() {
        let p = policy();
        let mut h = seen_at(1);
        h.upto(&p, read(1, 0, 10));
        h.upto(&p, read(30, 0, 20));
        h.filed(15);
        assert_eq!(h.segments.len(), 1);
        assert_eq!(h.upto(&p, read(31, 15, 20)), 15);
        h.filed(20);
        assert_eq!(h.next_look(&p), None);
    }
}
