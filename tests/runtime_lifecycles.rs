//! Tokio-clock timers across the lives of their runtimes: the last handle dropped in the
//! runtime's own task or in a task dropped at its shutdown, a runtime blocked in place while plain
//! threads schedule, paused runtimes nested in `spawn_blocking`, long advances under periodic work.

mod common;

use common::paused::{ms, paused_runtime, settle, tokio_clock};
use common::{assert_stats_add_up, within, Counter};
use hashed_wheel_timer::HashedWheelTimer;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

fn runtimes() -> Vec<(&'static str, tokio::runtime::Runtime)> {
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    vec![
        ("paused", paused_runtime()),
        ("current", current),
        ("multi", multi),
    ]
}

/// The last handle of a timer dropped in a task of its own runtime, with sleeps and callbacks
/// pending: the task ends, no panic, the runtime keeps running, the counts add up.
#[test]
fn the_last_handle_dropped_in_a_task_of_its_own_runtime() {
    for (name, runtime) in runtimes() {
        within(name, move || {
            let fired = Counter::default();
            let (timer, stats) = runtime.block_on(async {
                let timer = tokio_clock();
                let stats = timer.clone();
                for i in 0..10 {
                    timer.new_timeout(fired.task(), ms(1 + i * 1000)).unwrap();
                }
                let sleeper = tokio::spawn(timer.sleep(HOUR));
                settle().await;
                let dropped = tokio::spawn(async move { drop(timer) });
                dropped.await.expect("the drop panicked");
                let _ = tokio::time::timeout(ms(100), sleeper).await;
                tokio::time::sleep(ms(5)).await;
                (stats.is_shutdown(), stats)
            });
            // One handle is left (`stats`): the timer still runs.
            assert!(!timer, "{name}");
            drop(runtime);
            assert!(stats.is_shutdown(), "{name}");
            assert_stats_add_up(&stats);
            assert_eq!(stats.pending_timeouts(), 0, "{name}");
        });
    }
}

/// The only handle, dropped in a task of its own runtime while callbacks and sleeps are pending.
#[test]
fn the_only_handle_dropped_in_a_task_of_its_own_runtime() {
    for (name, runtime) in runtimes() {
        within(name, move || {
            runtime.block_on(async {
                let timer = tokio_clock();
                let t = timer.new_timeout(|_| {}, HOUR).unwrap();
                let sleeper = tokio::spawn(timer.sleep(HOUR));
                settle().await;
                tokio::spawn(async move { drop(timer) })
                    .await
                    .expect("the drop panicked");
                let slept = tokio::time::timeout(ms(100), sleeper).await;
                assert!(!t.is_expired(), "{name}");
                // The spawned sleep holds a handle of its own: the timer runs until it ends.
                // The sleep ended at once (runtime gone) or waits: either way no panic.
                if let Ok(r) = slept {
                    r.expect("the sleep panicked");
                }
                tokio::time::sleep(ms(5)).await;
            });
        });
    }
}

/// The last handle held by a task the runtime drops as it shuts down: no panic, no hang.
#[test]
fn the_last_handle_held_by_a_task_dropped_at_shutdown() {
    for how in 0..3 {
        for (name, runtime) in runtimes() {
            within(name, move || {
                let probe = runtime.block_on(async {
                    let timer = tokio_clock();
                    let probe = timer.new_timeout(|_| {}, HOUR).unwrap();
                    let held = timer.clone();
                    tokio::spawn(async move {
                        let _held = held;
                        std::future::pending::<()>().await
                    });
                    tokio::spawn(timer.sleep(HOUR));
                    tokio::spawn(timer.timeout(HOUR, std::future::pending::<()>()));
                    let mut iv = timer.interval(ms(3));
                    tokio::spawn(async move {
                        loop {
                            iv.tick().await;
                        }
                    });
                    settle().await;
                    probe
                });
                match how {
                    0 => runtime.shutdown_timeout(Duration::from_secs(5)),
                    1 => runtime.shutdown_background(),
                    _ => drop(runtime),
                }
                let start = std::time::Instant::now();
                while probe.timer().is_some_and(|t| !t.is_shutdown()) {
                    assert!(start.elapsed() < Duration::from_secs(10), "{name} {how}");
                    std::thread::yield_now();
                }
                assert!(!probe.is_expired());
            });
        }
    }
}

