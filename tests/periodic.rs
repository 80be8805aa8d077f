//! Periodic tasks on the manual clock: fixed rate against fixed delay,
//! `scheduled_execution_time`, cancel, panics, counting and stop.

mod common;

use common::{manual, Counter};
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
enum Kind {
    Rate,
    Delay,
}

fn schedule<F>(
    timer: &HashedWheelTimer,
    kind: Kind,
    task: F,
    initial_delay: Duration,
    every: Duration,
) -> Timeout
where
    F: FnMut(&Timeout) + Send + 'static,
{
    match kind {
        Kind::Rate => timer.schedule_at_fixed_rate(task, initial_delay, every),
        Kind::Delay => timer.schedule_with_fixed_delay(task, initial_delay, every),
    }
    .expect("scheduled")
}

/// One run as the task saw it, in seconds after the first run was due.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Run {
    due: f64,
    started: f64,
    ended: f64,
}

/// The java.util.Timer documentation's example: a task that takes `takes`
/// (it advances the manual clock from inside the run) with a 2 s period,
/// four runs, then it cancels itself.
fn four_runs(kind: Kind, takes: Duration) -> Vec<Run> {
    let timer = manual(MS);
    let first_due = timer.now() + 2 * SEC;
    let secs = move |at: Instant| (at - first_due).as_secs_f64();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let running = Arc::new(AtomicBool::new(false));
    let (record, clock) = (runs.clone(), timer.clone());
    let t = schedule(
        &timer,
        kind,
        move |t: &Timeout| {
            assert!(!running.swap(true, Ordering::SeqCst), "runs overlapped");
            let started = clock.now();
            clock.advance(takes); // the run takes `takes`
            let run = Run {
                due: secs(t.scheduled_execution_time()),
                started: secs(started),
                ended: secs(clock.now()),
            };
            let mut runs = record.lock().unwrap();
            runs.push(run);
            if runs.len() == 4 {
                assert!(t.cancel(), "a run may cancel its own task");
            }
            running.store(false, Ordering::SeqCst);
        },
        2 * SEC,
        2 * SEC,
    );
    timer.advance(2 * SEC);
    timer.advance(Duration::from_secs(60));
    assert!(t.is_cancelled());
    assert_eq!(timer.pending_timeouts(), 0);
    let runs = runs.lock().unwrap().clone();
    runs
}

fn run(due: f64, started: f64, ended: f64) -> Run {
    Run {
        due,
        started,
        ended,
    }
}

#[test]
fn a_3s_task_every_2s_at_fixed_rate_is_due_0_2_4_6_and_catches_up_back_to_back() {
    assert_eq!(
        four_runs(Kind::Rate, 3 * SEC),
        vec![
            run(0.0, 0.0, 3.0),
            run(2.0, 3.0, 6.0),
            run(4.0, 6.0, 9.0),
            run(6.0, 9.0, 12.0),
        ],
        "each run due 2 s after the previous due time; the late ones start \
         as soon as the previous one ends, never while it runs"
    );
}

#[test]
fn a_3s_task_every_2s_at_fixed_delay_is_due_2s_after_each_run_ends() {
    assert_eq!(
        four_runs(Kind::Delay, 3 * SEC),
        vec![
            run(0.0, 0.0, 3.0),
            run(5.0, 5.0, 8.0),
            run(10.0, 10.0, 13.0),
            run(15.0, 15.0, 18.0),
        ]
    );
}

#[test]
fn a_1s_task_every_2s_is_due_0_2_4_6_at_fixed_rate_and_0_3_6_9_at_fixed_delay() {
    let dues = |runs: Vec<Run>| runs.iter().map(|r| r.due).collect::<Vec<_>>();
    assert_eq!(dues(four_runs(Kind::Rate, SEC)), vec![0.0, 2.0, 4.0, 6.0]);
    assert_eq!(dues(four_runs(Kind::Delay, SEC)), vec![0.0, 3.0, 6.0, 9.0]);
}

