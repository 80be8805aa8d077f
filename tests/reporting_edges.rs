//! What the crate reports and how it refuses, read against its own docs:
//! `stats()` after each kind of work, the lateness histogram on the manual
//! clock, the `Timeout` state table, `Builder` and `TimerError`, and (feature
//! `metrics`) what the driver publishes.

mod common;

use common::{assert_stats_add_up, manual, QueueExecutor};
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError, TimerStats};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// The four totals and `pending`, as one tuple.
fn totals(s: &TimerStats) -> (u64, u64, u64, u64, usize) {
    (s.scheduled, s.fired, s.cancelled, s.stopped, s.pending)
}

fn check(timer: &HashedWheelTimer, expected: (u64, u64, u64, u64, usize), what: &str) {
    assert_stats_add_up(timer);
    let s = timer.stats();
    assert_eq!(totals(&s), expected, "{what}: {s:?}");
}

/// One-shots, resets, a periodic task for its life, and `stop()`: each counts
/// once where the docs say.
#[test]
fn one_shots_resets_periodic_tasks_and_stop_count_where_the_docs_say() {
    let timer = manual(MS);
    check(&timer, (0, 0, 0, 0, 0), "new");
    let fires = timer.new_timeout(|_| {}, MS * 5).unwrap();
    let cancels = timer.new_timeout(|_| {}, MS * 5).unwrap();
    let resets = timer.new_timeout(|_| {}, MS * 5).unwrap();
    check(&timer, (3, 0, 0, 0, 3), "three scheduled");
    assert!(resets.reset(MS * 50) && resets.reset(MS * 60));
    check(&timer, (3, 0, 0, 0, 3), "a reset counts nowhere");
    assert!(cancels.cancel() && !cancels.cancel());
    check(&timer, (3, 0, 1, 0, 2), "one cancel, counted once");
    timer.advance(MS * 5);
    assert!(fires.is_expired());
    assert!(!fires.cancel(), "a fired one cannot be cancelled");
    check(&timer, (3, 1, 1, 0, 1), "one fired");

    let runs = common::Counter::default();
    let p = timer
        .schedule_at_fixed_rate(runs.task(), MS, MS * 2)
        .unwrap();
    timer.advance(MS * 10);
    assert_eq!(runs.get(), 5);
    check(
        &timer,
        (4, 1, 1, 0, 2),
        "a periodic task counts once, runs or not",
    );
    let panics = common::Counter::default();
    let q = timer
        .schedule_with_fixed_delay(panics.task_panicking_in_run(2, "boom"), MS, MS)
        .unwrap();
    timer.advance(MS * 10);
    assert!(q.is_expired() && q.is_panicked() && !q.is_pending());
    check(&timer, (5, 2, 1, 0, 2), "a panicking run ends it, fired");
    assert!(p.cancel());
    check(&timer, (5, 2, 2, 0, 1), "a cancelled periodic task");
    let r = timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
    timer.advance(MS * 3);
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped, vec![r, resets], "by deadline");
    check(&timer, (6, 2, 2, 2, 0), "stop() ends the rest");
    assert!(timer.new_timeout(|_| {}, MS).unwrap_err().is_shutdown());
    check(&timer, (6, 2, 2, 2, 0), "a refused call counts nowhere");
    // `is_stopped`: "(and not cancelled since)": a cancel may still win.
    assert!(stopped[0].cancel() && stopped[0].is_cancelled());
    assert!(!stopped[0].is_stopped() && stopped[0].take_task().is_none());
    check(
        &timer,
        (6, 2, 2, 2, 0),
        "a cancel after stop counts nowhere",
    );
}

