//! Task executors: a slow callback no longer delays ticks; panics are still
//! caught; periodic runs never overlap; stop() from a job is an error;
//! jobs an executor drops end their timeouts stopped.

mod common;

use common::{manual, Counter, Logs, QueueExecutor};
use hashed_wheel_timer::{HashedWheelTimer, Job, Timeout, TimerError, TokioExecutor};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// A real-clock timer that runs each callback on a thread of its own.
fn thread_per_job() -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .executor(|job: Job| {
            std::thread::spawn(job);
        })
        .build()
        .unwrap()
}

/// Schedules a callback at 1 ms that blocks for 3 s of timer time, and a
/// probe due at 2 ms; returns how late the probe ran, on the timer's clock.
/// With a queueing executor, the slow job is taken as if an executor
/// thread were busy with it, and the probe's job then runs on another.
fn probe_lateness(timer: &HashedWheelTimer, executor: Option<&QueueExecutor>) -> Duration {
    let clock = timer.clone();
    let slow = timer
        .new_timeout(move |_| clock.advance(3 * SEC), MS)
        .unwrap();
    let lateness = Arc::new(Mutex::new(None));
    let (l, clock) = (lateness.clone(), timer.clone());
    timer
        .new_timeout(
            move |t: &Timeout| *l.lock().unwrap() = Some(clock.now() - t.deadline()),
            MS * 2,
        )
        .unwrap();
    timer.advance(MS);
    let busy_with_slow = executor.map(|e| e.take().expect("the slow job was handed off"));
    timer.advance(MS);
    if let Some(executor) = executor {
        assert_eq!(executor.run_all(), 1, "the probe's job");
    }
    let late = lateness.lock().unwrap().expect("the probe ran");
    if let Some(job) = busy_with_slow {
        job();
    }
    assert!(slow.is_expired());
    late
}

#[test]
fn a_blocking_callback_on_the_worker_delays_a_later_timeout() {
    let timer = manual(MS);
    assert_eq!(
        probe_lateness(&timer, None),
        3 * SEC - MS,
        "the probe waited for the slow callback"
    );
}

#[test]
fn the_same_callback_on_an_executor_does_not() {
    let executor = QueueExecutor::default();
    let timer = executor.timer(MS);
    assert_eq!(probe_lateness(&timer, Some(&executor)), Duration::ZERO);
}

#[test]
fn runs_of_one_periodic_task_never_overlap_on_an_executor() {
    let executor = QueueExecutor::default();
    let timer = executor.timer(MS);
    let start = timer.now();
    let dues = Arc::new(Mutex::new(Vec::new()));
    let d = dues.clone();
    timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| d.lock().unwrap().push(t.scheduled_execution_time() - start),
            MS * 10,
            MS * 10,
        )
        .unwrap();
    timer.advance(MS * 100);
    assert_eq!(executor.len(), 1, "no second run while the first is out");
    // Each job, when it returns, re-arms the task; the overdue runs then
    // come one a tick, back to back, each after the previous one returned.
    for _ in 0..9 {
        assert_eq!(executor.run_all(), 1);
        assert_eq!(executor.len(), 0);
        timer.advance(MS);
        assert_eq!(executor.len(), 1);
    }
    executor.run_all();
    let expected: Vec<Duration> = (1..=10).map(|i| MS * 10 * i).collect();
    assert_eq!(*dues.lock().unwrap(), expected, "fixed rate: no run lost");
    assert_eq!(timer.pending_timeouts(), 1);
}

#[test]
fn runs_of_one_periodic_task_never_overlap_on_many_threads() {
    // A thread per job and a real clock: a run takes longer than the
    // period, so a naive re-arm would start the next run meanwhile.
    let timer = thread_per_job();
    let running = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let dues = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done_rx) = mpsc::channel();
    let (r, o, d) = (running.clone(), overlaps.clone(), dues.clone());
    let t = timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| {
                if r.swap(true, Ordering::SeqCst) {
                    o.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(MS * 3);
                let mut dues = d.lock().unwrap();
                dues.push(t.scheduled_execution_time());
                if dues.len() == 20 {
                    t.cancel();
                    done_tx.send(()).unwrap();
                }
                r.store(false, Ordering::SeqCst);
            },
            MS,
            MS,
        )
        .unwrap();
    done_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    let dues = dues.lock().unwrap();
    assert!(
        dues.windows(2).all(|w| w[1] - w[0] == MS),
        "every run due one period after the last: catching up, not skipping"
    );
    assert!(t.is_cancelled());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn panics_on_an_executor_are_caught_logged_and_reported() {
    let logs = Logs::default();
    let executor = QueueExecutor::default();
    let timer = executor.timer(MS);
    let one_shot = timer.new_timeout(|_| panic!("one-shot boom"), MS).unwrap();
    let runs = Counter::default();
    let periodic = timer
        .schedule_with_fixed_delay(runs.task_panicking_in_run(2, "periodic boom"), MS, MS)
        .unwrap();
    let fine = timer.new_timeout(|_| {}, MS * 5).unwrap();
    tracing::subscriber::with_default(logs.subscriber(), || {
        for _ in 0..10 {
            timer.advance(MS);
            executor.run_all(); // would panic here if a job let one out
        }
    });
    assert!(one_shot.is_panicked() && one_shot.is_expired());
    assert_eq!(runs.get(), 2, "suppressed after the panic");
    assert!(periodic.is_panicked() && !periodic.is_pending());
    assert!(fine.is_expired() && !fine.is_panicked());
    assert_eq!(timer.pending_timeouts(), 0);
    assert_eq!(logs.count("a timer task panicked"), 2);
    assert_eq!(logs.count("one-shot boom"), 1);
    assert_eq!(logs.count("periodic boom"), 1);
}

