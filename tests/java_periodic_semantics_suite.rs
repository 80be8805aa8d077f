//! What the README's "Periodic tasks" section claims from `java.util.Timer`
//! and `ScheduledThreadPoolExecutor`: fixed rate and fixed delay, catch-up
//! after a long run, cancel from inside the task, a task that panics,
//! `stop()` while a periodic run is under way, and the pending limit
//! counting a periodic task once. Each test names the Java behaviour it
//! checks and asserts what the crate's docs promise. Manual clock
//! throughout: a "long run" is a task that calls `advance` itself, which the
//! docs define as a task taking that long.

use hashed_wheel_timer::{HashedWheelTimer, Job, Timeout, TimerError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod common;
use common::assert_stats_add_up;

const MS: Duration = Duration::from_millis(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// Each run's (due, started), in ms since `start`, on the timer's clock.
type Runs = Arc<Mutex<Vec<(u64, u64)>>>;

/// A periodic task that counts its runs, and the count.
fn counting() -> (Arc<AtomicUsize>, impl FnMut(&Timeout) + Send + 'static) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    (runs, move |_: &Timeout| {
        r.fetch_add(1, SeqCst);
    })
}

fn since(start: Instant, t: Instant) -> u64 {
    (t - start).as_millis() as u64
}

/// A task that records its runs, and on its `long_run`-th run (1-based)
/// takes `takes` by advancing the clock from inside.
fn recording(
    start: Instant,
    runs: &Runs,
    long_run: usize,
    takes: Duration,
) -> impl FnMut(&Timeout) + Send + 'static {
    let runs = runs.clone();
    move |t: &Timeout| {
        let timer = t.timer().unwrap();
        let n = {
            let mut runs = runs.lock().unwrap();
            runs.push((
                since(start, t.scheduled_execution_time()),
                since(start, timer.now()),
            ));
            runs.len()
        };
        if n == long_run {
            timer.advance(takes);
        }
    }
}

// java.util.Timer.scheduleAtFixedRate: "if an execution is delayed ... two
// or more executions will occur in rapid succession to catch up";
// ScheduledThreadPoolExecutor: "subsequent executions may start late, but
// will not concurrently execute". The crate: "the missed runs come back to
// back, never at once", at most one run a tick, due times never drift.
#[test]
fn fixed_rate_catches_up_back_to_back_after_a_run_of_ten_periods() {
    let timer = manual();
    let start = timer.now();
    let runs: Runs = Arc::default();
    let t = timer
        .schedule_at_fixed_rate(recording(start, &runs, 1, ms(1_000)), ms(100), ms(100))
        .unwrap();
    timer.advance(ms(100)); // the first run takes 1 s: the clock is at 1,100
    timer.advance(ms(1_000)); // to 2,100
    let runs = runs.lock().unwrap().clone();
    let due: Vec<u64> = runs.iter().map(|r| r.0).collect();
    assert_eq!(
        due,
        (1..=21).map(|i| i * 100).collect::<Vec<_>>(),
        "none skipped"
    );
    for w in runs.windows(2) {
        assert!(w[1].1 > w[0].1, "never two at once: {runs:?}");
    }
    for &(due, started) in &runs {
        assert!(started >= due, "never early: {runs:?}");
    }
    assert!(
        runs[1].1 <= 1_101,
        "the first missed run comes at once: {runs:?}"
    );
    let caught_up = runs.iter().find(|r| r.0 == 2_000).unwrap();
    assert!(caught_up.1 <= 2_001, "caught up by 2 s: {runs:?}");
    assert_eq!(timer.pending_timeouts(), 1);
    assert!(t.cancel());
    assert_stats_add_up(&timer);
}

// ScheduledThreadPoolExecutor.scheduleWithFixedDelay: "with the given delay
// between the termination of one execution and the commencement of the
// next". The crate: "A slow run pushes every later run back; there is
// nothing to catch up."
#[test]
fn fixed_delay_after_a_long_run_is_due_a_delay_after_it_ends() {
    let timer = manual();
    let start = timer.now();
    let runs: Runs = Arc::default();
    let t = timer
        .schedule_with_fixed_delay(recording(start, &runs, 2, ms(1_000)), ms(100), ms(100))
        .unwrap();
    timer.advance(ms(3_000));
    let due: Vec<u64> = runs.lock().unwrap().iter().map(|r| r.0).collect();
    // runs at 100 and 200; the second ends at 1,200; then 1,300, 1,400 ...
    assert_eq!(&due[..5], &[100, 200, 1_300, 1_400, 1_500], "{due:?}");
    assert!(t.cancel());
    assert_stats_add_up(&timer);
}