/// A refusal at the pending limit counts nowhere; futures are filed past it.
#[test]
fn a_refusal_at_the_limit_counts_nowhere() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(2)
        .build()
        .unwrap();
    let a = timer.new_timeout(|_| {}, MS).unwrap();
    timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
    let err = timer.new_timeout(|_| {}, MS).unwrap_err();
    assert_eq!(err, TimerError::AtCapacity { pending: 2, max: 2 });
    assert!(err.is_at_capacity() && !err.is_shutdown());
    assert!(
        err.to_string().contains("max_pending_timeouts is 2"),
        "{err}"
    );
    let queue = timer.delay_queue();
    assert!(queue.insert(1, MS).unwrap_err().is_at_capacity());
    check(&timer, (2, 0, 0, 0, 2), "two refusals");
    let mut sleep = tokio_test::task::spawn(timer.sleep(MS));
    assert!(sleep.poll().is_pending());
    check(&timer, (3, 0, 0, 0, 3), "a Sleep is filed past the limit");
    assert!(a.cancel());
    timer.advance(MS);
    assert!(sleep.poll().is_ready());
    check(&timer, (3, 1, 1, 0, 1), "the sleep fired");
}

/// A `Sleep` counts once its first poll files it; a dropped pending one is
/// cancelled; one already due when first polled costs no entry; a `timeout`
/// whose future wins is cancelled, one that elapses fired.
#[test]
fn sleeps_and_timeouts_count_once_filed() {
    let timer = manual(MS);
    let unpolled = timer.sleep(MS * 5);
    drop(unpolled);
    check(&timer, (0, 0, 0, 0, 0), "never polled");
    let mut due = tokio_test::task::spawn(timer.sleep(Duration::ZERO));
    assert!(due.poll().is_ready());
    check(&timer, (0, 0, 0, 0, 0), "due at its first poll");
    let mut fires = tokio_test::task::spawn(timer.sleep(MS * 5));
    let mut dropped = tokio_test::task::spawn(timer.sleep(MS * 5));
    assert!(fires.poll().is_pending() && dropped.poll().is_pending());
    assert!(fires.poll().is_pending(), "a second poll files nothing");
    check(&timer, (2, 0, 0, 0, 2), "two filed");
    drop(dropped);
    check(
        &timer,
        (2, 0, 1, 0, 1),
        "a dropped pending Sleep is cancelled",
    );
    timer.advance(MS * 5);
    assert!(fires.is_woken());
    assert!(fires.poll().is_ready());
    check(&timer, (2, 1, 1, 0, 0), "fired");

    let mut wins = tokio_test::task::spawn(timer.timeout(MS * 5, async { 7 }));
    assert_eq!(wins.poll(), Poll::Ready(Ok(7)));
    let mut slow = tokio_test::task::spawn(timer.timeout(MS * 5, std::future::pending::<()>()));
    assert!(slow.poll().is_pending());
    timer.advance(MS * 5);
    let elapsed = match slow.poll() {
        Poll::Ready(Err(e)) => e,
        other => panic!("{other:?}"),
    };
    assert!(!elapsed.is_shutdown());
    assert_eq!(elapsed.to_string(), "deadline has elapsed");
    let io: std::io::Error = elapsed.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    let s = timer.stats();
    assert_eq!((s.fired, s.pending), (2, 0), "{s:?}");
    assert_stats_add_up(&timer);
}

/// Delay queue and map items: an insert is scheduled, a remove cancelled, a
/// reset nothing, an expiry fired, a replaced map value cancelled; `stop()`
/// stops the rest.
#[test]
fn delay_queue_and_map_items_count_once() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let a = queue.insert("a", MS * 5).unwrap();
    let b = queue.insert("b", MS * 5).unwrap();
    let c = queue.insert("c", MS * 50).unwrap();
    check(&timer, (3, 0, 0, 0, 3), "three items");
    assert!(queue.reset(&c, MS * 70));
    assert_eq!(queue.remove(&b), Some("b"));
    check(&timer, (3, 0, 1, 0, 2), "a removed item is cancelled");
    timer.advance(MS * 5);
    let out = common::drain(&queue);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].key(), a);
    check(&timer, (3, 1, 1, 0, 1), "an expired item fired");

    let map = timer.delay_map();
    assert_eq!(map.insert("k", 1, MS * 5).unwrap(), None);
    assert_eq!(map.insert("k", 2, MS * 5).unwrap(), Some(1));
    check(&timer, (4, 1, 1, 0, 2), "a replaced value keeps its entry");
    assert!(map.reset("k", MS * 10));
    check(&timer, (4, 1, 1, 0, 2), "a map reset counts nowhere");
    timer.advance(MS * 10);
    let mut t = tokio_test::task::spawn(());
    let got = t.enter(|cx, _| map.poll_expired(cx));
    assert_eq!(got, Poll::Ready(Some(("k", 2))));
    check(&timer, (4, 2, 1, 0, 1), "an expired map entry fired");
    assert_eq!(
        timer.stop().unwrap().len(),
        1,
        "the item's timeout is returned"
    );
    check(
        &timer,
        (4, 2, 1, 1, 0),
        "stop() stops the queue's last item",
    );
    let _ = c;
}

