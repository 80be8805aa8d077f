//! Timers' tasks nested deeper than a few levels: timer `a`'s task advances manual timer `b`, whose
//! task advances `c`, and so on. From the innermost task, `a.stop()` is still called from a task
//! of `a` (`StopFromTimerTask`), and `a`'s last handle dropped there must not wait for the driver
//! it runs inside. Every test is bounded: a hang shows as a failure, not a stuck run.

mod common;

use common::{within, HANG};
use hashed_wheel_timer::{Builder, HashedWheelTimer, Job, TimerError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
/// How deep the tests nest: under Miri, only past the old limit of four.
const LEVELS: &[usize] = if cfg!(miri) { &[5] } else { &[2, 4, 5, 6, 9] };

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// A timer whose executor runs each job on a thread of its own and waits for it: the thread
/// driving the timer (the caller of `advance`, or the worker) is blocked while the job runs.
fn waits_for_its_jobs(builder: Builder) -> HashedWheelTimer {
    let executor = |job: Job| thread::scope(|s| drop(s.spawn(job)));
    builder.executor(executor).build().unwrap()
}

/// Schedules on `a` a task that advances a manual timer, whose task advances the next, `levels`
/// timers in all with `a`; the innermost task counts in the result, then runs `innermost`.
fn nest(
    a: &HashedWheelTimer,
    levels: usize,
    innermost: impl FnOnce() + Send + 'static,
) -> Arc<AtomicUsize> {
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let mut task: Box<dyn FnOnce() + Send> = Box::new(move || {
        ran2.fetch_add(1, Ordering::SeqCst);
        innermost();
    });
    for _ in 1..levels {
        let inner = manual();
        inner.new_timeout(move |_| task(), MS).unwrap();
        task = Box::new(move || inner.advance(MS));
    }
    a.new_timeout(move |_| task(), MS).unwrap();
    ran
}

/// `a.stop()` from the innermost of `levels` nested tasks; whether the innermost task ran, and
/// what `stop` returned.
fn stop_from_the_innermost(a: HashedWheelTimer, levels: usize) -> (bool, Option<TimerError>) {
    let got = Arc::new(Mutex::new(None));
    let (a2, got2) = (a.clone(), got.clone());
    let ran = nest(&a, levels, move || {
        *got2.lock().unwrap() = Some(a2.stop().map(|never_ran| never_ran.len()));
    });
    a.advance(MS);
    let got = got.lock().unwrap().take();
    assert!(!a.is_shutdown(), "a stopped from inside its own task");
    (ran.load(Ordering::SeqCst) == 1, got.map(|r| r.unwrap_err()))
}

#[test]
fn stop_from_a_task_nested_five_and_six_deep_in_this_timers_task_is_refused() {
    for &levels in LEVELS {
        let got = within(&format!("a.stop() {levels} deep"), move || {
            stop_from_the_innermost(manual(), levels)
        });
        assert_eq!(got, (true, Some(TimerError::StopFromTimerTask)), "{levels}");
    }
}

/// The same where `a`'s task runs on an executor's thread while the caller of `a.advance` waits
/// for it: only the nesting of tasks says the innermost runs inside `a`'s task, and a `stop` let
/// through would wait for the driver, which waits for the task.
#[test]
fn stop_nested_deep_in_this_timers_job_on_an_executor_that_waits_is_refused() {
    for &levels in LEVELS {
        let got = within(
            &format!("a.stop() {levels} deep on an executor"),
            move || {
                stop_from_the_innermost(
                    waits_for_its_jobs(HashedWheelTimer::builder().manual_clock()),
                    levels,
                )
            },
        );
        assert_eq!(got, (true, Some(TimerError::StopFromTimerTask)), "{levels}");
    }
}

/// `a`'s last handle dropped in the innermost task, `a`'s task run by an executor its worker thread
/// waits for: the drop must not wait for the worker; afterwards `a` is gone and its far timeout
/// never ran.
#[test]
fn the_last_handle_dropped_nested_deep_in_this_timers_job_does_not_hang() {
    for &levels in LEVELS {
        let what = format!("a's last handle dropped {levels} deep");
        let (ran, far_ran, gone) = within(&what, move || {
            let a = waits_for_its_jobs(HashedWheelTimer::builder());
            let far_ran = Arc::new(AtomicUsize::new(0));
            let far_ran2 = far_ran.clone();
            let far = a.new_timeout(
                move |_| {
                    far_ran2.fetch_add(1, Ordering::SeqCst);
                },
                HANG * 10,
            );
            let slot = Arc::new(Mutex::new(Some(a.clone())));
            let (slot2, (tx, rx)) = (slot.clone(), mpsc::channel());
            let ran = nest(&a, levels, move || {
                drop(slot2.lock().unwrap().take());
                tx.send(()).unwrap();
            });
            drop(a);
            rx.recv().unwrap();
            let gone = far.unwrap().timer().is_none();
            (
                ran.load(Ordering::SeqCst),
                far_ran.load(Ordering::SeqCst),
                gone,
            )
        });
        assert_eq!((ran, far_ran, gone), (1, 0, true), "{levels}");
    }
}

/// `a.advance` (and `advance_to_next`) from `a`'s own job, on an executor the running `a.advance`
/// waits for: as from a task of that `advance` (its docs), the clock moves at once and the outer
/// `advance` fires what falls due; it must not wait for the driver, which waits for it.
#[test]
fn advance_from_this_timers_job_on_an_executor_that_waits_does_not_hang() {
    for to_next in [false, true] {
        let what = format!("a.advance() in a's job on a waiting executor, to_next {to_next}");
        let (fired, now) = within(&what, move || {
            let a = waits_for_its_jobs(HashedWheelTimer::builder().manual_clock());
            let start = a.now();
            let later = Arc::new(AtomicUsize::new(0));
            let (a2, later2) = (a.clone(), later.clone());
            a.new_timeout(
                move |_| {
                    if to_next {
                        a2.advance_to_next();
                    } else {
                        a2.advance(MS * 10);
                    }
                },
                MS,
            )
            .unwrap();
            a.new_timeout(
                move |_| {
                    later2.fetch_add(1, Ordering::SeqCst);
                },
                MS * 5,
            )
            .unwrap();
            a.advance(MS);
            (later.load(Ordering::SeqCst), a.now() - start)
        });
        assert_eq!(
            fired, 1,
            "the later timeout fired in the outer advance ({what})"
        );
        assert!(now >= MS * 5, "{now:?}");
    }
}