/// Plain threads schedule callbacks on a multi-thread runtime's tokio-clock timer while a task
/// blocks in place, and while the runtime is busy: every callback runs.
#[test]
fn callbacks_from_plain_threads_while_the_runtime_blocks_in_place() {
    within("block_in_place", || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let timer = runtime.block_on(async { tokio_clock() });
        let fired = Counter::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let blocker = runtime.spawn(async move {
            tokio::task::block_in_place(|| rx.recv().unwrap());
        });
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (timer, fired) = (timer.clone(), fired.clone());
                std::thread::spawn(move || {
                    for i in 0..50 {
                        timer.new_timeout(fired.task(), ms(i % 5)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        while fired.get() < 200 {
            std::thread::sleep(ms(1));
        }
        tx.send(()).unwrap();
        runtime.block_on(blocker).unwrap();
        assert_stats_add_up(&timer);
    });
}

/// A current-thread runtime started paused, nested in `spawn_blocking` of another runtime: its
/// timer's sleeps auto-advance and its callbacks run; dropping it there leaves no hang.
#[test]
fn a_paused_runtime_nested_in_spawn_blocking() {
    within("nested", || {
        let outer = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let outer_timer = outer.block_on(async { tokio_clock() });
        let (timer, real) = outer.block_on(async move {
            tokio::task::spawn_blocking(move || {
                let inner = paused_runtime();
                let timer = inner.block_on(async {
                    let timer = tokio_clock();
                    let fired = Counter::default();
                    timer.new_timeout(fired.task(), HOUR).unwrap();
                    let start = tokio::time::Instant::now();
                    timer.sleep(HOUR * 2).await;
                    assert!(start.elapsed() >= HOUR * 2);
                    assert_eq!(fired.get(), 1);
                    let mut iv = timer.interval(HOUR);
                    for _ in 0..5 {
                        iv.tick().await;
                    }
                    outer_timer.sleep(ms(2)).await;
                    timer
                });
                drop(inner);
                (timer, outer_timer)
            })
            .await
            .unwrap()
        });
        assert!(timer.is_shutdown());
        assert_stats_add_up(&timer);
        assert!(!real.is_shutdown());
    });
}

/// `tokio::time::advance` past many ticks with fixed-rate and fixed-delay tasks and intervals:
/// each catches up as on tokio's clock (a fixed-rate task and a burst interval run once per
/// period missed), none runs early.
#[tokio::test(start_paused = true)]
async fn a_long_advance_under_periodic_tasks_and_intervals() {
    let timer = tokio_clock();
    let rate = Counter::default();
    let delay = Counter::default();
    let _a = timer
        .schedule_at_fixed_rate(rate.task(), ms(10), ms(10))
        .unwrap();
    let _b = timer
        .schedule_with_fixed_delay(delay.task(), ms(10), ms(10))
        .unwrap();
    let mut iv = timer.interval(ms(10));
    let mut tokio_iv = tokio::time::interval(ms(10));
    iv.tick().await;
    tokio_iv.tick().await;
    tokio::time::advance(ms(1000)).await;
    settle().await;
    let mut ours = 0;
    let mut theirs = 0;
    while futures::poll!(Box::pin(iv.tick())).is_ready() {
        ours += 1;
    }
    while futures::poll!(Box::pin(tokio_iv.tick())).is_ready() {
        theirs += 1;
    }
    assert_eq!(ours, theirs, "interval ticks after the advance");
    tokio::time::sleep(ms(1000)).await;
    // Fixed rate catches up to 200 runs by 2 s; fixed delay at least 100.
    assert!(
        rate.get() >= 199 && rate.get() <= 201,
        "fixed rate: {}",
        rate.get()
    );
    assert!(delay.get() >= 100, "fixed delay: {}", delay.get());
}

/// Auto-advance with only this crate's callbacks pending: the runtime jumps to their deadlines.
#[tokio::test(start_paused = true)]
async fn auto_advance_reaches_a_callbacks_deadline() {
    let timer = tokio_clock();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let start = tokio::time::Instant::now();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), HOUR)
        .unwrap();
    rx.await.unwrap();
    assert!(start.elapsed() >= HOUR && start.elapsed() <= HOUR + ms(2));
}

/// A timer built on a runtime, used from another runtime's tasks while its own is shut down in
/// the background: futures end (runtime gone) or wait; none hangs or panics.
#[test]
fn futures_on_another_runtime_while_the_timers_runtime_shuts_down() {
    within("other runtime", || {
        let home = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let timer = home.block_on(async { tokio_clock() });
        let other = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let tasks: Vec<_> = (0..8u64)
            .map(|i| {
                let timer = timer.clone();
                other.spawn(async move {
                    let _ = timer.timeout(ms(50 + i), timer.sleep(HOUR)).await;
                    let mut iv = timer.interval(ms(2));
                    for _ in 0..5 {
                        iv.tick().await;
                    }
                })
            })
            .collect();
        other.block_on(async { tokio::time::sleep(ms(10)).await });
        home.shutdown_background();
        other.block_on(async {
            for t in tasks {
                tokio::time::timeout(Duration::from_secs(10), t)
                    .await
                    .expect("a future hangs")
                    .unwrap();
            }
        });
        assert_stats_add_up(&timer);
    });
}

/// A real-clock timer's callback drops a runtime one of whose tasks holds that timer's last
/// handle: the worker thread, dropping its own timer, neither waits for itself nor panics.
#[test]
fn a_callback_drops_the_runtime_holding_its_timers_last_handle() {
    within("chain", || {
        let runtime = paused_runtime();
        let timer = HashedWheelTimer::new();
        let tokio_timer = runtime.block_on(async { tokio_clock() });
        let probe = timer.new_timeout(|_| {}, HOUR).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let slot_handle = runtime.handle().clone();
        let slot = std::sync::Mutex::new(Some(runtime));
        timer
            .new_timeout(
                move |_| {
                    drop(slot.lock().unwrap().take());
                    tx.send(()).unwrap();
                },
                ms(20),
            )
            .unwrap();
        // Hand the last handle to a task of the runtime, which the callback drops.
        let entered = slot_handle.enter();
        tokio::spawn(async move {
            let _held = timer;
            std::future::pending::<()>().await
        });
        drop(entered);
        rx.recv().unwrap();
        assert!(tokio_timer.is_shutdown());
        let start = std::time::Instant::now();
        while probe.timer().is_some() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the timer outlived its handles"
            );
            std::thread::yield_now();
        }
        assert!(!probe.is_expired());
    });
}

