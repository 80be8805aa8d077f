//! The async faces (`Interval`, `TimeoutFuture`, the tower layer) against `tokio::time`'s and
//! tower's on one paused current-thread runtime, with the crate's timer a `tokio_clock()` one made
//! the free functions' default. The two sides run as separate tasks, so a lost wake-up on one side
//! is not hidden by the other's.
//!
//! What is asserted: on tokio's millisecond grid (periods, work and resets whole milliseconds) the
//! crate returns the same instants at the same times as tokio; off the grid, both sides follow
//! one model of `Interval` (tokio's own code), and the crate completes never earlier than tokio's
//! rounding and at most one tick later. Every long run is guarded by a timeout on the paused
//! clock, which fails instead of hanging. Wakers, panics, drops, stops and the tower layer:
//! `tests/async_faces_edges.rs`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use hashed_wheel_timer::{self as hwt, HashedWheelTimer, MissedTickBehavior};
use proptest::prelude::*;
use tokio::time::{self as tt, Instant};

mod common;
use common::paused::{paused_runtime, tokio_clock, GUARD};

const MS: Duration = Duration::from_millis(1);

/// `d` rounded up to tokio's millisecond grid (offsets from the runtime's start).
fn ceil_ms(d: Duration) -> Duration {
    let ms = d.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(ms as u64)
}

fn floor_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

// ---- Interval ----

#[derive(Clone, Copy, Debug)]
enum Reset {
    Plain,
    Immediately,
    After(Duration),
    At(Duration),
    /// `reset_at` this long ago.
    Back(Duration),
}

/// One step between ticks: work (a sleep on tokio's clock), then maybe a reset.
#[derive(Clone, Copy, Debug)]
struct Step {
    work: Duration,
    reset: Option<Reset>,
}

/// One tick as seen by the loop: when `tick()` was called, what it returned, when it returned;
/// offsets from the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tick {
    called: Duration,
    due: Duration,
    done: Duration,
    /// When the work after it ended, and a reset (if any) was made.
    resumed: Duration,
}

#[derive(Clone, Debug)]
struct Script {
    period: Duration,
    behavior: MissedTickBehavior,
    /// `None`: `interval(period)`; `Some(off)`: `interval_at(start + off, period)`.
    first: Option<Duration>,
    steps: Vec<Step>,
    /// Work by `tokio::time::advance` in the loop (the two sides then take turns) rather than by
    /// sleeping (the two sides run at once).
    advance: bool,
    /// The crate's timer is stopped after this many ticks: its interval ticks on, on its
    /// runtime's clock (`Sleep`'s "When the timer stops"), as tokio's.
    stop: Option<usize>,
    /// The crate's timer is built this long (under a millisecond) after a whole one: its ticks
    /// are then off tokio's grid.
    timer_skew: Duration,
}

/// The `Interval` API both sides share.
trait Ticker: Send + 'static {
    fn tick(&mut self) -> Pin<Box<dyn Future<Output = std::time::Instant> + Send + '_>>;
    fn reset(&mut self, how: Reset, now: Instant);
}

impl Ticker for tt::Interval {
    fn tick(&mut self) -> Pin<Box<dyn Future<Output = std::time::Instant> + Send + '_>> {
        Box::pin(async move { tt::Interval::tick(self).await.into_std() })
    }
    fn reset(&mut self, how: Reset, now: Instant) {
        match how {
            Reset::Plain => tt::Interval::reset(self),
            Reset::Immediately => self.reset_immediately(),
            Reset::After(d) => self.reset_after(d),
            Reset::At(d) => self.reset_at(now + d),
            Reset::Back(d) => self.reset_at(now - d),
        }
    }
}

impl Ticker for hwt::Interval {
    fn tick(&mut self) -> Pin<Box<dyn Future<Output = std::time::Instant> + Send + '_>> {
        Box::pin(hwt::Interval::tick(self))
    }
    fn reset(&mut self, how: Reset, now: Instant) {
        match how {
            Reset::Plain => hwt::Interval::reset(self),
            Reset::Immediately => self.reset_immediately(),
            Reset::After(d) => self.reset_after(d),
            Reset::At(d) => self.reset_at(now + d),
            Reset::Back(d) => self.reset_at(now - d),
        }
    }
}

