//! Lifecycle edges under races and hostile user code: the last handle dropped or `stop()` called
//! from places a driver runs, executors that misbehave, periodic tasks ended from every side, the
//! pending limit at its boundary, and destructors that panic. Every test is bounded: a hang shows
//! as a failure, not a stuck run.

mod common;

use common::{assert_stats_add_up, within, Counter, QueueExecutor, HANG};
use hashed_wheel_timer::{Executor, HashedWheelTimer, Job, Timeout, TimerError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// Threads of this process named `name` (the kernel keeps 15 bytes of a name).
fn threads_named(name: &str) -> usize {
    let name = &name[..name.len().min(15)];
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

fn eventually(cond: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < HANG {
        if cond() {
            return true;
        }
        thread::sleep(MS);
    }
    cond()
}

// --- stop() and the last handle's drop, from inside another timer's task ---

/// A task of manual timer `a` advances manual timer `b`, whose task stops `a`: it runs inside a task
/// of `a`, on the thread driving `a`, so `stop` must be refused, not wait for itself.
#[test]
fn stop_from_a_task_of_another_timer_nested_in_this_timers_task_is_refused() {
    let result = within("a.stop() nested in b's task in a's task", || {
        let (a, b) = (manual(), manual());
        let got = Arc::new(Mutex::new(None));
        let (a2, b2, got2) = (a.clone(), b.clone(), got.clone());
        b.new_timeout(move |_| *got2.lock().unwrap() = Some(a2.stop()), MS)
            .unwrap();
        a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
        a.advance(MS);
        let r = got.lock().unwrap().take();
        r.map(|r| r.map(|v| v.len()))
    });
    assert_eq!(result, Some(Err(TimerError::StopFromTimerTask)));
}

/// The same with `advance`: `a.advance` nested in `b`'s task in `a`'s task is the nested kind
/// (`advance`'s docs), not a second driver waiting for the first.
#[test]
fn advance_from_a_task_of_another_timer_nested_in_this_timers_task_does_not_hang() {
    let fired = within("a.advance() nested in b's task in a's task", || {
        let (a, b) = (manual(), manual());
        let later = Counter::default();
        let (a2, b2) = (a.clone(), b.clone());
        b.new_timeout(move |_| a2.advance(MS * 10), MS).unwrap();
        a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
        let mut task = later.task();
        a.new_timeout(move |t| task(t), MS * 5).unwrap();
        a.advance(MS);
        later.get()
    });
    assert_eq!(fired, 1, "the later timeout fired in the outer advance");
}

/// A tokio clock's driver task runs `a`'s task, which advances manual `b`, whose task drops `a`'s
/// last handle: the drop must not wait for the driver it is running on.
#[test]
fn the_last_handle_dropped_in_another_timers_task_nested_on_a_tokio_driver_does_not_hang() {
    let dropped = within("a's last handle dropped in b's task in a's task", || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let a = {
            let _entered = rt.enter();
            HashedWheelTimer::builder().tokio_clock().build().unwrap()
        };
        let b = manual();
        let slot = Arc::new(Mutex::new(Some(a.clone())));
        let (slot2, b2) = (slot.clone(), b.clone());
        b.new_timeout(move |_| drop(slot2.lock().unwrap().take()), MS)
            .unwrap();
        let after = Counter::default();
        let mut task = after.task();
        a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
        a.new_timeout(move |t| task(t), MS).unwrap();
        drop(a);
        rt.block_on(async { tokio::time::sleep(MS * 10).await });
        let gone = slot.lock().unwrap().is_none();
        (gone, after.get())
    });
    assert_eq!(dropped, (true, 0), "dropped, and nothing after it started");
}

// --- threads left behind ---

/// Starts `timer`'s worker (a timeout that fires) and waits until it runs.
fn start_worker(timer: &HashedWheelTimer, name: &str) {
    let (tx, rx) = mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), MS)
        .unwrap();
    rx.recv_timeout(HANG).unwrap();
    assert_eq!(threads_named(name), 1);
}