/// On an executor a fire counts when handed off; a job `stop()` takes back
/// still counts as fired, not stopped (`TimerStats::fired`); a periodic task
/// whose run is in progress at `stop()` ends stopped.
#[test]
fn executor_jobs_count_when_handed_off() {
    let exec = QueueExecutor::default();
    let timer = exec.timer(MS);
    let ran = Arc::new(Mutex::new(0));
    let count = ran.clone();
    let queued = timer
        .new_timeout(move |_| *count.lock().unwrap() += 1, MS)
        .unwrap();
    let taken_back = timer.new_timeout(|_| panic!("never"), MS * 2).unwrap();
    let periodic = timer.schedule_at_fixed_rate(|_| {}, MS, MS * 10).unwrap();
    timer.advance(MS * 2);
    assert_eq!(exec.len(), 3);
    check(&timer, (3, 2, 0, 0, 1), "two one-shots handed off");
    assert_eq!(timer.stats().lateness.count(), 3, "three fires");
    exec.take().unwrap()(); // `queued` runs
    assert!(queued.is_expired());
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped, vec![periodic.clone(), taken_back.clone()]);
    assert!(taken_back.is_stopped() && periodic.is_stopped());
    check(
        &timer,
        (3, 2, 0, 1, 0),
        "the one-shot job taken back stays fired",
    );
    exec.run_all(); // taken back: they run nothing
    assert_eq!(*ran.lock().unwrap(), 1);
    check(&timer, (3, 2, 0, 1, 0), "unchanged");
}

/// Lateness on the manual clock with a 10 ms tick: a timeout due mid-tick
/// fires at its tick's end, however far one `advance` goes, and is late by
/// exactly the rest of the tick; cancels record nothing; the count is the fires.
#[test]
fn mid_tick_deadlines_are_late_by_the_rest_of_their_tick() {
    let timer = manual(MS * 10);
    for ms in [3u32, 7, 10, 15, 21] {
        timer.new_timeout(|_| {}, MS * ms).unwrap();
    }
    for _ in 0..3 {
        assert!(timer.new_timeout(|_| {}, MS * 4).unwrap().cancel());
    }
    let moved = timer.new_timeout(|_| {}, MS * 50).unwrap();
    assert!(moved.reset(MS * 32), "late by 8 ms from the new deadline");
    timer.advance(MS * 1000);
    let s = timer.stats();
    let h = s.lateness;
    assert_eq!(h.count(), 6, "{h:?}");
    assert_eq!(h.count(), s.fired, "one-shots only: a record per fire");
    // Exact: 7, 3, 0, 5, 9, 8 ms; sorted 0, 3, 5, 7, 8, 9.
    assert_eq!(h.max(), MS * 9);
    assert_eq!(s.max_lateness, MS * 9);
    assert_eq!(h.quantile(1.0), MS * 9);
    assert_eq!(h.quantile(0.0), Duration::ZERO, "the on-time one");
    let sorted = [0u32, 3, 5, 7, 8, 9].map(|ms| MS * ms);
    for (i, truth) in sorted.iter().enumerate() {
        let q = (i + 1) as f64 / 6.0;
        let got = h.quantile(q);
        assert!(got >= *truth, "quantile({q}) = {got:?} < {truth:?}");
        assert!(
            got <= *truth + *truth / 8 + Duration::from_nanos(1024),
            "{got:?}"
        );
    }
    let text = format!("{h:?}");
    assert!(
        text.starts_with("LatenessHistogram { count: 6, p50: "),
        "{text}"
    );
    assert!(text.ends_with("max: 9ms }"), "{text}");
    assert_eq!(h, h.clone(), "PartialEq, Clone");
}