#[test]
fn cancel_before_a_handed_off_periodic_run_starts_skips_it() {
    let executor = QueueExecutor::default();
    let timer = executor.timer(MS);
    let runs = Counter::default();
    let t = timer.schedule_at_fixed_rate(runs.task(), MS, MS).unwrap();
    timer.advance(MS);
    assert_eq!(executor.len(), 1);
    assert!(t.cancel(), "no run has started: it can be cancelled");
    assert_eq!(timer.pending_timeouts(), 0);
    executor.run_all();
    timer.advance(MS * 10);
    assert_eq!(runs.get(), 0);
    assert_eq!(executor.len(), 0);
    assert!(t.is_cancelled());
}

#[test]
fn a_one_shot_handed_off_cannot_be_cancelled() {
    let executor = QueueExecutor::default();
    let timer = executor.timer(MS);
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let t = timer
        .new_timeout(move |_| r.store(true, Ordering::SeqCst), MS)
        .unwrap();
    timer.advance(MS);
    assert!(t.is_expired());
    assert!(!t.cancel(), "it fired: the job will run");
    executor.run_all();
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn jobs_the_executor_drops_end_their_timeouts_stopped() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|job: Job| drop(job))
        .build()
        .unwrap();
    let ran = Counter::default();
    let one_shot = timer.new_timeout(ran.task(), MS).unwrap();
    let periodic = timer.schedule_at_fixed_rate(ran.task(), MS, MS).unwrap();
    timer.advance(MS * 10);
    assert!(one_shot.is_stopped() && periodic.is_stopped());
    assert_eq!(timer.pending_timeouts(), 0, "each counted once");
    assert_eq!(ran.get(), 0);
    for t in [&one_shot, &periodic] {
        t.take_task().expect("the task comes back").run(t);
    }
    assert_eq!(ran.get(), 2);
}

#[test]
fn a_shut_down_tokio_runtime_drops_jobs_and_their_timeouts_end_stopped() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    drop(runtime);
    for executor in [
        TokioExecutor::spawn(handle.clone()),
        TokioExecutor::spawn_blocking(handle.clone()),
    ] {
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .executor(executor)
            .build()
            .unwrap();
        let t = timer.new_timeout(|_| panic!("never runs"), MS).unwrap();
        timer.advance(MS);
        assert!(t.is_stopped());
        assert!(t.take_task().is_some());
    }
}

#[test]
fn tokio_spawn_and_spawn_blocking_run_callbacks_on_the_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("test-runtime")
        .build()
        .unwrap();
    for executor in [
        TokioExecutor::spawn(runtime.handle().clone()),
        TokioExecutor::spawn_blocking(runtime.handle().clone()),
    ] {
        let timer = HashedWheelTimer::builder()
            .executor(executor)
            .build()
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let t = timer
            .schedule_with_fixed_delay(
                move |t: &Timeout| {
                    let thread = std::thread::current().name().map(str::to_owned);
                    t.cancel();
                    let _ = tx.send(thread);
                },
                MS,
                MS,
            )
            .unwrap();
        let thread = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(thread.as_deref(), Some("test-runtime"));
        assert!(t.is_cancelled());
        assert!(timer.stop().unwrap().is_empty());
    }
}

#[test]
fn stop_from_a_job_on_an_executor_is_an_error_not_a_deadlock() {
    let timer = thread_per_job();
    let (tx, rx) = mpsc::channel();
    let inner = timer.clone();
    timer
        .new_timeout(move |_| tx.send(inner.stop()).unwrap(), MS)
        .unwrap();
    let got = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(got, Err(TimerError::StopFromTimerTask));
    assert!(timer.stop().is_ok(), "stop from outside still works");
}

#[test]
fn an_executor_that_panics_in_execute_does_not_stop_the_timer() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|_job: Job| panic!("executor is broken"))
        .build()
        .unwrap();
    let a = timer.new_timeout(|_| {}, MS).unwrap();
    let b = timer.new_timeout(|_| {}, MS * 2).unwrap();
    timer.advance(MS * 2);
    assert!(
        a.is_stopped() && b.is_stopped(),
        "both reached the executor"
    );
    assert_eq!(timer.pending_timeouts(), 0);
}