/// The crate's interval as a `Stream`: the same ticks, and it ends only on a stop.
struct Streamed(hwt::Interval);

impl Ticker for Streamed {
    fn tick(&mut self) -> Pin<Box<dyn Future<Output = std::time::Instant> + Send + '_>> {
        Box::pin(async move { futures::StreamExt::next(&mut self.0).await.unwrap() })
    }
    fn reset(&mut self, how: Reset, now: Instant) {
        Ticker::reset(&mut self.0, how, now);
    }
}

impl Ticker for Box<dyn Ticker> {
    fn tick(&mut self) -> Pin<Box<dyn Future<Output = std::time::Instant> + Send + '_>> {
        (**self).tick()
    }
    fn reset(&mut self, how: Reset, now: Instant) {
        (**self).reset(how, now);
    }
}

/// The crate's side: `tick()`, or the stream for half the scripts without a stop.
fn ours(iv: hwt::Interval, script: &Script) -> Box<dyn Ticker> {
    if script.stop.is_none() && script.steps.len() % 2 == 0 {
        Box::new(Streamed(iv))
    } else {
        Box::new(iv)
    }
}

async fn run_script(
    mut iv: impl Ticker,
    start: Instant,
    script: Script,
    timer: Option<HashedWheelTimer>,
) -> Vec<Tick> {
    let mut ticks = Vec::new();
    for (i, step) in script
        .steps
        .iter()
        .chain([&Step {
            work: Duration::ZERO,
            reset: None,
        }])
        .enumerate()
    {
        if let Some(timer) = timer.as_ref().filter(|_| script.stop == Some(i)) {
            timer.stop().unwrap();
        }
        let called = Instant::now() - start;
        let due = iv.tick().await - start.into_std();
        let done = Instant::now() - start;
        if script.advance {
            tt::advance(step.work).await;
        } else {
            tt::sleep(step.work).await;
        }
        let resumed = Instant::now() - start;
        ticks.push(Tick {
            called,
            due,
            done,
            resumed,
        });
        if let Some(how) = step.reset {
            iv.reset(how, Instant::now());
        }
    }
    ticks
}

/// tokio's `Interval::poll_tick`: the tick after one due at `due` and taken at `now`.
fn model_next(b: MissedTickBehavior, due: Duration, now: Duration, period: Duration) -> Duration {
    if now <= due + 5 * MS {
        return due + period;
    }
    match b {
        MissedTickBehavior::Burst => due + period,
        MissedTickBehavior::Delay => now + period,
        MissedTickBehavior::Skip => {
            let late = (now - due).as_nanos() % period.as_nanos();
            now + period - Duration::from_nanos(late as u64)
        }
    }
}

/// Checks one side's ticks against the model; `slack` is how much later than tokio's rounding
/// a tick may complete. `precise`: a tick already due when `tick()` is called completes at once,
/// where tokio's waits for its driver's next millisecond (the crate's README: after
/// `tokio::time::advance`, what is due is ready at the next poll).
fn check_model(side: &str, script: &Script, ticks: &[Tick], slack: Duration, precise: bool) {
    let ctx = || format!("{side}: {script:?}\nticks: {ticks:#?}");
    let mut due = script.first.unwrap_or(LEAD);
    for (i, t) in ticks.iter().enumerate() {
        assert_eq!(t.due, due, "tick {i} due\n{}", ctx());
        let tokio_done = if (precise && due <= t.called) || ceil_ms(due) <= floor_ms(t.called) {
            t.called
        } else {
            // Paused, tokio's clock jumps by whole milliseconds of its driver's.
            t.called + (ceil_ms(due) - floor_ms(t.called))
        };
        assert!(t.done >= t.due, "tick {i} early\n{}", ctx());
        // Off tokio's grid (sub-millisecond advances), a driver awake for another reason fires
        // what its clock says is due, before tokio's next millisecond: a tick due at 35328.001 ms,
        // awaited from 35079.015 ms, completes at 35328.015 ms, where the driver wakes to start a
        // wheel round (512 ticks); tokio's at 35329.015 ms. Never before the deadline.
        if !precise {
            assert!(
                t.done >= tokio_done,
                "tick {i} before tokio's would\n{}",
                ctx()
            );
        }
        assert!(t.done <= tokio_done + slack, "tick {i} late\n{}", ctx());
        due = model_next(script.behavior, t.due, t.done, script.period);
        let Some(step) = script.steps.get(i) else {
            break;
        };
        let now = t.resumed;
        due = match step.reset {
            None => due,
            Some(Reset::Plain) => now + script.period,
            Some(Reset::Immediately) => now,
            Some(Reset::After(d) | Reset::At(d)) => now + d,
            Some(Reset::Back(d)) => now - d,
        };
    }
}

