//! Timers whose tasks stop or advance each other: without a check each call waits for the other's
//! driver, which is in the task waiting for it, for ever. The call that would close the ring does
//! not wait: a `stop()` gets `TimerError::StopWouldDeadlock`, an `advance` only moves the clock (as
//! in a task of the running `advance`); the others wait, and `stop()` returns what never ran.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};

/// Far beyond any wait these tests have when nothing hangs (a few ms): only a deadlock reaches it.
const HANG: Duration = Duration::from_secs(30);

type Stopped = Result<Vec<Timeout>, TimerError>;

/// What a ring's task does to the next timer.
#[derive(Clone, Copy)]
enum Call {
    Stop,
    Advance,
}

/// Schedules on each of `timers` a task that meets the others' at a barrier, then makes its call
/// on the next timer (the last on the first), and sends which timer it called and, for a
/// `stop()`, what it returned (`Ok(vec![])` for an `advance`).
fn ring(timers: &[HashedWheelTimer], calls: &[Call]) -> mpsc::Receiver<(usize, Stopped)> {
    let (tx, rx) = mpsc::channel();
    let all_in_tasks = Arc::new(Barrier::new(timers.len()));
    for (i, (timer, &call)) in timers.iter().zip(calls).enumerate() {
        let next = (i + 1) % timers.len();
        let (callee, tx, barrier) = (timers[next].clone(), tx.clone(), all_in_tasks.clone());
        let task = move |_: &Timeout| {
            barrier.wait();
            let result = match call {
                Call::Stop => callee.stop(),
                Call::Advance => {
                    callee.advance(Duration::from_millis(1));
                    Ok(Vec::new())
                }
            };
            tx.send((next, result)).unwrap();
        };
        timer.new_timeout(task, Duration::from_millis(1)).unwrap();
    }
    rx
}

/// Advances each manual timer by a millisecond on a thread of its own, so that each holds its
/// driver while its task waits on the next.
fn advance_each(timers: &[HashedWheelTimer]) -> Vec<thread::JoinHandle<()>> {
    let advance = |timer: &HashedWheelTimer| {
        let timer = timer.clone();
        thread::spawn(move || timer.advance(Duration::from_millis(1)))
    };
    timers.iter().map(advance).collect()
}

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// The results of a ring's `stop()`s, by the stopped timer's place; fails on a hang.
fn results(rx: &mpsc::Receiver<(usize, Stopped)>, ring: usize) -> Vec<Stopped> {
    let mut results: Vec<Option<Stopped>> = (0..ring).map(|_| None).collect();
    for _ in 0..ring {
        let (stopped, result) = rx.recv_timeout(HANG).expect("a stop() in the ring hangs");
        results[stopped] = Some(result);
    }
    results.into_iter().map(Option::unwrap).collect()
}

fn refused(results: &[Stopped]) -> usize {
    results
        .iter()
        .filter(|r| matches!(r, Err(TimerError::StopWouldDeadlock)))
        .count()
}

#[test]
fn two_worker_threads_whose_tasks_stop_each_other_neither_hang_and_one_is_refused() {
    let timers = [HashedWheelTimer::new(), HashedWheelTimer::new()];
    let later = timers[0]
        .new_timeout(|_| {}, Duration::from_secs(3600))
        .unwrap();
    let rx = ring(&timers, &[Call::Stop; 2]);
    let results = results(&rx, 2);
    assert_eq!(refused(&results), 1, "{results:?}");
    // The other stop() waited for the refused one's task and returned what never ran.
    let never_ran = |timer: usize| {
        if timer == 0 {
            vec![later.clone()]
        } else {
            Vec::new()
        }
    };
    let stopped = results.iter().position(Result::is_ok).unwrap();
    assert_eq!(results[stopped], Ok(never_ran(stopped)));
    assert!(timers[stopped].is_shutdown() && !timers[1 - stopped].is_shutdown());
    // The refused stop() left nothing behind: from a plain thread, it goes through.
    assert_eq!(timers[1 - stopped].stop(), Ok(never_ran(1 - stopped)));
    assert!(later.is_stopped());
}

#[test]
fn a_ring_of_three_worker_threads_has_one_stop_refused_and_two_that_wait() {
    let timers = [
        HashedWheelTimer::new(),
        HashedWheelTimer::new(),
        HashedWheelTimer::new(),
    ];
    let rx = ring(&timers, &[Call::Stop; 3]);
    let results = results(&rx, 3);
    assert_eq!(refused(&results), 1, "{results:?}");
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        2,
        "{results:?}"
    );
}

#[test]
fn manual_clocks_advanced_on_two_threads_whose_tasks_stop_each_other_do_not_hang() {
    let timers = [manual(), manual()];
    let rx = ring(&timers, &[Call::Stop; 2]);
    let advancing = advance_each(&timers);
    let results = results(&rx, 2);
    assert_eq!(refused(&results), 1, "{results:?}");
    advancing.into_iter().for_each(|a| a.join().unwrap());
}

#[test]
fn manual_clocks_whose_tasks_advance_each_other_do_not_hang_and_each_clock_moves() {
    let timers = [manual(), manual(), manual()];
    let start: Vec<_> = timers.iter().map(HashedWheelTimer::now).collect();
    let rx = ring(&timers, &[Call::Advance; 3]);
    let advancing = advance_each(&timers);
    assert_eq!(results(&rx, 3), vec![Ok(Vec::new()); 3]);
    advancing.into_iter().for_each(|a| a.join().unwrap());
    // Each clock moved by its own advance and by the task's: the one that did not wait moved
    // the clock at once, as a task of the running advance does.
    for (timer, start) in timers.iter().zip(start) {
        assert_eq!(timer.now() - start, Duration::from_millis(2));
    }
}

#[test]
fn a_task_that_advances_a_timer_whose_task_stops_its_own_does_not_hang() {
    let timers = [manual(), manual()];
    let pending = timers[1]
        .new_timeout(|_| {}, Duration::from_secs(3600))
        .unwrap();
    let rx = ring(&timers, &[Call::Stop, Call::Advance]);
    let advancing = advance_each(&timers);
    let results = results(&rx, 2);
    advancing.into_iter().for_each(|a| a.join().unwrap());
    // The stop() of the second timer waited, or was refused if it closed the ring.
    assert!(
        matches!(&results[1], Err(TimerError::StopWouldDeadlock))
            || results[1] == Ok(vec![pending]),
        "{results:?}"
    );
    assert_eq!(results[0], Ok(Vec::new()), "the advance returned");
}

#[test]
fn a_task_stopping_another_timer_that_is_not_stopping_it_waits_and_is_not_refused() {
    let (first, second) = (HashedWheelTimer::new(), HashedWheelTimer::new());
    let pending = second
        .new_timeout(|_| {}, Duration::from_secs(3600))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    // The second timer's task runs while the first's stops it: the stop waits for it to end.
    let in_task = Arc::new(Barrier::new(2));
    let barrier = in_task.clone();
    second
        .new_timeout(
            move |_| {
                barrier.wait();
            },
            Duration::from_millis(1),
        )
        .unwrap();
    let to_stop = second.clone();
    first
        .new_timeout(
            move |_| {
                in_task.wait();
                tx.send(to_stop.stop()).unwrap();
            },
            Duration::from_millis(1),
        )
        .unwrap();
    let stopped = rx.recv_timeout(HANG).expect("the stop() hangs");
    assert_eq!(stopped, Ok(vec![pending]));
}