/// The last handle, captured by a task, is dropped when the task runs on a job's thread: the
/// worker does not wait for that thread, and must still end.
#[test]
fn the_worker_ends_when_the_last_handle_goes_with_a_task_on_an_executor_thread() {
    let name = "h32-exec-last";
    let timer = HashedWheelTimer::builder()
        .thread_name(name)
        // Named: a thread the worker spawns would otherwise show the worker's name.
        .executor(|job: Job| drop(thread::Builder::new().name("job".into()).spawn(job)))
        .build()
        .unwrap();
    start_worker(&timer, name);
    let (tx, rx) = mpsc::channel();
    let last = timer.clone();
    timer
        .new_timeout(
            move |_| {
                let _last = last;
                tx.send(()).unwrap();
            },
            MS,
        )
        .unwrap();
    drop(timer);
    rx.recv_timeout(HANG).unwrap();
    assert!(eventually(|| threads_named(name) == 0), "the worker ended");
}

// --- executors that call back into the timer, drop jobs, panic ---

/// An executor that runs each job inline (on the thread advancing the manual clock) and whose jobs
/// call back into the timer: schedule, cancel, reset, stop. Everything adds up.
#[test]
fn an_inline_executors_jobs_call_back_into_the_timer() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(|job: Job| job())
        .build()
        .unwrap();
    let ran = Counter::default();
    let victim = timer.new_timeout(|_| {}, MS * 50).unwrap();
    let stop_result = Arc::new(Mutex::new(None));
    let (v, sr, r) = (victim.clone(), stop_result.clone(), ran.clone());
    let first = timer
        .new_timeout(
            move |t: &Timeout| {
                let timer = t.timer().unwrap();
                let mut task = r.task();
                timer.new_timeout(move |t| task(t), Duration::ZERO).unwrap();
                assert!(v.cancel());
                assert!(!t.reset(MS), "a fired timeout cannot be reset");
                *sr.lock().unwrap() = Some(timer.stop().map(|v| v.len()));
            },
            MS,
        )
        .unwrap();
    let periodic = timer
        .schedule_with_fixed_delay(ran.task(), MS, MS * 2)
        .unwrap();
    within("advance", {
        let timer = timer.clone();
        move || timer.advance(MS * 10)
    });
    assert_eq!(
        *stop_result.lock().unwrap(),
        Some(Err(TimerError::StopFromTimerTask))
    );
    assert!(first.is_expired() && victim.is_cancelled() && periodic.is_pending());
    assert_eq!(
        ran.get(),
        1 + 5,
        "the zero-delay one, and runs at 1, 3, 5, 7, 9"
    );
    assert_stats_add_up(&timer);
    let s = timer.stats();
    assert_eq!((s.scheduled, s.fired, s.cancelled), (4, 2, 1));
    assert_eq!(timer.stop().unwrap(), vec![periodic.clone()]);
    assert!(periodic.is_stopped());
    assert_stats_add_up(&timer);
}

/// An executor that drops a job unrun, panics after queueing one, or runs one and then panics:
/// nothing is lost, nothing counted twice.
#[test]
fn hostile_executors_lose_nothing() {
    let queue = QueueExecutor::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let (q, c) = (queue.clone(), calls.clone());
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .executor(move |job: Job| match c.fetch_add(1, Ordering::SeqCst) % 4 {
            0 => drop(job),
            1 => {
                q.execute(job);
                panic!("after queueing");
            }
            2 => {
                job();
                panic!("after running");
            }
            _ => q.execute(job),
        })
        .build()
        .unwrap();
    let ran = Counter::default();
    let ts: Vec<_> = (0..40)
        .map(|i| {
            let mut task = ran.task();
            timer
                .new_timeout(move |t| task(t), MS * (1 + i % 5))
                .unwrap()
        })
        .collect();
    timer.advance(MS * 5);
    assert_eq!(calls.load(Ordering::SeqCst), 40);
    assert_eq!(ran.get(), 10, "those run inline");
    assert!(queue.run_all() >= 10);
    assert_eq!(ran.get(), 30, "and the queued ones");
    let dropped = ts.iter().filter(|t| t.is_stopped()).count();
    assert_eq!(dropped, 10, "dropped jobs end stopped");
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
    assert_stats_add_up(&timer);
}