// Java: `future.cancel(false)` from inside the task (or TimerTask.cancel())
// lets the run finish and stops later ones. On both kinds, on the advance
// thread and on an executor.
#[test]
fn cancel_from_inside_the_task_ends_it_once_on_both_kinds_and_executors() {
    for on_executor in [false, true] {
        for fixed_rate in [true, false] {
            let jobs: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
            let spawned = jobs.clone();
            let mut b = HashedWheelTimer::builder().manual_clock();
            if on_executor {
                b = b.executor(move |job: Job| {
                    spawned.lock().unwrap().push(std::thread::spawn(job));
                });
            }
            let timer = b.build().unwrap();
            let runs = Arc::new(AtomicUsize::new(0));
            let won = Arc::new(AtomicUsize::new(0));
            let (r, w) = (runs.clone(), won.clone());
            let task = move |t: &Timeout| {
                if r.fetch_add(1, SeqCst) + 1 == 3 && t.cancel() {
                    w.fetch_add(1, SeqCst);
                    assert!(!t.cancel(), "a second cancel loses");
                }
            };
            let t = if fixed_rate {
                timer.schedule_at_fixed_rate(task, ms(10), ms(10))
            } else {
                timer.schedule_with_fixed_delay(task, ms(10), ms(10))
            }
            .unwrap();
            for _ in 0..100 {
                timer.advance(ms(5));
                for job in std::mem::take(&mut *jobs.lock().unwrap()) {
                    job.join().unwrap();
                }
            }
            let case = format!("executor {on_executor}, fixed rate {fixed_rate}");
            assert_eq!(runs.load(SeqCst), 3, "{case}");
            assert_eq!(won.load(SeqCst), 1, "{case}");
            assert!(
                t.is_cancelled() && !t.is_pending() && !t.is_expired(),
                "{case}"
            );
            assert!(!t.cancel(), "{case}");
            assert_eq!(timer.pending_timeouts(), 0, "{case}");
            assert_eq!(timer.stats().cancelled, 1, "{case}");
            assert!(timer.stop().unwrap().is_empty(), "{case}");
            assert_stats_add_up(&timer);
        }
    }
}

// ScheduledThreadPoolExecutor: "If any execution of the task encounters an
// exception, subsequent executions are suppressed." java.util.Timer's
// thread dies instead; the crate's does not: "only that task's later runs
// are suppressed, and Timeout::is_panicked() reports it".
#[test]
fn a_panicking_periodic_task_is_suppressed_and_the_timer_carries_on() {
    for on_executor in [false, true] {
        let mut b = HashedWheelTimer::builder().manual_clock();
        if on_executor {
            b = b.executor(|job: Job| std::thread::spawn(job).join().unwrap());
        }
        let timer = b.build().unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        let p = timer
            .schedule_at_fixed_rate(
                move |_: &Timeout| {
                    if r.fetch_add(1, SeqCst) + 1 == 2 {
                        panic!("second run fails");
                    }
                },
                ms(10),
                ms(10),
            )
            .unwrap();
        let other = Arc::new(AtomicUsize::new(0));
        let o = other.clone();
        timer
            .new_timeout(
                move |_: &Timeout| {
                    o.fetch_add(1, SeqCst);
                },
                ms(100),
            )
            .unwrap();
        timer.advance(ms(200));
        assert_eq!(runs.load(SeqCst), 2, "executor {on_executor}");
        assert_eq!(other.load(SeqCst), 1, "the timer carries on");
        assert!(p.is_panicked() && p.is_expired() && !p.is_pending());
        assert!(!p.cancel(), "a task ended by a panic cannot be cancelled");
        assert!(!p.reset(MS));
        assert_eq!(timer.pending_timeouts(), 0);
        let s = timer.stats();
        assert_eq!((s.fired, s.cancelled), (2, 0), "{s:?}");
        assert!(timer.new_timeout(|_| {}, MS).is_ok());
        assert_stats_add_up(&timer);
    }
}

/// Holds a periodic task's run until the test lets it go.
struct Gate {
    started: mpsc::Receiver<()>,
    go: mpsc::Sender<()>,
}