/// The `Timeout` table in the crate docs, with `remaining()` and `deadline()`
/// on the manual clock, inside runs and after each end.
#[test]
fn timeout_states_remaining_and_deadline_follow_the_table() {
    type Seen = Arc<Mutex<Vec<(bool, bool, bool, bool, Duration)>>>;
    fn state(t: &Timeout) -> (bool, bool, bool, bool, Duration) {
        let s = (t.is_pending(), t.is_expired(), t.is_cancelled());
        (s.0, s.1, s.2, t.is_stopped(), t.remaining())
    }
    let timer = manual(MS * 10);
    let start = timer.now();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let one = timer
        .new_timeout(
            move |t: &Timeout| log.lock().unwrap().push(state(t)),
            MS * 25,
        )
        .unwrap();
    assert_eq!(state(&one), (true, false, false, false, MS * 25));
    assert_eq!(one.deadline(), start + MS * 25);
    timer.advance(MS * 20);
    assert_eq!(one.remaining(), MS * 5, "waiting to run");
    assert!(one.reset(MS * 8));
    assert_eq!((one.deadline(), one.remaining()), (start + MS * 28, MS * 8));
    timer.advance(MS * 20);
    let ran = (false, true, false, false, Duration::ZERO);
    assert_eq!(seen.lock().unwrap().as_slice(), [ran], "running: expired");
    assert_eq!(state(&one), ran);
    assert!(!one.reset(MS) && !one.is_panicked() && !one.is_periodic());

    let log = seen.clone();
    let every = timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| log.lock().unwrap().push(state(t)),
            MS * 5,
            MS * 30,
        )
        .unwrap();
    assert!(every.is_periodic() && every.is_pending());
    assert_eq!(every.remaining(), MS * 5);
    timer.advance(MS * 10);
    // During the run: pending; the deadline is the run's, so nothing remains.
    assert_eq!(
        seen.lock().unwrap()[1],
        (true, false, false, false, Duration::ZERO)
    );
    assert_eq!(every.deadline(), start + MS * 75, "the next run's");
    assert_eq!(every.remaining(), MS * 25);
    assert!(!every.reset(MS), "a periodic task is not reset");
    assert!(every.cancel());
    assert_eq!(state(&every), (false, false, true, false, Duration::ZERO));

    let stopped = timer.new_timeout(|_| {}, MS * 100).unwrap();
    let taken = timer.stop().unwrap();
    assert_eq!(taken, vec![stopped.clone()]);
    assert_eq!(state(&stopped), (false, false, false, true, Duration::ZERO));
    assert!(!stopped.reset(MS), "false once the timer stopped");
    assert!(stopped.take_task().is_some() && stopped.take_task().is_none());
    let text = format!("{stopped:?}");
    assert!(
        text.starts_with("Timeout { state: \"stopped\", periodic: false"),
        "{text}"
    );
}