// --- the pending limit at its boundary, periodic tasks ended from every side ---

/// Producers race one-shot and periodic schedules, cancels and resets against a limit of 32 while
/// another thread advances the clock. The count never passes the limit, a refusal names it, and
/// at the end every accepted timeout ran, was cancelled, or was returned by `stop()`.
#[test]
fn the_pending_limit_holds_under_racing_producers_cancels_resets_and_fires() {
    const MAX: usize = 32;
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(MAX)
        .build()
        .unwrap();
    let runs = Counter::default();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let advancer = {
        let (timer, done) = (timer.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                timer.advance(MS);
                assert!(timer.pending_timeouts() <= MAX);
            }
        })
    };
    let producers: Vec<_> = (0..4u64)
        .map(|seed| {
            let (timer, runs) = (timer.clone(), runs.clone());
            thread::spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed);
                let (mut one_shots, mut periodics) = (Vec::new(), Vec::new());
                let (mut cancelled, mut refused) = ([0usize; 2], 0);
                for _ in 0..3000 {
                    match rng.u8(0..10) {
                        0..=4 => {
                            let mut task = runs.task();
                            let delay = MS * rng.u32(0..5);
                            match timer.new_timeout(move |t| task(t), delay) {
                                Ok(t) => one_shots.push(t),
                                Err(TimerError::AtCapacity { pending, max }) => {
                                    assert_eq!((pending, max), (MAX, MAX));
                                    refused += 1;
                                }
                                Err(e) => panic!("{e}"),
                            }
                        }
                        5 => match timer.schedule_at_fixed_rate(|_| {}, MS, MS * rng.u32(1..4)) {
                            Ok(t) => periodics.push(t),
                            Err(e) => assert!(matches!(e, TimerError::AtCapacity { .. })),
                        },
                        6 | 7 if !one_shots.is_empty() => {
                            let t = &one_shots[rng.usize(..one_shots.len())];
                            cancelled[0] += usize::from(t.cancel());
                        }
                        8 if !periodics.is_empty() => {
                            let t = &periodics[rng.usize(..periodics.len())];
                            cancelled[1] += usize::from(t.cancel());
                        }
                        _ if !one_shots.is_empty() => {
                            let t = &one_shots[rng.usize(..one_shots.len())];
                            let _ = t.reset(MS * rng.u32(0..5));
                        }
                        _ => {}
                    }
                    assert!(timer.pending_timeouts() <= MAX);
                }
                (one_shots, periodics, cancelled, refused)
            })
        })
        .collect();
    let results: Vec<_> = producers.into_iter().map(|p| p.join().unwrap()).collect();
    done.store(true, Ordering::SeqCst);
    advancer.join().unwrap();
    assert!(
        results.iter().map(|r| r.3).sum::<usize>() > 0,
        "the limit was reached"
    );
    let stopped = timer.stop().unwrap();
    let one_shots: Vec<&Timeout> = results.iter().flat_map(|r| &r.0).collect();
    let periodics: Vec<&Timeout> = results.iter().flat_map(|r| &r.1).collect();
    let cancels = |i: usize| results.iter().map(|r| r.2[i]).sum::<usize>();
    let returned = |set: &[&Timeout]| set.iter().filter(|t| stopped.contains(t)).count();
    assert_eq!(
        one_shots.len(),
        runs.get() + cancels(0) + returned(&one_shots),
        "each one-shot ran, was cancelled, or was returned"
    );
    assert_eq!(periodics.len(), cancels(1) + returned(&periodics));
    assert_eq!(stopped.len(), returned(&one_shots) + returned(&periodics));
    let s = timer.stats();
    assert_eq!(s.scheduled as usize, one_shots.len() + periodics.len());
    assert_eq!(s.fired as usize, runs.get());
    assert_eq!(s.cancelled as usize, cancels(0) + cancels(1));
    assert_eq!(s.stopped as usize, stopped.len());
    assert_stats_add_up(&timer);
}

