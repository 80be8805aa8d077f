//! Edges of periodic tasks, intervals and the Java / tokio porting promises, each checked exactly
//! on the manual clock (or, where a worker thread is the point, on the real clock with a margin of
//! 100x): how many runs `advance` makes and at which `now()`, fixed delay measured from the run's
//! end, catch-up, `stop()` during queued and running runs, an executor dropping a run, huge
//! periods, and tasks whose panics carry a payload that panics again when dropped.

use hashed_wheel_timer::{HashedWheelTimer, Job, MissedTickBehavior, Timeout, TimerError};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

mod common;
use common::{assert_stats_add_up, manual, QueueExecutor};

const MS: Duration = Duration::from_millis(1);
const US: Duration = Duration::from_micros(1);

/// Each run's (due, now()) in µs since `start`, and a periodic task that records them.
type Runs = Arc<Mutex<Vec<(u64, u64)>>>;

fn recording(start: Instant) -> (Runs, impl FnMut(&Timeout) + Send + 'static) {
    let runs = Runs::default();
    let r = runs.clone();
    (runs, move |t: &Timeout| {
        let now = t.timer().unwrap().now();
        let us = |i: Instant| (i - start).as_micros() as u64;
        r.lock()
            .unwrap()
            .push((us(t.scheduled_execution_time()), us(now)));
    })
}

fn ms_pairs(pairs: &[(u64, u64)]) -> Vec<(u64, u64)> {
    pairs.iter().map(|&(d, n)| (d * 1000, n * 1000)).collect()
}

/// A payload whose destructor panics: `panic_any(Bomb)` unwinds, and so does dropping what
/// `catch_unwind` returned.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the panic payload's destructor panicked");
    }
}

/// Advances `timer` 50 ms, failing if that unwinds with `whose` payload.
fn advance_50ms_without_unwinding(timer: &HashedWheelTimer, whose: &str) {
    let unwound = unwinds(|| timer.advance(MS * 50));
    assert!(!unwound, "advance unwound with {whose}");
}

/// True if `f` unwound; its payload (maybe a [`Bomb`]) is leaked, not dropped.
fn unwinds(f: impl FnOnce()) -> bool {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let unwound = caught.is_err();
    std::mem::forget(caught);
    unwound
}

// `advance`'s docs: "fires on this thread every timeout due by then, tick by tick. During each
// callback now() reads that tick's time. A periodic task runs once for each of its runs due by
// then."
#[test]
fn advance_over_many_periods_runs_each_due_run_once_at_its_own_tick() {
    let timer = manual(MS);
    let (runs, task) = recording(timer.now());
    let t = timer
        .schedule_at_fixed_rate(task, MS * 10, MS * 10)
        .unwrap();
    timer.advance(MS * 35);
    assert_eq!(
        *runs.lock().unwrap(),
        ms_pairs(&[(10, 10), (20, 20), (30, 30)])
    );
    assert_eq!(t.remaining(), MS * 5, "the run due at 40 ms");
    timer.advance(MS * 65);
    assert_eq!(runs.lock().unwrap().len(), 10);
    assert_eq!(timer.pending_timeouts(), 1);
    assert_stats_add_up(&timer);
}

// A fixed delay counts from the run's end, which on a wheel is the end of the due time's tick
// ("A run falls due at the end of its due time's tick").
#[test]
fn fixed_delay_counts_from_the_end_of_each_run_tick_by_tick() {
    let timer = manual(MS);
    let (runs, task) = recording(timer.now());
    timer
        .schedule_with_fixed_delay(task, MS * 10, MS * 10)
        .unwrap();
    timer.advance(MS * 100);
    let want: Vec<_> = (1..=10).map(|n| (n * 10, n * 10)).collect();
    assert_eq!(*runs.lock().unwrap(), ms_pairs(&want));

    let timer = manual(MS);
    let (runs, task) = recording(timer.now());
    timer
        .schedule_with_fixed_delay(task, US * 1500, US * 2500)
        .unwrap();
    timer.advance(MS * 9);
    // Due 1.5 ms, run at 2 ms; then 2.5 ms after each run: 4.5 -> 5, 7.5 -> 8.
    assert_eq!(
        *runs.lock().unwrap(),
        vec![(1500, 2000), (4500, 5000), (7500, 8000)]
    );
}