fn gated_periodic(timer: &HashedWheelTimer, gate_run: usize) -> (Timeout, Gate, Arc<AtomicUsize>) {
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let t = timer
        .schedule_at_fixed_rate(
            move |_: &Timeout| {
                if r.fetch_add(1, SeqCst) + 1 == gate_run {
                    started_tx.send(()).unwrap();
                    go_rx.lock().unwrap().recv().unwrap();
                }
            },
            ms(10),
            ms(10),
        )
        .unwrap();
    (t, Gate { started, go }, runs)
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    panic!("timed out waiting until {what}");
}

// ScheduledThreadPoolExecutor.shutdownNow() while a periodic run is under
// way: the run finishes, no other starts. The crate: "One whose run is in
// progress is not [returned]: that run finishes, and the task ends
// is_stopped, no longer pending; stop waits for the run on the worker
// thread, not on an Executor", and "When any stop() returns ...
// pending_timeouts() is 0".
#[test]
fn stop_while_a_periodic_run_is_under_way_on_an_executor() {
    let jobs: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    let spawned = jobs.clone();
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(move |job: Job| spawned.lock().unwrap().push(std::thread::spawn(job)))
        .build()
        .unwrap();
    let (p, gate, runs) = gated_periodic(&timer, 2);
    let waiting = timer.new_timeout(|_| {}, ms(1_000)).unwrap();
    timer.advance(ms(10));
    for job in std::mem::take(&mut *jobs.lock().unwrap()) {
        job.join().unwrap(); // run 1 returned, and armed run 2
    }
    timer.advance(ms(10));
    gate.started.recv().unwrap(); // run 2 is under way on its own thread
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped, vec![waiting], "the running task is not returned");
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(p.is_stopped() && !p.is_pending());
    gate.go.send(()).unwrap();
    for job in std::mem::take(&mut *jobs.lock().unwrap()) {
        job.join().unwrap();
    }
    timer.advance(ms(100));
    assert_eq!(runs.load(SeqCst), 2, "no run after stop");
    assert!(p.is_stopped() && !p.is_pending() && !p.is_cancelled());
    assert_eq!(timer.pending_timeouts(), 0, "its re-arm counted nothing");
    assert!(jobs.lock().unwrap().is_empty());
    assert_eq!(timer.stats().stopped, 2);
    assert_stats_add_up(&timer);
}

// The same, with the run on a thread calling `advance`: `stop()` waits for
// that run ("the worker (or a manual advance on another thread) looks for
// the shutdown between two tasks, and stop waits for it").
#[test]
fn stop_while_a_periodic_run_is_under_way_on_an_advancing_thread() {
    let timer = manual();
    let (p, gate, runs) = gated_periodic(&timer, 1);
    let one_shot = timer.new_timeout(|_| {}, ms(10)).unwrap(); // same tick, after it
    let advancer = {
        let timer = timer.clone();
        std::thread::spawn(move || timer.advance(ms(100)))
    };
    gate.started.recv().unwrap();
    let stopper = {
        let timer = timer.clone();
        std::thread::spawn(move || timer.stop().unwrap())
    };
    wait_until("stop() began", || timer.is_shutdown());
    gate.go.send(()).unwrap();
    let stopped = stopper.join().unwrap();
    advancer.join().unwrap();
    assert_eq!(stopped, vec![one_shot.clone()], "the rest of the tick");
    assert!(one_shot.is_stopped());
    assert_eq!(runs.load(SeqCst), 1);
    assert!(p.is_stopped() && !p.is_pending());
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}

// ScheduledThreadPoolExecutor has no pending limit; Netty's
// maxPendingTimeouts counts every scheduled timeout. The crate: "One
// Timeout stands for every run, and pending_timeouts() counts the task
// once", during its runs too; a cancel frees the slot at once.
#[test]
fn the_pending_limit_counts_a_periodic_task_once_during_its_runs_too() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(1)
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<Result<(), TimerError>>>> = Arc::default();
    let s = seen.clone();
    let p = timer
        .schedule_with_fixed_delay(
            move |t: &Timeout| {
                let timer = t.timer().unwrap();
                let refused = timer.new_timeout(|_| {}, MS).map(drop);
                s.lock().unwrap().push(refused);
                if s.lock().unwrap().len() == 2 {
                    assert!(t.cancel());
                    let freed = timer.new_timeout(|_| {}, MS).map(drop);
                    s.lock().unwrap().push(freed);
                }
            },
            ms(10),
            ms(10),
        )
        .unwrap();
    assert!(timer.new_timeout(|_| {}, MS).unwrap_err().is_at_capacity());
    assert!(timer
        .schedule_at_fixed_rate(|_| {}, MS, MS)
        .unwrap_err()
        .is_at_capacity());
    timer.advance(ms(100));
    let at_capacity = Err(TimerError::AtCapacity { pending: 1, max: 1 });
    assert_eq!(
        *seen.lock().unwrap(),
        vec![at_capacity.clone(), at_capacity, Ok(())]
    );
    assert!(p.is_cancelled());
    assert_eq!(
        timer.pending_timeouts(),
        0,
        "the one-shot made in the run fired"
    );
    assert_stats_add_up(&timer);
}