/// While a periodic run is under way on the advancing thread, one thread cancels it and another
/// stops the timer. The run finishes; the task ends cancelled (if the cancel won) or stopped, and
/// is counted once either way, even when a cancel follows the stop that returned it.
#[test]
fn a_periodic_run_cancelled_and_stopped_from_two_threads_at_once_ends_once() {
    for round in 0..100 {
        let timer = manual();
        let start = timer.now();
        let (entered, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let runs = Counter::default();
        let (e, r, mut count) = (entered.clone(), release.clone(), runs.task());
        let t = timer
            .schedule_with_fixed_delay(
                move |t: &Timeout| {
                    count(t);
                    if t.scheduled_execution_time() == start + MS {
                        e.wait(); // the first run only: a second may start before the stop
                        r.wait();
                    }
                },
                MS,
                MS,
            )
            .unwrap();
        let advancer = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(MS * 5))
        };
        entered.wait();
        let go = Arc::new(Barrier::new(3));
        let canceller = {
            let (t, go) = (t.clone(), go.clone());
            thread::spawn(move || {
                go.wait();
                t.cancel()
            })
        };
        let stopper = {
            let (timer, go) = (timer.clone(), go.clone());
            thread::spawn(move || {
                go.wait();
                timer.stop().unwrap()
            })
        };
        go.wait();
        if round % 2 == 0 {
            thread::yield_now();
        }
        release.wait();
        advancer.join().unwrap();
        let won = canceller.join().unwrap();
        let returned = stopper.join().unwrap();
        let ran = runs.get();
        // A run under way is not returned; the task is if its run ended before the stop began.
        assert!(
            returned.is_empty() || returned == [t.clone()],
            "round {round}"
        );
        assert_eq!(won, t.is_cancelled(), "round {round}");
        assert!(t.is_cancelled() != t.is_stopped(), "round {round}");
        assert!(!t.is_panicked() && runs.get() == ran, "round {round}");
        assert_eq!(timer.pending_timeouts(), 0, "round {round}");
        let s = timer.stats();
        assert_eq!((s.scheduled, s.fired), (1, 0), "round {round}");
        assert_eq!(s.cancelled + s.stopped, 1, "round {round}: {s:?}");
        assert_stats_add_up(&timer);
    }
}

/// `stop()` from a task of another timer nested in this timer's task on an executor thread: it is
/// still called from a task running on this timer (its docs: `StopFromTimerTask`).
#[test]
fn stop_from_another_timers_task_nested_in_this_timers_job_on_an_executor_is_refused() {
    let queue = QueueExecutor::default();
    let a = queue.timer(MS);
    let b = manual();
    let got = Arc::new(Mutex::new(None));
    let (a2, b2, got2) = (a.clone(), b.clone(), got.clone());
    b.new_timeout(
        move |_| *got2.lock().unwrap() = Some(a2.stop().map(|v| v.len())),
        MS,
    )
    .unwrap();
    a.new_timeout(move |_| b2.advance(MS), MS).unwrap();
    a.advance(MS);
    assert_eq!(queue.run_all(), 1);
    assert_eq!(
        *got.lock().unwrap(),
        Some(Err(TimerError::StopFromTimerTask))
    );
    assert!(!a.is_shutdown());
}