/// Every builder value the docs refuse gets its own error naming it; the
/// checks come before any clock is looked at.
#[test]
fn bad_settings_are_refused_by_name() {
    let b = HashedWheelTimer::builder;
    let cases = [
        (b().tick_duration(Duration::ZERO).build(), "tick_duration"),
        (b().ticks_per_wheel(0).build(), "ticks_per_wheel"),
        (b().ticks_per_wheel(usize::MAX).build(), "ticks_per_wheel"),
        (
            b().tick_duration(Duration::from_nanos(1 << 44))
                .ticks_per_wheel(1 << 20)
                .build(),
            "ticks_per_wheel (1048576)",
        ),
        (b().max_pending_timeouts(0).build(), "max_pending_timeouts"),
        (b().thread_name("a\0").build(), "thread_name"),
        (
            b().manual_clock().tokio_clock().build(),
            "manual_clock() and tokio_clock()",
        ),
        (b().tokio_clock().build(), "inside a tokio runtime"),
        (
            b().tokio_clock().max_pending_timeouts(0).build(),
            "max_pending_timeouts",
        ),
    ];
    for (result, name) in cases {
        let err = result.expect_err(name);
        assert!(err.to_string().contains(name), "{err} should name {name}");
        assert!(!err.is_shutdown() && !err.is_at_capacity());
        assert_eq!(err.clone(), err);
        let boxed: Box<dyn std::error::Error + Send + Sync + 'static> = Box::new(err);
        assert!(boxed.source().is_none());
    }
    assert_eq!(
        b().tokio_clock().build().unwrap_err(),
        TimerError::NoTokioRuntime
    );
    // 2^64 ns: past every tick a one-bucket wheel takes.
    let max = Duration::from_nanos(u64::MAX);
    let over = b()
        .tick_duration(max + Duration::from_nanos(1))
        .ticks_per_wheel(1)
        .build();
    assert!(matches!(
        over,
        Err(TimerError::WheelDurationOverflow {
            ticks_per_wheel: 1,
            ..
        })
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let no_time = rt.block_on(async { b().tokio_clock().build() });
    assert_eq!(no_time.unwrap_err(), TimerError::TokioTimeDisabled);
    // Rounded up, not refused; a power of two stays.
    for (asked, got) in [(1, 1), (3, 4), (512, 512), (513, 1024), (1 << 20, 1 << 20)] {
        let t = b().manual_clock().ticks_per_wheel(asked).build().unwrap();
        assert_eq!(t.ticks_per_wheel(), got);
    }
    let shown = format!("{:?}", manual(MS));
    assert!(shown.contains("ticks_per_wheel: 512") && shown.contains("manual_clock: true"));
}

/// A real-clock timer with nothing due soon does not wake: one far timeout
/// filed, then 300 ms with no wake-up (the margin: it would wake each 1 ms tick).
#[test]
fn an_idle_real_clock_driver_makes_no_wake_ups() {
    let timer = HashedWheelTimer::new();
    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), MS * 5)
        .unwrap();
    rx.recv_timeout(Duration::from_secs(60)).unwrap();
    std::thread::sleep(MS * 50);
    let idle = timer.stats().driver_wakeups;
    std::thread::sleep(MS * 300);
    assert_eq!(timer.stats().driver_wakeups, idle, "nothing pending");
    let far = timer
        .new_timeout(|_| {}, Duration::from_secs(3600))
        .unwrap();
    // The driver wakes for the new deadline and takes it off its lane (`queued` 0), then wakes
    // once more to file it when it is a hold (64-96 ms) old. Wait (a minute at most) for the
    // first, not a fixed 50 ms: a driver held off the CPU that long had both wake-ups in the
    // window below, which allows one.
    let start = std::time::Instant::now();
    while timer.stats().queued > 0 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(MS);
    }
    assert_eq!(
        timer.stats().queued,
        0,
        "the driver never took the far timeout"
    );
    let waiting = timer.stats().driver_wakeups;
    std::thread::sleep(MS * 300);
    let s = timer.stats();
    assert!(s.driver_wakeups <= waiting + 1, "{waiting} -> {s:?}");
    assert_eq!(s.worker_wakeups, s.driver_wakeups);
    assert!(far.cancel());
}

#[cfg(feature = "metrics")]
mod metrics_published {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use std::collections::HashMap;

    fn gauges(recorder: &DebuggingRecorder, thread: &str) -> HashMap<String, f64> {
        let mut out = HashMap::new();
        for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
            let key = key.key().clone();
            let labels: Vec<_> = key.labels().map(|l| (l.key(), l.value())).collect();
            if let (true, DebugValue::Gauge(v)) = (labels == [("thread", thread)], value) {
                out.insert(key.name().to_owned(), v.into_inner());
            }
        }
        out
    }

    /// The docs: gauges "set at most once per 100 ms of the timer's clock,
    /// before the driver goes idle". A driver that fired and now sleeps an
    /// hour for the next deadline has gone idle: its gauges must not show
    /// the figures from before the fire for that hour.
    #[test]
    fn gauges_are_current_when_the_driver_sleeps_long() {
        let recorder = DebuggingRecorder::new();
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .thread_name("reporting-sleeps-long")
            .build()
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            timer.new_timeout(|_| {}, MS * 10).unwrap();
            timer
                .new_timeout(|_| {}, Duration::from_secs(3600))
                .unwrap();
            // Fires one at 10 ms; files the far one once it is held 64 ms
            // and up to 32 more (`intake/lane.rs`'s HOLD and BATCH); then
            // nothing is due for an hour.
            timer.advance(MS * 100);
        });
        let s = timer.stats();
        assert_eq!((s.fired, s.pending), (1, 1));
        let g = gauges(&recorder, "reporting-sleeps-long");
        assert_eq!(g.get("hashed_wheel_timer_fired"), Some(&1.0), "{g:?}");
        assert_eq!(g.get("hashed_wheel_timer_pending"), Some(&1.0), "{g:?}");
        assert_eq!(g.get("hashed_wheel_timer_scheduled"), Some(&2.0), "{g:?}");
    }
}