/// How long before the loop starts the script's times count from: `interval_at` may start up to
/// this much in the past.
const LEAD: Duration = Duration::from_millis(100);

/// Runs `script` on tokio's interval and the crate's, as two tasks, from one start instant.
fn compare_interval(script: Script) {
    paused_runtime().block_on(async {
        tt::advance(script.timer_skew).await;
        let timer = tokio_clock();
        let _guard = hwt::set_default(timer.clone());
        tt::advance(LEAD + MS - script.timer_skew).await;
        let start = Instant::now() - LEAD;
        let (p, b) = (script.period, script.behavior);
        let mut theirs = match script.first {
            None => tt::interval(p),
            Some(off) => tt::interval_at(start + off, p),
        };
        theirs.set_missed_tick_behavior(match b {
            MissedTickBehavior::Burst => tt::MissedTickBehavior::Burst,
            MissedTickBehavior::Delay => tt::MissedTickBehavior::Delay,
            MissedTickBehavior::Skip => tt::MissedTickBehavior::Skip,
        });
        let mut iv = match script.first {
            None => hwt::interval(p),
            Some(off) => hwt::interval_at(start + off, p),
        };
        iv.set_missed_tick_behavior(b);
        let (theirs, ours) = if script.advance {
            let theirs = tt::timeout(GUARD, run_script(theirs, start, script.clone(), None)).await;
            // The same script from the next whole millisecond, tokio's grid.
            tt::advance(ceil_ms(start.elapsed()) - start.elapsed() + MS).await;
            let start2 = Instant::now() - LEAD;
            let mut iv = match script.first {
                None => hwt::interval(p),
                Some(off) => hwt::interval_at(start2 + off, p),
            };
            iv.set_missed_tick_behavior(b);
            let ours = tt::timeout(
                GUARD,
                run_script(
                    ours(iv, &script),
                    start2,
                    script.clone(),
                    Some(timer.clone()),
                ),
            )
            .await;
            (
                theirs.expect("tokio's interval hung"),
                ours.expect("the crate's interval hung"),
            )
        } else {
            let a = tokio::spawn(tt::timeout(
                GUARD,
                run_script(theirs, start, script.clone(), None),
            ));
            let c = tokio::spawn(tt::timeout(
                GUARD,
                run_script(
                    ours(iv, &script),
                    start,
                    script.clone(),
                    Some(timer.clone()),
                ),
            ));
            let theirs = a.await.unwrap().expect("tokio's interval hung");
            let ours = c.await.unwrap().expect("the crate's interval hung");
            (theirs, ours)
        };
        check_model("tokio", &script, &theirs, Duration::ZERO, false);
        check_model(
            "crate",
            &script,
            &ours,
            timer.tick_duration(),
            script.advance,
        );
        let on_grid = |d: Duration| d.subsec_nanos() % 1_000_000 == 0;
        let grid = on_grid(script.period)
            && script.first.is_none_or(on_grid)
            && script.steps.iter().all(|s| {
                on_grid(s.work)
                    && !matches!(s.reset, Some(Reset::After(d) | Reset::At(d) | Reset::Back(d)) if !on_grid(d))
            });
        if grid {
            assert_eq!(ours, theirs, "{script:?}");
        }
        drop(_guard);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

fn duration_us(max_us: u64, grid: bool) -> BoxedStrategy<Duration> {
    if grid {
        (0..=max_us / 1000).prop_map(Duration::from_millis).boxed()
    } else {
        (0..=max_us).prop_map(Duration::from_micros).boxed()
    }
}

fn script() -> impl Strategy<Value = Script> {
    let behavior = prop_oneof![
        Just(MissedTickBehavior::Burst),
        Just(MissedTickBehavior::Delay),
        Just(MissedTickBehavior::Skip)
    ];
    let knobs = (
        any::<bool>(),
        any::<bool>(),
        1..=50u64,
        100..50_000u64,
        behavior,
    );
    knobs.prop_flat_map(|(grid, advance, ms, us, behavior)| {
        let period = if grid {
            Duration::from_millis(ms)
        } else {
            Duration::from_micros(us)
        };
        let max = period.as_micros() as u64 * 4 + 12_000;
        let reset = prop_oneof![
            6 => Just(None),
            1 => Just(Some(Reset::Plain)),
            1 => Just(Some(Reset::Immediately)),
            1 => duration_us(max, grid).prop_map(|d| Some(Reset::After(d))),
            1 => duration_us(max, grid).prop_map(|d| Some(Reset::At(d))),
            1 => duration_us(LEAD.as_micros() as u64, grid).prop_map(|d| Some(Reset::Back(d))),
        ];
        let work = prop_oneof![2 => Just(Duration::ZERO), 5 => duration_us(max, grid)];
        let step = (work, reset).prop_map(|(work, reset)| Step { work, reset });
        let max_first = LEAD.as_micros() as u64 + max;
        let first = prop_oneof![Just(None), duration_us(max_first, grid).prop_map(Some)];
        let stop = prop_oneof![3 => Just(None), 1 => (0..16usize).prop_map(Some)];
        let skew = prop_oneof![Just(0u64), 1..1000u64].prop_map(Duration::from_micros);
        let parts = (first, prop::collection::vec(step, 1..16), stop, skew);
        parts.prop_map(move |(first, steps, stop, timer_skew)| Script {
            period,
            behavior,
            first,
            steps,
            advance,
            stop,
            timer_skew,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A late loop, random periods (sub-millisecond and off tokio's grid too), every behaviour,
    /// resets: the crate's `Interval` ticks as tokio's.
    #[test]
    fn interval_matches_tokio(script in script()) {
        compare_interval(script);
    }
}

// ---- TimeoutFuture ----

/// `Ok` or `Err`, and when, as an offset from the start.
type Outcome = (bool, Duration);

#[derive(Clone, Copy, Debug)]
struct Race {
    /// Sub-millisecond offset of the start from tokio's grid.
    skew: Duration,
    /// When the inner future is ready.
    ready: Duration,
    /// The deadline, from the start; `timeout_at` up to `before` earlier than the start.
    deadline: Duration,
    at: bool,
    before: Duration,
    /// When the crate's timer is stopped: its futures then wait out their time on its runtime's
    /// clock, and a timeout ends as tokio's would (`Elapsed::is_shutdown`).
    stop: Option<Duration>,
    /// The crate's timer is built this long (under a millisecond) into the runtime: its ticks
    /// are then off tokio's grid.
    timer_skew: Duration,
}

/// One side of a race: `timeout` (or `timeout_at`) around a sleep until `race.ready`.
async fn race_side(which: u8, start: Instant, race: Race) -> Outcome {
    let inner = async move {
        match which {
            2 => hwt::sleep_until(start + race.ready).await,
            _ => tt::sleep_until(start + race.ready).await,
        }
    };
    let at = (start + race.deadline).checked_sub(race.before).unwrap();
    let ok = match (which, race.at) {
        (0, false) => tt::timeout(race.deadline, inner).await.is_ok(),
        (0, true) => tt::timeout_at(at, inner).await.is_ok(),
        (_, false) => hwt::timeout(race.deadline, inner).await.is_ok(),
        (_, true) => hwt::timeout_at(at, inner).await.is_ok(),
    };
    (ok, start.elapsed())
}

fn compare_timeout(race: Race) {
    paused_runtime().block_on(async {
        tt::advance(race.timer_skew).await;
        let timer = tokio_clock();
        let _guard = hwt::set_default(timer.clone());
        tt::advance(Duration::from_secs(1) + race.skew - race.timer_skew).await;
        let start = Instant::now();
        if let Some(stop) = race.stop {
            let timer = timer.clone();
            tokio::spawn(async move {
                tt::sleep(stop).await;
                timer.stop().unwrap();
            });
        }
        let sides: Vec<_> = (0..3)
            .map(|which| tokio::spawn(tt::timeout(GUARD, race_side(which, start, race))))
            .collect();
        let mut outcomes = Vec::new();
        for side in sides {
            outcomes.push(side.await.unwrap().expect("a timeout hung"));
        }
        // When each side sees a time `x` from the start pass: tokio's timers at their driver's
        // next millisecond (its clock jumps in whole milliseconds from the skewed start); the
        // crate's at once if it has passed at the first poll (README: what is due is ready at the
        // next poll), where tokio's, off its grid, waits for its next millisecond.
        let skew = race.skew.as_nanos() as i128;
        let tokio_fire = |x: i128| {
            let ms = ((skew + x).max(0) as u128).div_ceil(1_000_000) as u64;
            Duration::from_millis(ms)
        };
        let crate_fire = |x: i128| {
            if x <= 0 {
                Duration::ZERO
            } else {
                tokio_fire(x)
            }
        };
        let ready = race.ready.as_nanos() as i128;
        let deadline = race.deadline.as_nanos() as i128
            - if race.at {
                race.before.as_nanos() as i128
            } else {
                0
            };
        let model = |r: Duration, t: Duration| (r <= t, r.min(t));
        let expected = [
            model(tokio_fire(ready), tokio_fire(deadline)),
            model(tokio_fire(ready), crate_fire(deadline)),
            model(crate_fire(ready), crate_fire(deadline)),
        ];
        // A tie tokio does not have: the crate's inner sleep, polled first when the deadline's
        // wake-up comes, is ready if its own deadline has passed by then, even in a later tokio
        // millisecond than the timeout's (off tokio's grid both can pass between two of the
        // paused clock's stops). tokio's inner sleep waits for its millisecond.
        let mut expected = expected;
        if crate_fire(deadline) >= race.ready {
            expected[2] = (true, crate_fire(deadline).min(crate_fire(ready)));
        }
        let off_grid = (race.stop.is_some() || !race.timer_skew.is_zero())
            && race.skew.subsec_nanos() % 1_000_000 != 0;
        if !off_grid {
            assert_eq!(outcomes, expected, "{race:?}");
        } else {
            // A timer whose ticks are off tokio's grid (built after a sub-millisecond advance,
            // or, after a stop, the one the wait goes on on, made at the stop) fires at its first
            // turn past the deadline, never before it, but up to a millisecond before tokio's
            // rounded millisecond: e.g. a sleep due 5.001 ms into tokio's time completes at 5.453
            // ms, tokio's at 6.453 ms. So a tie, or an inner sleep of tokio's due in the
            // deadline's millisecond, may come out `Err` where tokio's is `Ok` (and a sleep of
            // the crate's `Ok` where tokio's is `Err`). Clearly apart, they agree.
            assert_eq!(outcomes[0], expected[0], "{race:?}");
            for (i, &(ok, done)) in outcomes.iter().enumerate().skip(1) {
                let early = !ok && (done.as_nanos() as i128) < deadline;
                assert!(!early, "{i} early: {race:?} {outcomes:?}");
                assert!(done <= expected[i].1, "{i}: {race:?} {outcomes:?}");
                let (r, t) = (tokio_fire(ready), tokio_fire(deadline));
                if r.max(t) - r.min(t) >= 2 * MS {
                    assert_eq!(ok, expected[i].0, "{i}: {race:?} {outcomes:?}");
                }
            }
        }
        drop(_guard);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `timeout` and `timeout_at` around a future ready before, at or after the deadline (zero and
    /// past deadlines too), on and off tokio's grid: the crate's outcome and time are tokio's.
    #[test]
    fn timeout_matches_tokio(
        skew_us in prop_oneof![Just(0u64), 0..1000u64],
        ready_us in 0..20_000u64,
        deadline_us in prop_oneof![Just(0u64), 0..20_000u64],
        grid in any::<bool>(),
        at in any::<bool>(),
        before_us in 0..5_000u64,
        stop_us in prop::option::weighted(0.3, 0..20_000u64),
        timer_skew_us in prop_oneof![Just(0u64), 0..1000u64],
    ) {
        let round = |us: u64| Duration::from_micros(if grid { us / 1000 * 1000 } else { us });
        compare_timeout(Race {
            skew: round(skew_us),
            ready: round(ready_us),
            deadline: round(deadline_us),
            at,
            before: round(before_us),
            stop: stop_us.map(round),
            timer_skew: Duration::from_micros(timer_skew_us),
        });
    }
}