#[test]
fn fixed_rate_due_times_never_drift_while_fixed_delay_ones_do() {
    // 25 ms does not divide the 10 ms tick: every run fires up to a tick
    // late. Fixed rate still counts from the due time; fixed delay counts
    // from when the run ended, so the lateness adds up.
    for (kind, expected_dues) in [
        (Kind::Rate, vec![25, 50, 75, 100, 125, 150]),
        (Kind::Delay, vec![25, 55, 85, 115, 145]),
    ] {
        let timer = manual(MS * 10);
        let start = timer.now();
        let dues = Arc::new(Mutex::new(Vec::new()));
        let fired_at = Arc::new(Mutex::new(Vec::new()));
        let (d, f, clock) = (dues.clone(), fired_at.clone(), timer.clone());
        schedule(
            &timer,
            kind,
            move |t: &Timeout| {
                d.lock().unwrap().push(t.scheduled_execution_time() - start);
                f.lock().unwrap().push(clock.now() - start);
            },
            MS * 25,
            MS * 25,
        );
        timer.advance(MS * 150);
        let ms = |v: &[u64]| v.iter().map(|&m| MS * m as u32).collect::<Vec<_>>();
        assert_eq!(*dues.lock().unwrap(), ms(&expected_dues), "{kind:?}");
        for (due, at) in dues
            .lock()
            .unwrap()
            .iter()
            .zip(fired_at.lock().unwrap().iter())
        {
            assert!(at >= due, "{kind:?}: never early");
            assert!(*at - *due < MS * 10, "{kind:?}: within a tick");
        }
    }
}

#[test]
fn scheduled_execution_time_is_the_due_time_of_the_run_in_progress() {
    let timer = manual(MS);
    let start = timer.now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let t = timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| s.lock().unwrap().push(t.scheduled_execution_time() - start),
            MS * 5,
            MS * 10,
        )
        .unwrap();
    assert_eq!(
        t.scheduled_execution_time(),
        start + MS * 5,
        "before the first run"
    );
    timer.advance(MS * 30);
    assert_eq!(*seen.lock().unwrap(), vec![MS * 5, MS * 15, MS * 25]);
    assert_eq!(t.deadline(), start + MS * 35, "between runs: the next one");

    let one_shot = timer.new_timeout(|_| {}, MS * 3).unwrap();
    assert_eq!(one_shot.scheduled_execution_time(), one_shot.deadline());
}

#[test]
fn cancel_between_runs_stops_later_runs_and_counts_once() {
    let timer = manual(MS);
    let runs = Counter::default();
    let t = timer
        .schedule_at_fixed_rate(runs.task(), MS * 10, MS * 10)
        .unwrap();
    assert!(t.is_periodic() && t.is_pending());
    timer.advance(MS * 35);
    assert_eq!(runs.get(), 3);
    assert_eq!(timer.pending_timeouts(), 1, "one task, however many runs");
    assert!(t.is_pending() && !t.is_expired());

    assert!(t.cancel());
    assert!(!t.cancel(), "only once");
    assert_eq!(timer.pending_timeouts(), 0);
    timer.advance(MS * 100);
    assert_eq!(runs.get(), 3, "no run after cancel");
    assert_eq!(timer.pending_timeouts(), 0, "removal does not count again");
    assert!(t.is_cancelled() && !t.is_pending() && !t.is_panicked());
}