/// An executor that panics in `execute`, or drops a job unrun: the timeout
/// ends stopped, counted once (a one-shot where it fired, a periodic one as
/// stopped), and the timer goes on.
#[test]
fn an_executor_that_panics_or_drops_jobs_leaves_counts_that_add_up() {
    struct Refuses(bool);
    impl hashed_wheel_timer::Executor for Refuses {
        fn execute(&self, job: hashed_wheel_timer::Job) {
            if self.0 {
                panic!("no threads left");
            }
            drop(job);
        }
    }
    for panics in [true, false] {
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .executor(Refuses(panics))
            .build()
            .unwrap();
        let one = timer.new_timeout(|_| panic!("never runs"), MS).unwrap();
        let every = timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
        let mut sleep = tokio_test::task::spawn(timer.sleep(MS));
        assert!(sleep.poll().is_pending());
        timer.advance(MS * 3);
        assert!(sleep.poll().is_ready(), "wakers do not go through it");
        assert!(one.is_stopped() && every.is_stopped(), "{one:?} {every:?}");
        assert!(!one.is_pending() && !every.is_pending());
        check(&timer, (3, 2, 0, 1, 0), "panics: {panics}");
        assert_eq!(timer.stats().lateness.count(), 3);
        assert!(one.take_task().is_some(), "the task is kept for take_task");
        assert!(timer.stop().unwrap().is_empty());
        check(&timer, (3, 2, 0, 1, 0), "after stop");
    }
}

/// Two timeouts due in the same tick, the first a task that takes 30 ms of
/// the manual clock (an `advance` from inside it): the second runs at 40 ms,
/// 30 ms after its deadline, and its lateness says so.
#[test]
fn a_fire_after_a_slow_task_in_the_same_tick_is_late() {
    let timer = manual(MS);
    let clock = timer.clone();
    timer
        .new_timeout(move |_| clock.advance(MS * 30), MS * 10)
        .unwrap();
    let at = Arc::new(Mutex::new(None));
    let seen = at.clone();
    timer
        .new_timeout(
            move |t: &Timeout| *seen.lock().unwrap() = Some(t.timer().unwrap().now()),
            MS * 10,
        )
        .unwrap();
    let start = timer.now();
    timer.advance(MS * 100);
    assert_eq!(*at.lock().unwrap(), Some(start + MS * 40), "ran at 40 ms");
    let h = timer.stats().lateness;
    assert_eq!(h.max(), MS * 30, "{h:?}");
}

/// `scheduled` read while another thread schedules and fires: never below
/// what was scheduled before the call, above it only by the one timeout that
/// may be ending (and then lower on the next read), as `TimerStats` says.
#[test]
fn scheduled_read_during_fires_is_off_by_at_most_the_one_ending() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    let timer = manual(MS);
    let (done, made) = (AtomicBool::new(false), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..20_000 {
                timer.new_timeout(|_| {}, Duration::ZERO).unwrap();
                made.fetch_add(1, SeqCst);
                timer.advance(MS);
            }
            done.store(true, SeqCst);
        });
        let mut last = 0;
        while !done.load(SeqCst) {
            let before = made.load(SeqCst);
            let s = timer.stats();
            // One scheduled not yet in `made`, and one ending.
            let most = made.load(SeqCst) + 2;
            assert!(
                s.scheduled >= before && s.scheduled <= most,
                "{before}..={most}: {s:?}"
            );
            assert!(s.scheduled + 1 >= last, "{last} -> {s:?}");
            last = s.scheduled;
        }
    });
    check(&timer, (20_000, 20_000, 0, 0, 0), "exact when quiet");
}