/// `tokio::time::pause()` after the timer was built, then `advance` and `resume`: the timer
/// follows tokio's clock throughout.
#[tokio::test(flavor = "current_thread")]
async fn pause_and_resume_after_the_timer_was_built() {
    let timer = tokio_clock();
    tokio::time::pause();
    let start = tokio::time::Instant::now();
    let fired = Counter::default();
    timer.new_timeout(fired.task(), HOUR).unwrap();
    timer.sleep(HOUR * 2).await;
    assert_eq!(fired.get(), 1);
    assert!(start.elapsed() >= HOUR * 2);
    tokio::time::resume();
    let real = std::time::Instant::now();
    timer.sleep(ms(20)).await;
    assert!(real.elapsed() >= ms(20));
}

/// After a long advance, each missed-tick behaviour ticks as tokio's interval does.
#[tokio::test(start_paused = true)]
async fn missed_tick_behaviours_after_a_long_advance_match_tokio() {
    use hashed_wheel_timer::MissedTickBehavior as Ours;
    use tokio::time::MissedTickBehavior as Theirs;
    let timer = tokio_clock();
    for (ours, theirs) in [
        (Ours::Burst, Theirs::Burst),
        (Ours::Delay, Theirs::Delay),
        (Ours::Skip, Theirs::Skip),
    ] {
        let mut a = timer.interval(ms(10));
        a.set_missed_tick_behavior(ours);
        let mut b = tokio::time::interval(ms(10));
        b.set_missed_tick_behavior(theirs);
        let start = tokio::time::Instant::now();
        a.tick().await;
        b.tick().await;
        tokio::time::advance(ms(1003)).await;
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        for _ in 0..120 {
            let (x, y) = tokio::join!(a.tick(), b.tick());
            ta.push(tokio::time::Instant::from(x) - start);
            tb.push(y - start);
        }
        assert_eq!(ta, tb, "{ours:?}");
    }
}