/// An executor that drops every job inline, on the worker thread; the dropped task holds the last
/// handle. The handle goes on the worker (with the task) and the worker still ends.
#[test]
fn the_worker_ends_when_an_executor_drops_the_job_holding_the_last_handle() {
    let name = "h32-drop-job";
    let timer = HashedWheelTimer::builder()
        .thread_name(name)
        .executor(drop::<Job>)
        .build()
        .unwrap();
    let last = timer.clone();
    let t = timer.new_timeout(move |_| drop(last), MS).unwrap();
    drop(timer);
    assert!(
        eventually(|| t.is_stopped()),
        "the dropped job ended it stopped"
    );
    assert_eq!(
        threads_named(name),
        1,
        "the task, kept for take_task, keeps the timer"
    );
    drop(t);
    assert!(eventually(|| threads_named(name) == 0), "the worker ended");
}

/// A `tokio_clock()` timer's driver task ends with the last handle, whichever way it goes.
#[test]
fn a_tokio_clock_timers_driver_task_ends_with_the_last_handle() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let alive = || rt.metrics().num_alive_tasks();
    for in_task in [false, true] {
        let timer = {
            let _entered = rt.enter();
            HashedWheelTimer::builder().tokio_clock().build().unwrap()
        };
        assert_eq!(alive(), 1, "its driver");
        timer
            .new_timeout(|_| {}, Duration::from_secs(3600))
            .unwrap();
        if in_task {
            let last = timer.clone();
            timer.new_timeout(move |_| drop(last), MS).unwrap();
            drop(timer);
        } else {
            drop(timer);
        }
        rt.block_on(async { tokio::time::sleep(MS * 10).await });
        assert_eq!(alive(), 0, "in_task {in_task}: the driver task ended");
    }
}

/// Tasks whose destructors panic, waiting on an executor when the timer stops: `stop()` returns
/// them, their jobs never run them, and no panic escapes a job or the handles' drop.
#[test]
fn tasks_that_panic_in_drop_waiting_on_an_executor_at_stop() {
    struct Bomb(Arc<AtomicUsize>);
    impl Drop for Bomb {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            panic!("bomb");
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let bombs = |timer: &HashedWheelTimer, n: u32| -> Vec<Timeout> {
        (0..n)
            .map(|i| {
                let bomb = Bomb(dropped.clone());
                let task = move |_: &Timeout| {
                    let _keep = &bomb;
                };
                match i % 2 {
                    0 => timer.new_timeout(task, MS).unwrap(),
                    _ => timer.schedule_at_fixed_rate(task, MS, MS).unwrap(),
                }
            })
            .collect()
    };
    let queue = QueueExecutor::default();
    let timer = queue.timer(MS);
    let ts = bombs(&timer, 10);
    timer.advance(MS);
    assert_eq!(queue.len(), 10);
    let returned = timer.stop().unwrap();
    assert_eq!(returned.len(), 10, "every waiting job");
    assert_eq!(queue.run_all(), 10, "jobs that find their task taken back");
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "kept for take_task");
    drop((returned, ts));
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        10,
        "dropped with their last handles"
    );
    assert_stats_add_up(&timer);
}

/// At a limit of one: a one-shot frees its place when it fires, so its own run (inline on an
/// executor) may schedule the next.
#[test]
fn at_a_limit_of_one_a_fired_one_shot_frees_its_place_before_it_runs() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(1)
        .executor(|job: Job| job())
        .build()
        .unwrap();
    let chain = Counter::default();
    fn next(timer: &HashedWheelTimer, chain: Counter) {
        let mut count = chain.task();
        timer
            .new_timeout(
                move |t: &Timeout| {
                    count(t);
                    next(&t.timer().unwrap(), chain.clone());
                },
                MS,
            )
            .unwrap();
    }
    next(&timer, chain.clone());
    timer.advance(MS * 5);
    assert_eq!(chain.get(), 5);
    assert_eq!(timer.pending_timeouts(), 1);
    assert_eq!(timer.stop().unwrap().len(), 1);
    assert_stats_add_up(&timer);
}
