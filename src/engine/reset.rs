//! The timer's side of a reset: moving a pending one-shot timeout's
//! deadline in place (see `entry/` for the entry's side). A reset writes
//! the new deadline into the entry's state word; the wheel keeps it where
//! it was filed (tokio's "registered vs true deadline"). Then:
//!
//! - **Later** (a reset on every message): the driver does nothing until
//!   the filed deadline, then files the entry again by the new one. A
//!   thousand resets cost it one filing.
//! - **Earlier**: the entry may be filed, or held in its lane, too late.
//!   The reset puts the key in the driver's mailbox (with a reference) and
//!   wakes the driver if it would sleep past the new deadline; the driver
//!   takes the entry out of its bucket or lane and files it again.

use crate::engine::clock::Nanos;
use crate::engine::key::Key;
use crate::engine::shared::Shared;
use crate::engine::sync::{fence, Ordering};

impl Shared {
    /// Moves the deadline of `key`, a pending one-shot timeout the caller
    /// holds, to `to`. False, changing nothing, if it is periodic, no
    /// longer pending, or the timer is shutting down.
    pub(crate) fn reset(&self, key: Key, to: Nanos) -> bool {
        let entry = self.entry(key);
        if entry.is_periodic() || self.is_shutdown() {
            return false;
        }
        let Some(old) = entry.try_reset(to) else {
            return false;
        };
        // The entry is filed no later than the tick of its old deadline.
        // Ticks (a division each) only for the rarer reset to earlier.
        if to < old && self.clock.tick_of(to) < self.clock.tick_of(old) {
            self.slots.retain(key); // the mailbox's
            self.mailbox.push(key);
            // Pairs with the worker's store of `planned_wake`; fence; read
            // of the mailbox (see `plan_sleep`): it sees our key, or we see
            // when it plans to wake.
            fence(Ordering::SeqCst);
            if to < self.planned_wake.load(Ordering::SeqCst) {
                self.unpark_worker();
            }
        }
        true
    }

    /// The deadline in force for `key`.
    pub(crate) fn deadline_of(&self, key: Key) -> Nanos {
        self.entry(key).deadline()
    }
}

#[cfg(test)]
mod tests {
    use crate::HashedWheelTimer;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_later_reset_gives_the_driver_nothing_to_do_until_the_old_deadline() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let t = timer.new_timeout(|_| {}, MS * 100).unwrap();
        timer.advance(MS * 70); // filed
        let entry = shared.entry(t.key());
        let filed = entry.filed();
        assert!(entry.in_wheel());
        for n in 1..=1_000u32 {
            assert!(t.reset(MS * 100 + MS * n / 100));
        }
        assert!(shared.mailbox.is_empty(), "nothing queued for the driver");
        assert_eq!(entry.filed(), filed, "still where the wheel filed it");
        timer.advance(MS * 29);
        assert_eq!(entry.filed(), filed, "untouched before the old deadline");
        timer.advance(MS);
        assert!(t.is_pending(), "found moved at the old deadline");
        assert_eq!(
            shared.clock.to_instant(entry.filed()),
            t.deadline(),
            "filed again, once"
        );
        assert!(entry.in_wheel());
    }

    #[test]
    fn an_earlier_reset_is_queued_once_and_its_reference_comes_back() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let t = timer.new_timeout(|_| {}, MS * 500).unwrap();
        timer.advance(MS * 70);
        assert!(t.reset(MS * 10));
        assert_eq!(shared.mailbox.len(), 1);
        timer.advance(Duration::ZERO);
        assert!(shared.mailbox.is_empty());
        assert_eq!(
            shared.entry(t.key()).filed(),
            shared.clock.to_nanos(t.deadline())
        );
        timer.advance(MS * 10);
        assert!(t.is_expired());
        drop(t);
        assert_eq!(shared.live(), 0, "every reference came back");
    }

    /// Invariant 6 for reset timeouts: the wheel finds a filed entry by the
    /// deadline it was filed by, so a cancel after a reset (later or
    /// earlier) still takes it out within a tick, and its slot comes back.
    #[test]
    fn a_reset_then_cancelled_timeout_leaves_the_wheel_within_a_tick() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let shared = timer.shared();
        let later = timer.new_timeout(|_| {}, MS * 100).unwrap();
        let earlier = timer.new_timeout(|_| {}, MS * 400).unwrap();
        timer.advance(MS * 70); // both filed
        assert!(later.reset(MS * 300));
        assert!(earlier.reset(MS * 5));
        timer.advance(Duration::ZERO); // the earlier one filed again
        assert_eq!(shared.lock_core().wheel.len(), 2);
        assert!(later.cancel() && earlier.cancel());
        timer.advance(MS);
        assert_eq!(shared.lock_core().wheel.len(), 0, "both out within a tick");
        drop((later, earlier));
        assert_eq!(shared.live(), 0, "both slots came back");
        timer.advance(MS * 500); // nothing left to fire or to find
        assert_eq!(timer.stats().fired, 0);
    }
}