// An executor that runs each job inline, on the advancing thread: runs and re-arms as on the
// driver, every run at its own tick.
#[test]
fn an_inline_executor_runs_each_periodic_run_at_its_tick() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|job: Job| job())
        .build()
        .unwrap();
    let (rate, task) = recording(timer.now());
    timer
        .schedule_at_fixed_rate(task, MS * 10, MS * 10)
        .unwrap();
    let (delay, task) = recording(timer.now());
    timer
        .schedule_with_fixed_delay(task, MS * 5, MS * 10)
        .unwrap();
    timer.advance(MS * 35);
    assert_eq!(
        *rate.lock().unwrap(),
        ms_pairs(&[(10, 10), (20, 20), (30, 30)])
    );
    assert_eq!(
        *delay.lock().unwrap(),
        ms_pairs(&[(5, 5), (15, 15), (25, 25), (35, 35)])
    );
    assert_eq!(timer.pending_timeouts(), 2);
    assert_stats_add_up(&timer);
}

// On tokio's paused clock, auto-advance drives the runs: one per period, none lost or doubled.
#[tokio::test(start_paused = true)]
async fn auto_advance_runs_a_fixed_rate_task_once_per_period() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let (runs, task) = recording(timer.now());
    let t = timer
        .schedule_at_fixed_rate(task, MS * 100, MS * 100)
        .unwrap();
    tokio::time::sleep(MS * 1050).await;
    let want: Vec<_> = (1..=10).map(|n| (n * 100, n * 100)).collect();
    assert_eq!(*runs.lock().unwrap(), ms_pairs(&want));
    assert!(t.cancel());
}

// A period near `Duration::MAX`: one run, then pending until the clock's end; stop() returns it.
#[test]
fn a_period_near_duration_max_runs_once_and_stays_pending() {
    let timer = manual(MS);
    let (runs, task) = recording(timer.now());
    let rate = timer
        .schedule_at_fixed_rate(task, MS, Duration::MAX)
        .unwrap();
    let delay = timer
        .schedule_with_fixed_delay(|_| {}, MS, Duration::MAX - MS)
        .unwrap();
    timer.advance(MS * 5);
    assert_eq!(runs.lock().unwrap().len(), 1);
    assert!(rate.is_pending() && delay.is_pending());
    assert!(rate.remaining() > Duration::from_secs(3600 * 24 * 365 * 70));
    assert_eq!(timer.advance_to_next(), None, "nothing that can fire");
    let never_ran = timer.stop().unwrap();
    assert_eq!(never_ran.len(), 2);
    assert!(rate.is_stopped() && delay.is_stopped());
    assert_stats_add_up(&timer);
}

// Executor docs: "A job the executor drops without running ... ends its timeout as stopped,
// counted once; take_task hands the task back."
#[test]
fn an_executor_dropping_a_periodic_run_ends_it_stopped_with_its_task() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|job: Job| drop(job))
        .build()
        .unwrap();
    let (runs, task) = recording(timer.now());
    let t = timer
        .schedule_at_fixed_rate(task, MS * 10, MS * 10)
        .unwrap();
    timer.advance(MS * 35);
    assert!(runs.lock().unwrap().is_empty());
    assert!(t.is_stopped() && timer.pending_timeouts() == 0);
    assert_eq!(timer.stats().stopped, 1);
    t.take_task().expect("handed back").run(&t);
    assert_eq!(runs.lock().unwrap().len(), 1, "it runs once");
    assert_stats_add_up(&timer);
}

// stop() docs: "tasks handed to an Executor whose job has not started ... are returned (that job
// will not run them)".
#[test]
fn a_periodic_run_queued_at_stop_is_returned_and_its_job_runs_nothing() {
    let exec = QueueExecutor::default();
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(exec.clone())
        .build()
        .unwrap();
    let (runs, task) = recording(timer.now());
    let t = timer
        .schedule_at_fixed_rate(task, MS * 10, MS * 10)
        .unwrap();
    timer.advance(MS * 15);
    assert_eq!(timer.stop().unwrap(), vec![t.clone()]);
    assert_eq!(exec.run_all(), 1);
    assert!(runs.lock().unwrap().is_empty());
    assert!(t.is_stopped() && t.take_task().is_some());
    assert_stats_add_up(&timer);
}

