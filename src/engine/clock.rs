//! The timer's own time: nanoseconds since its start, and tick arithmetic.
//!
//! A timer reads one of three clocks (`Source`: real, manual or a tokio runtime's). `Clock::now` is
//! the one reading: deadlines, `remaining()` and firing all take it (invariant 8). Times and
//! deadlines saturate at `NEVER`: a huge delay never overflows.

use std::time::{Duration, Instant};

use tokio::runtime::RuntimeFlavor;

use crate::engine::sync::{AtomicU64, Ordering};

/// Nanoseconds since the timer's start, at most `NEVER`.
pub(crate) type Nanos = u64;

/// The end of a timer's time, 2^61 ns (73 years) from its start: no clock reads later, and real
/// time never gets there (a paused tokio clock moved there fires what is due there, as tokio does;
/// a manual one never does: `has_come`). It fits an entry's state word beside the status
/// (`entry/mod.rs`).
pub(crate) const NEVER: Nanos = u64::MAX >> 3;

/// `d` in nanoseconds, saturated at `NEVER`.
pub(crate) fn saturating_nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).map_or(NEVER, |n| n.min(NEVER))
}

/// `at + by`, saturated at `NEVER`.
pub(crate) fn later(at: Nanos, by: Nanos) -> Nanos {
    at.saturating_add(by).min(NEVER)
}

#[cfg(all(test, not(loom)))]
thread_local! {
    /// `Clock::now` calls on this thread, for tests of what reads the clock.
    pub(crate) static READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) struct Clock {
    /// What `to_instant` and `to_nanos` count from, on every clock.
    start: Instant,
    source: Source,
    /// Manual clock only: what `now()` reads; during `advance`, the tick being fired.
    manual_now: AtomicU64,
    /// Manual clock only: where the running `advance` will leave `manual_now`.
    manual_target: AtomicU64,
    /// `now()` is `start.elapsed()`: on the real clock, and on a tokio
    /// runtime's that cannot be paused (only a current-thread one's can).
    real_time: bool,
    tick_nanos: u64,
    /// The last tick the clock reaches: the one before a saturated deadline's.
    last_tick: u64,
}

/// The clock a timer reads, and what reading it takes.
pub(crate) enum Source {
    /// `Instant::now()`, since `Clock::start`.
    Real,
    Manual,
    Tokio(tokio::runtime::Handle),
}