// java.util.Timer: a TimerTask's runs never overlap; ScheduledThreadPoolExecutor
// with many threads: "will not concurrently execute". On an executor that
// runs every job on a thread of its own, at a period of one tick.
#[test]
fn runs_of_one_task_never_overlap_on_a_multi_threaded_executor() {
    let jobs: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    let spawned = jobs.clone();
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(move |job: Job| spawned.lock().unwrap().push(std::thread::spawn(job)))
        .build()
        .unwrap();
    let running = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let (flag, o, r) = (running.clone(), overlaps.clone(), runs.clone());
    let p = timer
        .schedule_at_fixed_rate(
            move |_: &Timeout| {
                if flag.swap(true, SeqCst) {
                    o.fetch_add(1, SeqCst);
                }
                for _ in 0..50 {
                    std::thread::yield_now();
                }
                r.fetch_add(1, SeqCst);
                flag.store(false, SeqCst);
            },
            MS,
            MS,
        )
        .unwrap();
    for i in 0..300 {
        timer.advance(MS);
        if i % 50 == 49 {
            for job in std::mem::take(&mut *jobs.lock().unwrap()) {
                job.join().unwrap(); // a run at least every 50 ticks
            }
        }
    }
    assert!(p.cancel());
    for job in std::mem::take(&mut *jobs.lock().unwrap()) {
        job.join().unwrap();
    }
    assert_eq!(overlaps.load(SeqCst), 0);
    assert!(runs.load(SeqCst) >= 6);
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}

/// An executor that queues jobs, to run (or drop) when the test says.
#[derive(Clone, Default)]
struct Queue(Arc<Mutex<Vec<Job>>>);

impl Queue {
    fn timer(&self) -> HashedWheelTimer {
        let queue = self.clone();
        HashedWheelTimer::builder()
            .manual_clock()
            .executor(move |job: Job| queue.0.lock().unwrap().push(job))
            .build()
            .unwrap()
    }

    fn run_all(&self) {
        let jobs = std::mem::take(&mut *self.0.lock().unwrap());
        jobs.into_iter().for_each(|job| job());
    }
}

// ScheduledThreadPoolExecutor.shutdownNow() returns the tasks that never
// began. The crate: "A job that has not started when the timer stops never
// runs its task: stop() returns its timeout", a periodic one too.
#[test]
fn a_periodic_run_waiting_on_the_executor_at_stop_is_returned_and_never_runs() {
    let queue = Queue::default();
    let timer = queue.timer();
    let (runs, task) = counting();
    let p = timer.schedule_at_fixed_rate(task, MS, ms(5)).unwrap();
    timer.advance(MS);
    assert_eq!(queue.0.lock().unwrap().len(), 1, "handed off, not started");
    assert_eq!(timer.stop().unwrap(), vec![p.clone()]);
    queue.run_all();
    assert_eq!(runs.load(SeqCst), 0);
    assert!(p.is_stopped() && !p.is_pending());
    assert_eq!(timer.stats().stopped, 1);
    assert_stats_add_up(&timer);
}

// Future.cancel(false) on a periodic task whose run is queued but not
// begun: the cancel wins, and the queued job runs nothing.
#[test]
fn cancel_wins_over_a_periodic_run_waiting_on_the_executor() {
    let queue = Queue::default();
    let timer = queue.timer();
    let (runs, task) = counting();
    let p = timer.schedule_with_fixed_delay(task, MS, ms(5)).unwrap();
    timer.advance(MS);
    assert!(!p.reset(MS), "a periodic task is never reset");
    assert!(p.cancel());
    queue.run_all();
    timer.advance(ms(50));
    queue.run_all();
    assert_eq!(runs.load(SeqCst), 0);
    assert!(p.is_cancelled());
    assert_eq!(timer.pending_timeouts(), 0);
    assert_eq!(timer.stats().cancelled, 1);
    assert_stats_add_up(&timer);
}