// tokio's Interval, ticks missed while the task was away 35 ms, on the manual clock.
#[test]
fn interval_missed_ticks_and_resets_match_tokio() {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let timer = manual(MS);
    let start = timer.now();
    let mut poll = |iv: &mut hashed_wheel_timer::Interval| match iv.poll_tick(&mut cx) {
        Poll::Ready(due) => Some((due - start).as_millis() as u64),
        Poll::Pending => None,
    };
    for (behavior, after) in [
        (
            MissedTickBehavior::Burst,
            [Some(10), Some(20), Some(30), None],
        ),
        (MissedTickBehavior::Delay, [Some(10), None, None, None]),
        (MissedTickBehavior::Skip, [Some(10), None, None, None]),
    ] {
        let base = (timer.now() - start).as_millis() as u64;
        let mut iv = timer.interval(MS * 10);
        iv.set_missed_tick_behavior(behavior);
        assert_eq!(poll(&mut iv), Some(base), "the first tick is immediate");
        timer.advance(MS * 35);
        let got: Vec<_> = (0..4).map(|_| poll(&mut iv)).collect();
        let want: Vec<_> = after.iter().map(|a| a.map(|a| a + base)).collect();
        assert_eq!(got, want, "{behavior:?}");
    }
    let mut iv = timer.interval(MS * 10);
    let now = (timer.now() - start).as_millis() as u64;
    assert_eq!(poll(&mut iv), Some(now));
    iv.reset_immediately();
    assert_eq!((poll(&mut iv), poll(&mut iv)), (Some(now), None));
    iv.reset_after(MS * 3);
    timer.advance(MS * 3);
    assert_eq!((poll(&mut iv), poll(&mut iv)), (Some(now + 3), None));
    iv.reset_at(start);
    assert_eq!(
        (poll(&mut iv), poll(&mut iv)),
        (Some(0), Some(10)),
        "Burst from start"
    );
}

// try_tick's docs: "TimerError::Shutdown for every tick not yet due when it first sees the stop":
// ticks already due come out first.
#[test]
fn try_tick_yields_the_ticks_due_before_the_stop_then_errs() {
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    let timer = manual(MS);
    let start = timer.now();
    let mut iv = timer.interval(MS * 10);
    let mut poll = || match iv.poll_try_tick(&mut cx) {
        Poll::Ready(r) => r.map(|due| (due - start).as_millis() as u64),
        Poll::Pending => panic!("pending"),
    };
    assert_eq!(poll(), Ok(0));
    timer.advance(MS * 35);
    timer.stop().unwrap();
    let got: Vec<_> = (0..5).map(|_| poll()).collect();
    let shut = Err(TimerError::Shutdown);
    assert_eq!(got, vec![Ok(10), Ok(20), Ok(30), shut.clone(), shut]);
}

// Invariant 7, "A panicking callback is caught and reported; the driver keeps ticking", and the
// periodic docs: "A run that panics is caught and logged, suppresses all later runs". A panic
// payload is user code too: its destructor may panic, and `advance` must not unwind for it.
#[test]
fn a_periodic_run_panicking_with_a_payload_that_panics_on_drop_is_caught() {
    let timer = manual(MS);
    let t = timer
        .schedule_at_fixed_rate(|_: &Timeout| std::panic::panic_any(Bomb), MS, MS * 10)
        .unwrap();
    let other = Arc::new(AtomicUsize::new(0));
    let o = other.clone();
    timer
        .new_timeout(
            move |_: &Timeout| {
                o.fetch_add(1, SeqCst);
            },
            MS * 20,
        )
        .unwrap();
    advance_50ms_without_unwinding(&timer, "the task's payload");
    assert!(t.is_panicked() && t.is_expired());
    assert_eq!(other.load(SeqCst), 1, "the timer carried on");
    assert_stats_add_up(&timer);
}

