//! Invariants 3 and 5: nothing lost, counted once, in every path; the
//! pending limit; `stop()` returns exactly what never ran.

mod common;

use common::{manual, Fired};
use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use std::collections::HashSet;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

#[test]
fn pending_goes_down_once_when_it_fires() {
    let timer = manual(MS);
    let fired = Fired::default();
    let t = fired.schedule(&timer, 0, MS * 5);
    assert_eq!(timer.pending_timeouts(), 1);
    timer.advance(MS * 5);
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(!t.cancel(), "cannot cancel what fired");
    assert_eq!(timer.pending_timeouts(), 0);
    assert_eq!(fired.count(), 1);
}

#[test]
fn pending_goes_down_once_when_cancelled_before_transfer() {
    let timer = manual(MS);
    let t = timer.new_timeout(|_| panic!("cancelled"), MS * 5).unwrap();
    assert!(t.cancel());
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(!t.cancel());
    timer.advance(MS * 10); // the worker-side drop of the entry must not count again
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(t.is_cancelled() && !t.is_expired());
}

#[test]
fn pending_goes_down_once_when_cancelled_after_transfer() {
    let timer = manual(MS);
    let t = timer.new_timeout(|_| panic!("cancelled"), MS * 50).unwrap();
    let other = timer.new_timeout(|_| {}, MS * 60).unwrap();
    timer.advance(MS); // both now sit in buckets
    assert_eq!(timer.pending_timeouts(), 2);
    assert!(t.cancel());
    assert_eq!(timer.pending_timeouts(), 1);
    timer.advance(MS); // removal from the bucket must not count again
    assert_eq!(timer.pending_timeouts(), 1);
    timer.advance(MS * 100);
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(other.is_expired());
}

#[test]
fn pending_goes_down_once_when_returned_by_stop() {
    let timer = manual(MS);
    let in_bucket = timer.new_timeout(|_| {}, MS * 50).unwrap();
    timer.advance(MS);
    let in_queue = timer.new_timeout(|_| {}, MS * 40).unwrap();
    assert_eq!(timer.pending_timeouts(), 2);
    let stopped = timer.stop().unwrap();
    assert_eq!(
        stopped,
        vec![in_queue.clone(), in_bucket.clone()],
        "by deadline"
    );
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(in_bucket.is_stopped() && !in_bucket.is_expired());
    // Cancelling a stopped timeout succeeds once but does not count again.
    assert!(in_bucket.cancel());
    assert!(!in_bucket.cancel());
    assert_eq!(timer.pending_timeouts(), 0);
    timer.advance(MS * 1000);
    assert!(!in_queue.is_expired(), "stopped timeouts never fire");
}