#[test]
fn cancel_during_a_run_lets_it_finish_and_stops_later_runs() {
    let timer = manual(MS);
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let mut run = 0;
    let t = timer
        .schedule_with_fixed_delay(
            move |t: &Timeout| {
                run += 1;
                l.lock().unwrap().push(format!("start {run}"));
                if run == 2 {
                    assert!(t.cancel(), "cancel during a run wins");
                    assert!(t.is_cancelled());
                }
                l.lock().unwrap().push(format!("end {run}"));
            },
            MS,
            MS,
        )
        .unwrap();
    timer.advance(MS * 50);
    assert_eq!(
        *log.lock().unwrap(),
        vec!["start 1", "end 1", "start 2", "end 2"]
    );
    assert!(t.is_cancelled());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn a_panicking_run_suppresses_later_runs_and_the_handle_says_so() {
    let timer = manual(MS);
    let runs = Counter::default();
    let doomed = timer
        .schedule_at_fixed_rate(
            runs.task_panicking_in_run(3, "third run fails"),
            MS * 10,
            MS * 10,
        )
        .unwrap();
    let others = Counter::default();
    let healthy = timer
        .schedule_with_fixed_delay(others.task(), MS * 10, MS * 10)
        .unwrap();
    let later = timer.new_timeout(|_| {}, MS * 95).unwrap();
    assert_eq!(timer.pending_timeouts(), 3);

    timer.advance(MS * 100);
    assert_eq!(runs.get(), 3, "no run after the panic");
    assert!(doomed.is_panicked() && doomed.is_expired());
    assert!(!doomed.is_pending() && !doomed.is_cancelled());
    assert!(!doomed.cancel(), "nothing left to cancel");

    assert_eq!(others.get(), 10, "other tasks carry on");
    assert!(healthy.is_pending() && !healthy.is_panicked());
    assert!(later.is_expired() && !later.is_panicked());
    assert_eq!(timer.pending_timeouts(), 1, "the panic counted once");
    assert!(healthy.cancel());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn a_panicking_one_shot_reports_it_too() {
    let timer = manual(MS);
    let t = timer.new_timeout(|_| panic!("boom"), MS).unwrap();
    timer.advance(MS);
    assert!(t.is_expired() && t.is_panicked());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn a_zero_period_or_delay_is_refused_with_an_error_naming_it() {
    let timer = manual(MS);
    let err = timer
        .schedule_at_fixed_rate(|_| {}, SEC, Duration::ZERO)
        .unwrap_err();
    assert_eq!(
        err,
        TimerError::ZeroPeriod {
            what: "period",
            value: Duration::ZERO
        }
    );
    assert!(err.to_string().contains("period must be greater than zero"));
    let err = timer
        .schedule_with_fixed_delay(|_| {}, SEC, Duration::ZERO)
        .unwrap_err();
    assert_eq!(
        err,
        TimerError::ZeroPeriod {
            what: "delay",
            value: Duration::ZERO
        }
    );
    assert_eq!(timer.pending_timeouts(), 0, "nothing was counted");
    // A zero initial delay is fine: the first run is on the next tick.
    let t = timer
        .schedule_at_fixed_rate(|_| {}, Duration::ZERO, SEC)
        .unwrap();
    timer.advance(MS);
    assert_eq!(t.deadline(), timer.now() + SEC - MS);
}

#[test]
fn a_period_shorter_than_a_tick_runs_once_per_tick() {
    let timer = manual(MS * 10);
    let runs = Counter::default();
    timer.schedule_at_fixed_rate(runs.task(), MS, MS).unwrap();
    timer.advance(MS * 100);
    assert_eq!(runs.get(), 10);
}

#[test]
fn a_periodic_task_counts_once_against_max_pending() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(2)
        .build()
        .unwrap();
    let p = timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
    timer.new_timeout(|_| {}, SEC).unwrap();
    timer.advance(MS * 20);
    assert!(timer.new_timeout(|_| {}, SEC).unwrap_err().is_at_capacity());
    assert!(p.cancel());
    assert!(timer.new_timeout(|_| {}, SEC).is_ok());
}

#[test]
fn stop_returns_a_waiting_periodic_task_whose_task_runs_once() {
    let timer = manual(MS);
    let runs = Counter::default();
    let t = timer
        .schedule_at_fixed_rate(runs.task(), MS * 10, MS * 10)
        .unwrap();
    timer.advance(MS * 25);
    assert_eq!(runs.get(), 2);
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped, vec![t.clone()]);
    assert!(t.is_stopped() && !t.is_pending());
    assert_eq!(timer.pending_timeouts(), 0);
    let task = t
        .take_task()
        .expect("a stopped periodic task gives its task");
    task.run(&t);
    assert_eq!(runs.get(), 3, "it ran once more, by hand");
    timer.advance(MS * 100);
    assert_eq!(runs.get(), 3);
}

#[test]
fn a_run_in_progress_when_stop_is_called_finishes_and_the_task_ends_stopped() {
    // On a real clock, from the worker thread: stop() waits for the run.
    let timer = HashedWheelTimer::new();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let runs = Counter::default();
    let mut count = runs.task();
    let t = timer
        .schedule_at_fixed_rate(
            move |t: &Timeout| {
                count(t);
                let _ = started_tx.send(());
                let _ = go_rx.recv();
            },
            MS,
            MS,
        )
        .unwrap();
    started_rx.recv().unwrap();
    let stopper = {
        let timer = timer.clone();
        std::thread::spawn(move || timer.stop().unwrap())
    };
    while !timer.is_shutdown() {
        std::thread::yield_now();
    }
    go_tx.send(()).unwrap();
    let stopped = stopper.join().unwrap();
    assert!(stopped.is_empty(), "it was running, not waiting");
    assert!(t.is_stopped());
    assert_eq!(runs.get(), 1);
    assert_eq!(timer.pending_timeouts(), 0);
}