// The same on the real clock: the worker thread must survive it, or every later timeout is lost.
#[test]
fn the_worker_thread_survives_a_payload_that_panics_on_drop() {
    let timer = HashedWheelTimer::new();
    timer
        .schedule_at_fixed_rate(|_: &Timeout| std::panic::panic_any(Bomb), MS, MS * 10)
        .unwrap();
    std::thread::sleep(MS * 50); // the run has come and gone
    let (tx, rx) = mpsc::channel();
    timer
        .new_timeout(move |_: &Timeout| tx.send(()).unwrap(), MS * 10)
        .unwrap();
    assert!(
        rx.recv_timeout(Duration::from_secs(5)).is_ok(),
        "a timeout due in 10 ms did not fire within 5 s: the worker thread died"
    );
}

// Executor docs: "A panicking task is caught and logged with tracing by the job (the executor
// never sees it)".
#[test]
fn an_executor_never_sees_a_periodic_runs_payload_panic() {
    let exec = QueueExecutor::default();
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(exec.clone())
        .build()
        .unwrap();
    let t = timer
        .schedule_at_fixed_rate(|_: &Timeout| std::panic::panic_any(Bomb), MS, MS * 10)
        .unwrap();
    timer.advance(MS * 2);
    let job = exec.take().expect("the run's job");
    assert!(!unwinds(job), "the job unwound into the executor");
    assert!(t.is_panicked() && timer.pending_timeouts() == 0);
    assert_stats_add_up(&timer);
}

// Executor docs: "a panic in execute is caught and logged". The run handed off is dropped unrun,
// which ends it stopped; `advance` (the worker, on the real clock) carries on.
#[test]
fn an_executor_panicking_in_execute_with_a_payload_that_panics_on_drop_is_caught() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|job: Job| {
            drop(job);
            std::panic::panic_any(Bomb)
        })
        .build()
        .unwrap();
    let t = timer.schedule_at_fixed_rate(|_| {}, MS, MS * 10).unwrap();
    advance_50ms_without_unwinding(&timer, "the executor's payload");
    assert!(t.is_stopped() && timer.pending_timeouts() == 0);
    assert_stats_add_up(&timer);
}

/// Captured by a task: its destructor panics with a [`Bomb`].
struct DropsABomb;

impl Drop for DropsABomb {
    fn drop(&mut self) {
        std::panic::panic_any(Bomb);
    }
}

// Invariant 7 and `entry/task.rs`: "a destructor's panic never unwinds out of the worker,
// `advance`, `stop`, a dropped handle". A periodic task that cancels itself is dropped on the
// driver when its run returns.
#[test]
fn a_periodic_task_cancelling_itself_whose_drop_panics_with_such_a_payload_is_caught() {
    let timer = manual(MS);
    let held = DropsABomb;
    let t = timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| {
                let _held = &held;
                t.cancel();
            },
            MS,
            MS * 10,
        )
        .unwrap();
    advance_50ms_without_unwinding(&timer, "the task's drop's payload");
    assert!(t.is_cancelled() && timer.pending_timeouts() == 0);
    assert_stats_add_up(&timer);
}

/// A Netty-style task whose cancel hook panics with a [`Bomb`].
struct CancelHookPanics;

impl hashed_wheel_timer::TimerTask for CancelHookPanics {
    fn run(self: Box<Self>, _: &Timeout) {}

    fn cancelled(self: Box<Self>, _: &Timeout) {
        std::panic::panic_any(Bomb)
    }
}

// `TimerTask::cancelled` is user code the crate catches ("catching and logging a panic, as Netty
// does: the cancel has won all the same"); its payload's drop must not unwind out of `cancel`.
#[test]
fn a_cancel_hook_panicking_with_such_a_payload_leaves_cancel_returning_true() {
    let timer = manual(MS);
    let t = timer.new_timeout_task(CancelHookPanics, MS * 10).unwrap();
    let cancelled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.cancel()));
    let unwound = cancelled.is_err();
    if unwound {
        std::mem::forget(cancelled);
        panic!("cancel() unwound with the hook's payload");
    }
    assert_eq!(cancelled.ok(), Some(true));
    assert!(t.is_cancelled() && timer.pending_timeouts() == 0);
    assert_stats_add_up(&timer);
}