#[test]
fn stop_returns_exactly_what_neither_fired_nor_was_cancelled() {
    let timer = manual(MS);
    let fired = Fired::default();
    let mut all = Vec::new();
    for i in 0..300 {
        all.push(fired.schedule(&timer, i, MS * (i as u32 % 97)));
    }
    timer.advance(MS * 20);
    for t in all.iter().step_by(3) {
        t.cancel();
    }
    for i in 300..400 {
        all.push(fired.schedule(&timer, i, MS * (i as u32 % 13)));
    }
    let stopped: HashSet<Timeout> = timer.stop().unwrap().into_iter().collect();
    let fired_labels: HashSet<usize> = fired.labels().into_iter().collect();
    for (i, t) in all.iter().enumerate() {
        let outcomes = [
            fired_labels.contains(&i),
            t.is_cancelled(),
            stopped.contains(t),
        ];
        assert_eq!(
            outcomes.iter().filter(|&&o| o).count(),
            1,
            "timeout {i} must end exactly one way: fired/cancelled/stopped = {outcomes:?}"
        );
        assert_eq!(fired_labels.contains(&i), t.is_expired());
    }
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn second_stop_is_empty_and_new_timeouts_are_refused() {
    let timer = manual(MS);
    timer.new_timeout(|_| {}, MS).unwrap();
    assert_eq!(timer.stop().unwrap().len(), 1);
    assert!(timer.stop().unwrap().is_empty());
    assert!(timer.is_shutdown());
    let err = timer.new_timeout(|_| {}, MS).unwrap_err();
    assert_eq!(err, TimerError::Shutdown);
    assert!(err.is_shutdown());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn max_pending_limit_refuses_and_leaves_the_count_alone() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(3)
        .build()
        .unwrap();
    let ts: Vec<_> = (0..3)
        .map(|_| timer.new_timeout(|_| {}, MS * 10).unwrap())
        .collect();
    let err = timer.new_timeout(|_| {}, MS).unwrap_err();
    assert!(err.is_at_capacity());
    assert_eq!(err, TimerError::AtCapacity { pending: 3, max: 3 });
    assert_eq!(timer.pending_timeouts(), 3);
    // Room comes back when one is cancelled, or fires.
    assert!(ts[0].cancel());
    let again = timer.new_timeout(|_| {}, MS * 5).unwrap();
    assert!(timer.new_timeout(|_| {}, MS).is_err());
    timer.advance(MS * 5);
    assert!(again.is_expired());
    assert!(timer.new_timeout(|_| {}, MS).is_ok());
    // Nothing accepted was lost.
    timer.advance(MS * 100);
    assert!(ts[1].is_expired() && ts[2].is_expired());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn stop_from_inside_a_task_is_an_error_not_a_deadlock() {
    let timer = manual(MS);
    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .new_timeout(move |t| tx.send(t.timer().unwrap().stop()).unwrap(), MS)
        .unwrap();
    timer.advance(MS);
    assert_eq!(rx.try_recv().unwrap(), Err(TimerError::StopFromTimerTask));
    assert!(!timer.is_shutdown());
}

#[test]
fn stop_from_inside_a_task_on_the_worker_thread_is_an_error() {
    let timer = HashedWheelTimer::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let inner = timer.clone();
    timer
        .new_timeout(move |_| tx.send(inner.stop()).unwrap(), MS)
        .unwrap();
    let got = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the task ran");
    assert_eq!(got, Err(TimerError::StopFromTimerTask));
    assert!(timer.stop().is_ok(), "stop from outside still works");
}

#[test]
fn real_clock_stop_returns_far_timeouts() {
    let timer = HashedWheelTimer::new();
    let fired = Fired::default();
    let ts: Vec<_> = (0..1000)
        .map(|i| fired.schedule(&timer, i, Duration::from_secs(3600 + i as u64)))
        .collect();
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped, ts, "all of them, in deadline order");
    assert_eq!(fired.count(), 0);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn stopped_tasks_can_be_taken_and_run() {
    let timer = manual(MS);
    let fired = Fired::default();
    let t = fired.schedule(&timer, 7, MS * 10);
    assert!(t.take_task().is_none(), "a pending timeout keeps its task");
    let stopped = timer.stop().unwrap();
    let task = stopped[0]
        .take_task()
        .expect("a stopped timeout gives its task");
    task.run(&stopped[0]);
    assert_eq!(fired.labels(), vec![7]);
    assert!(stopped[0].take_task().is_none(), "only once");
}

/// A flood past the drain cap is filed in several turns, each of which
/// expires what is due before filing more: none fires early, none is lost.
#[test]
fn a_flood_beyond_the_drain_cap_fires_never_early_and_loses_nothing() {
    use hashed_wheel_timer::DRAIN_CAP_PER_TICK;
    let timer = manual(MS);
    let fired = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let early = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let total = DRAIN_CAP_PER_TICK * 2 + 17;
    for n in 0..total {
        let (fired, early) = (fired.clone(), early.clone());
        timer
            .new_timeout(
                move |t: &Timeout| {
                    if t.timer().unwrap().now() < t.deadline() {
                        early.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    fired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                },
                MS * (n % 2) as u32,
            )
            .unwrap();
    }
    timer.advance(Duration::ZERO);
    assert_eq!(
        fired.load(std::sync::atomic::Ordering::Relaxed),
        total.div_ceil(2),
        "those of zero delay are due now, and no other"
    );
    timer.advance(MS);
    assert_eq!(
        fired.load(std::sync::atomic::Ordering::Relaxed),
        total,
        "every one by its tick"
    );
    assert_eq!(early.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn timeout_timer_reaches_the_timer_without_keeping_it_alive() {
    let timer = manual(MS);
    let guard = std::sync::Arc::new(());
    let g = guard.clone();
    let t = timer
        .new_timeout(
            move |t: &Timeout| {
                let _keep = &g;
                t.timer().unwrap().new_timeout(|_| {}, MS).unwrap();
            },
            MS * 100,
        )
        .unwrap();
    assert_eq!(t.timer().unwrap().pending_timeouts(), 1);
    drop(timer);
    assert!(t.timer().is_none(), "the last handle is gone");
    assert_eq!(
        std::sync::Arc::strong_count(&guard),
        1,
        "the pending task was freed"
    );
}

#[test]
fn a_task_may_return_a_value_which_is_dropped() {
    let timer = manual(MS);
    let (tx, rx) = std::sync::mpsc::channel();
    timer.new_timeout(move |_| tx.send(7), MS).unwrap();
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = runs.clone();
    let periodic = timer
        .schedule_at_fixed_rate(
            move |_| counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
            MS,
            MS,
        )
        .unwrap();
    timer.advance(MS * 3);
    assert_eq!(rx.try_recv(), Ok(7));
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(periodic.cancel());
    // The value a task returns is dropped once it ran, not kept.
    let token = std::sync::Arc::new(());
    let returned = token.clone();
    timer.new_timeout(move |_| returned, MS).unwrap();
    timer.advance(MS);
    assert_eq!(
        std::sync::Arc::strong_count(&token),
        1,
        "the returned value was dropped"
    );
}

/// Producers count on their own lanes; the count is their sum, whichever
/// thread cancels and whichever fires.
#[test]
fn the_count_is_exact_across_producer_and_cancelling_threads() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let handles: Vec<Vec<Timeout>> = std::thread::scope(|s| {
        let spawned: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    (0..1000)
                        .map(|i| timer.new_timeout(|_| {}, MS * (1 + i % 50)).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        spawned.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(timer.pending_timeouts(), 4000);
    // Each thread cancels another thread's timeouts, half of them.
    std::thread::scope(|s| {
        for i in 0..4 {
            let theirs = &handles[(i + 1) % 4];
            s.spawn(move || theirs.iter().step_by(2).for_each(|t| assert!(t.cancel())));
        }
    });
    assert_eq!(timer.pending_timeouts(), 2000);
    timer.advance(MS * 25);
    let fired = handles.iter().flatten().filter(|t| t.is_expired()).count();
    assert_eq!(timer.pending_timeouts(), 2000 - fired);
    timer.advance(MS * 50);
    assert_eq!(timer.pending_timeouts(), 0);
}

/// A reader racing the producers never sees a wrapped or impossible
/// pending count: one thread schedules, another cancels, a third turns the
/// wheel so that some fire, and each read is at most the number of
/// timeouts begun before it was taken (and `stats()` never has more
/// pending than scheduled). Once quiet, `stats()` adds up.
fn a_racing_reader_sees_a_pending_count_in_range(limit: Option<usize>) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::mpsc;

    const ROUNDS: u64 = 200_000;
    let mut builder = HashedWheelTimer::builder().manual_clock().tick_duration(MS);
    if let Some(limit) = limit {
        builder = builder.max_pending_timeouts(limit);
    }
    let timer = builder.build().unwrap();
    // Raised before each schedule: a bound on what a read may include.
    let begun = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let scheduled_all = AtomicBool::new(false);
    let (to_cancel, cancels) = mpsc::sync_channel::<Timeout>(1);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..ROUNDS {
                begun.fetch_add(1, Ordering::SeqCst);
                let t = timer.new_timeout(|_| {}, MS * (1 + i % 3) as u32).unwrap();
                to_cancel.send(t).unwrap();
            }
            drop(to_cancel);
            scheduled_all.store(true, Ordering::SeqCst);
        });
        s.spawn(|| {
            for t in cancels {
                t.cancel();
            }
        });
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                timer.advance(MS);
            }
        });
        let reader = s.spawn(|| {
            let mut worst = None;
            let mut read = 0u64;
            while !scheduled_all.load(Ordering::SeqCst) {
                read += 1;
                let pending = timer.pending_timeouts() as u64;
                let stats = timer.stats();
                let bound = begun.load(Ordering::SeqCst);
                if pending > bound || stats.pending as u64 > stats.scheduled.min(bound) {
                    worst = Some((read, pending, stats.pending, stats.scheduled, bound));
                    break;
                }
            }
            worst
        });
        let worst = reader.join().unwrap();
        done.store(true, Ordering::SeqCst);
        assert_eq!(
            worst, None,
            "(read, pending_timeouts(), stats().pending, stats().scheduled, begun)"
        );
    });
    timer.advance(MS * 10);
    let s = timer.stats();
    assert_eq!(timer.pending_timeouts(), 0);
    assert_eq!(s.pending, 0);
    assert_eq!(s.scheduled, s.fired + s.cancelled + s.stopped);
}

#[test]
fn a_racing_reader_sees_a_pending_count_in_range_counted_on_lanes() {
    a_racing_reader_sees_a_pending_count_in_range(None);
}

#[test]
fn a_racing_reader_sees_a_pending_count_in_range_with_a_limit() {
    a_racing_reader_sees_a_pending_count_in_range(Some(1_000_000));
}