/// Plain threads schedule callbacks on a tokio-clock timer while its runtime shuts down three
/// ways, one callback running slowly: each call is refused or its timeout fires or is stopped,
/// the counts add up, and every callback counted as fired ran once. A timeout the driver's turn
/// holds behind that callback stays pending, and in `scheduled`, until the turn stops it.
#[test]
fn plain_threads_schedule_while_the_runtime_shuts_down() {
    for how in 0..3 {
        within("shutdown race", move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let timer = runtime.block_on(async { tokio_clock() });
            let fired = Counter::default();
            let (started, slow_runs) = std::sync::mpsc::channel();
            let (release, released) = std::sync::mpsc::channel::<()>();
            timer
                .new_timeout(
                    move |_| {
                        started.send("started").unwrap();
                        let _ = released.recv_timeout(Duration::from_secs(10));
                        started.send("returned").unwrap();
                    },
                    ms(1),
                )
                .unwrap();
            // Due with the slow callback, after it: the turn holds it while the callback runs.
            let behind = timer.new_timeout(|_| {}, ms(1)).unwrap();
            let threads: Vec<_> = (0..3)
                .map(|_| {
                    let (timer, fired) = (timer.clone(), fired.clone());
                    std::thread::spawn(move || {
                        let mut made = Vec::new();
                        for i in 0.. {
                            match timer.new_timeout(fired.task(), ms(i % 4)) {
                                Ok(t) => made.push(t),
                                Err(e) => {
                                    assert_eq!(e, hashed_wheel_timer::TimerError::Shutdown);
                                    return made;
                                }
                            }
                            if i % 64 == 0 {
                                std::thread::yield_now();
                            }
                        }
                        made
                    })
                })
                .collect();
            // Shut down while the slow callback runs: wait for it to start, not for a wall-clock
            // guess (on a loaded machine 20 ms was once not enough for the driver to run at all).
            let slow_callback = || slow_runs.recv_timeout(Duration::from_secs(10));
            assert_eq!(slow_callback(), Ok("started"));
            match how {
                0 => runtime.shutdown_timeout(ms(1)),
                1 => runtime.shutdown_background(),
                _ => {
                    release.send(()).unwrap(); // dropping the runtime waits for its workers
                    drop(runtime)
                }
            }
            // A runtime that shuts down while its worker runs the callback may drop the timer's
            // driver task only once that poll returns: the check below runs if it did not wait.
            let start = std::time::Instant::now();
            while !timer.is_shutdown() && start.elapsed() < ms(200) {
                std::thread::yield_now();
            }
            let shut_while_held = timer.is_shutdown() && behind.is_pending();
            if !shut_while_held {
                let _ = release.send(()); // way 2 sent it already
            }
            let made: Vec<_> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            let scheduled = made.len() + 2; // and the slow callback, and `behind`
            if shut_while_held {
                // Held by a turn yet to see the shutdown (or stopped since, by the shutdown's
                // drain): pending, or counted where it ended; in `scheduled` either way.
                let (s, pending) = (timer.stats(), timer.pending_timeouts());
                assert!(s.scheduled as usize >= scheduled, "way {how}: {s:?}");
                let held = behind.is_pending(); // read last: it was pending at both reads
                assert!(!held || pending >= 1, "way {how}: {s:?}");
                release.send(()).unwrap();
            }
            assert_eq!(slow_callback(), Ok("returned"));
            // The driver's turn may still hold keys due behind the slow callback: it stops and
            // counts them after the callback returns. Wait (10 s at most) for every timeout made
            // to end and for the totals to count each.
            let start = std::time::Instant::now();
            let settled = || {
                let s = timer.stats();
                timer.is_shutdown()
                    && made.iter().chain([&behind]).all(|t| !t.is_pending())
                    && (s.fired + s.stopped + s.cancelled) as usize == scheduled
            };
            while !settled() {
                if start.elapsed() > Duration::from_secs(10) {
                    let pending: Vec<_> = made.iter().filter(|t| t.is_pending()).collect();
                    panic!("way {how}: never ended: {:?} {pending:?}", timer.stats());
                }
                std::thread::yield_now();
            }
            assert_stats_add_up(&timer);
            let expired = made.iter().filter(|t| t.is_expired()).count();
            assert_eq!(expired, fired.get(), "way {how}");
            let s = timer.stats();
            let behind_fired = usize::from(behind.is_expired());
            assert_eq!(
                s.fired as usize,
                fired.get() + 1 + behind_fired,
                "way {how}: {s:?}"
            );
            assert_eq!(s.scheduled as usize, scheduled, "way {how}: {s:?}");
        });
    }
}

/// Two timers' callbacks, running at once, each drop the other timer's last handle (a real-clock
/// pair, and a tokio-clock pair on a multi-thread runtime): neither drop waits for the other
/// timer's driver, which is waiting for it.
#[test]
fn two_timers_callbacks_drop_each_others_last_handle() {
    for tokio in [false, true] {
        within("cross drop", move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let make = || match tokio {
                true => runtime.block_on(async { tokio_clock() }),
                false => HashedWheelTimer::new(),
            };
            let (a, b) = (make(), make());
            // Each callback waits (a while: two drivers of one runtime may share a worker) for
            // the other to start, so that both drops come at once. The real-clock pair must both
            // run, so it waits up to 10 s (was 500 ms) for a worker thread held off the CPU; the
            // tokio pair keeps 500 ms, which it waits out whenever its drivers share a worker.
            let patience = if tokio {
                ms(500)
            } else {
                Duration::from_secs(10)
            };
            let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (tx, rx) = std::sync::mpsc::channel();
            for (mine, other) in [(a.clone(), b.clone()), (b, a)] {
                let (started, tx) = (started.clone(), tx.clone());
                let mut other = Some(other);
                let task = move |_: &hashed_wheel_timer::Timeout| {
                    started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let begun = std::time::Instant::now();
                    while started.load(std::sync::atomic::Ordering::SeqCst) < 2
                        && begun.elapsed() < patience
                    {
                        std::thread::yield_now();
                    }
                    drop(other.take());
                    tx.send(()).unwrap();
                };
                mine.new_timeout(task, ms(5)).unwrap();
            }
            drop(tx);
            // On one worker, the first callback's drop may stop the second before it runs.
            let ran = rx.iter().count();
            assert!(ran == 2 || tokio && ran == 1, "tokio: {tokio}, ran: {ran}");
        });
    }
}