impl Clock {
    pub(crate) fn of(tick_nanos: u64, source: Source) -> Clock {
        let (start, real_time) = match &source {
            Source::Real => (Instant::now(), true),
            Source::Manual => (Instant::now(), false),
            Source::Tokio(handle) => {
                let _entered = handle.enter();
                let real_time = handle.runtime_flavor() == RuntimeFlavor::MultiThread;
                (tokio::time::Instant::now().into_std(), real_time)
            }
        };
        Clock {
            start,
            source,
            manual_now: AtomicU64::new(0),
            manual_target: AtomicU64::new(0),
            real_time,
            tick_nanos,
            last_tick: NEVER.div_ceil(tick_nanos) - 1,
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> Nanos {
        #[cfg(all(test, not(loom)))]
        READS.with(|reads| reads.set(reads.get() + 1));
        match &self.source {
            Source::Manual => self.manual_now.load(Ordering::Acquire),
            Source::Tokio(handle) if !self.real_time => {
                // Enter it whatever the thread: tokio reads the current
                // runtime's clock, maybe another runtime's or the real one.
                let _entered = handle.enter();
                let now = tokio::time::Instant::now().into_std();
                saturating_nanos(now.saturating_duration_since(self.start))
            }
            _ => saturating_nanos(self.start.elapsed()),
        }
    }

    /// `delay` from now, saturated: never earlier than `now() + delay`.
    #[inline]
    pub(crate) fn deadline_after(&self, delay: Duration) -> Nanos {
        self.now_and_after(delay).1
    }

    /// The time now, and `deadline_after(delay)` from that one reading.
    #[inline]
    pub(crate) fn now_and_after(&self, delay: Duration) -> (Nanos, Nanos) {
        let now = self.now();
        (now, later(now, saturating_nanos(delay)))
    }

    pub(crate) fn is_real(&self) -> bool {
        matches!(self.source, Source::Real)
    }

    /// True if `now()` is the real time (the real clock, or a tokio clock
    /// that cannot be paused): a reading only grows stale, never wrong.
    pub(crate) fn reads_real_time(&self) -> bool {
        self.real_time
    }

    /// True once `deadline` has come at `now`: never for a saturated one on the manual clock, whose
    /// wheel never fires it (a paused tokio clock's does, as tokio's `sleep(Duration::MAX)`).
    pub(crate) fn has_come(&self, deadline: Nanos, now: Nanos) -> bool {
        deadline <= now && (deadline < NEVER || !self.is_manual())
    }

    pub(crate) fn is_manual(&self) -> bool {
        matches!(self.source, Source::Manual)
    }

    pub(crate) fn tokio_runtime(&self) -> Option<&tokio::runtime::Handle> {
        match &self.source {
            Source::Tokio(handle) => Some(handle),
            _ => None,
        }
    }

    /// Moves a manual clock forward to `to`; never backwards.
    pub(crate) fn set_manual(&self, to: Nanos) {
        if self.is_manual() {
            self.manual_now.fetch_max(to.min(NEVER), Ordering::AcqRel);
        }
    }

    pub(crate) fn manual_target(&self) -> Option<&AtomicU64> {
        self.is_manual().then_some(&self.manual_target)
    }

    pub(crate) fn to_instant(&self, nanos: Nanos) -> Instant {
        saturating_add(self.start, Duration::from_nanos(nanos))
    }

    /// `instant` on this clock, saturated at 0 and `u64::MAX`.
    pub(crate) fn to_nanos(&self, instant: Instant) -> Nanos {
        saturating_nanos(instant.saturating_duration_since(self.start))
    }

    /// The first tick whose end is at or after `deadline`.
    pub(crate) fn tick_of(&self, deadline: Nanos) -> u64 {
        deadline.div_ceil(self.tick_nanos)
    }

    /// The last tick ended at `now`, capped at `last_tick`.
    pub(crate) fn ticks_at(&self, now: Nanos) -> u64 {
        (now / self.tick_nanos).min(self.last_tick)
    }

    /// What a turn at `now` fires of what arrives: due by the tick's start, as the wheel fires whole
    /// ticks, or on a tokio clock due by `now`, as `Wheel::expire_due_by` does.
    pub(crate) fn ready_by(&self, now: Nanos) -> Nanos {
        self.tokio_runtime()
            .map_or_else(|| self.time_of(self.ticks_at(now)), |_| now)
    }

    /// `deadline`, or once it has come at `now`, at most `ready_by(now)`: a turn now fires it (on a
    /// tokio clock in deadline order with the wheel's keys due by `now`).
    pub(crate) fn due_by(&self, deadline: Nanos, now: Nanos) -> Nanos {
        match self.has_come(deadline, now) {
            true => deadline.min(self.ready_by(now)), // a division: only if due
            false => deadline,
        }
    }

    /// When tick `tick` ends.
    pub(crate) fn time_of(&self, tick: u64) -> Nanos {
        tick.saturating_mul(self.tick_nanos)
    }
}

/// The earlier of two optional times.
pub(crate) fn earliest(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    a.zip(b).map(|(a, b)| a.min(b)).or(a).or(b)
}

/// How far ahead an unrepresentable instant is clamped to: 30 years, as
/// tokio does, beyond any real deadline yet safe to add to an `Instant`.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `at + by`, or `at + FAR_FUTURE` where that overflows: it never panics.
pub(crate) fn saturating_add(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(FAR_FUTURE))
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_of_rounds_up_to_the_tick_end_and_never_reaches_a_saturated_deadline() {
        let clock = Clock::of(10, Source::Manual);
        for deadline in 0..1_000u64 {
            let tick = clock.tick_of(deadline);
            assert!(clock.time_of(tick) >= deadline, "never early");
            assert!(tick == 0 || clock.time_of(tick - 1) < deadline, "the first");
        }

        // A saturated deadline is beyond every reachable tick, with ticks that
        // divide `NEVER` exactly, and ticks that do not.
        for tick_nanos in [1, 3, 5, 17, 1_000, 1_000_000, u64::MAX] {
            let clock = Clock::of(tick_nanos, Source::Manual);
            let last = clock.ticks_at(NEVER);
            assert!(last < clock.tick_of(NEVER), "{tick_nanos}");
            assert_eq!(clock.ticks_at(u64::MAX), last, "{tick_nanos}");
            let before = NEVER - 1;
            assert_eq!(clock.ticks_at(before), last.min(before / tick_nanos));
        }
    }

    /// Huge values saturate at the end of time; instants round-trip; a manual clock only moves
    /// forward; a deadline is never before now plus the delay.
    #[test]
    fn values_saturate_and_round_trip_and_a_deadline_is_never_early() {
        let clock = Clock::of(1_000_000, Source::Manual);
        assert_eq!(clock.deadline_after(Duration::MAX), NEVER);
        assert_eq!(clock.time_of(u64::MAX), u64::MAX);
        let _ = clock.to_instant(NEVER);
        let start = clock.to_instant(0);
        assert_eq!(clock.to_nanos(start), 0);
        assert_eq!(clock.to_nanos(clock.to_instant(12_345)), 12_345);
        let before = start.checked_sub(Duration::from_secs(1));
        assert_eq!(before.map(|b| clock.to_nanos(b)).unwrap_or(0), 0);
        let far = saturating_add(start, Duration::MAX);
        assert!(far > start);
        assert_eq!(clock.to_nanos(far), FAR_FUTURE.as_nanos() as u64);
        clock.set_manual(50);
        clock.set_manual(20);
        assert_eq!(clock.now(), 50);
        assert_eq!(clock.deadline_after(Duration::from_nanos(7)), 57);
        clock.set_manual(u64::MAX);
        assert_eq!(clock.now(), NEVER, "no clock reads past it");
        assert_eq!(clock.deadline_after(Duration::from_secs(1)), NEVER);

        // Holds however slowly this runs: a delay only moves the deadline on.
        let clock = Clock::of(1_000_000, Source::Real);
        for _ in 0..if cfg!(miri) { 100 } else { 10_000 } {
            let now = clock.now();
            assert!(clock.deadline_after(Duration::from_nanos(7)) >= now + 7);
            assert!(clock.deadline_after(Duration::ZERO) <= clock.now());
        }
    }

    /// Only a current-thread runtime's clock can be paused: a multi-thread one's is read as the
    /// real clock, with no `enter`, and a paused one's through its runtime, from any thread.
    #[test]
    fn a_tokio_clock_enters_its_runtime_only_if_it_can_be_paused() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap();
        assert!(Clock::of(1, Source::Tokio(multi.handle().clone())).real_time);
        let paused = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let clock = Clock::of(1, Source::Tokio(paused.handle().clone()));
        assert!(!clock.real_time);
        let hour = Duration::from_secs(3600);
        paused.block_on(tokio::time::advance(hour));
        let read = std::thread::spawn(move || clock.now()).join().unwrap();
        assert!(read >= hour.as_nanos() as u64, "the paused clock");
    }
}
