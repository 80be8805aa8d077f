//! `max_pending_timeouts` on every face, at and around the limit: what is
//! refused (with `TimerError::AtCapacity`), what never is, and that the
//! counts add up. A cancel that waits in a thread's batch (a dropped `Sleep`,
//! a delay queue's removal) has ended its timeout for the user: it must not
//! hold a place under the limit.

mod common;

use common::assert_stats_add_up;
use hashed_wheel_timer::{HashedWheelTimer, TimerError};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;
use tokio_test::{assert_pending, task};

const MS: Duration = Duration::from_millis(1);

fn limited(max: usize) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(max)
        .build()
        .unwrap()
}

/// A removed item's timeout is cancelled: its place under the limit is free
/// for the next insert, on this thread.
#[test]
fn a_removed_items_place_is_free_for_the_next_insert() {
    let timer = limited(2);
    let queue = timer.delay_queue();
    let a = queue.insert("a", MS * 10).unwrap();
    queue.insert("b", MS * 10).unwrap();
    assert_eq!(queue.remove(&a), Some("a"));
    assert_eq!(queue.len(), 1);
    let c = queue.insert("c", MS * 10);
    assert!(c.is_ok(), "one item pending, limit 2: {c:?}");
    assert!(queue.insert("d", MS).unwrap_err().is_at_capacity());
    timer.advance(MS * 10);
    assert_eq!(common::drain(&queue).len(), 2);
    assert_stats_add_up(&timer);
}

/// The same for a `DelayMap`: a removed key frees its place for a new one.
#[test]
fn a_removed_keys_place_is_free_for_the_next_key() {
    let timer = limited(1);
    let map = timer.delay_map();
    map.insert(1, "a", MS * 10).unwrap();
    assert_eq!(map.remove(&1), Some("a"));
    let b = map.insert(2, "b", MS * 10);
    assert_eq!(b, Ok(None), "nothing pending, limit 1");
    assert_stats_add_up(&timer);
}

/// A dropped `Sleep` is cancelled: its place is free for a callback.
#[test]
fn a_dropped_sleeps_place_is_free_for_a_callback() {
    let timer = limited(1);
    let mut sleep = task::spawn(timer.sleep(MS * 10));
    assert_pending!(sleep.poll());
    drop(sleep);
    let t = timer.new_timeout(|_| {}, MS);
    assert!(t.is_ok(), "nothing pending, limit 1: {:?}", t.err());
    assert_eq!(
        timer.new_timeout(|_| {}, MS).unwrap_err(),
        TimerError::AtCapacity { pending: 1, max: 1 }
    );
    assert_stats_add_up(&timer);
}

/// A removal made on another thread, which has ended, frees its place too.
#[test]
fn a_removal_on_a_thread_that_ended_frees_its_place() {
    let timer = limited(1);
    let queue = timer.delay_queue();
    std::thread::scope(|s| {
        s.spawn(|| {
            let key = queue.insert(1, MS * 10).unwrap();
            assert_eq!(queue.remove(&key), Some(1));
        });
    });
    let again = queue.insert(2, MS * 10);
    assert!(again.is_ok(), "nothing pending, limit 1: {again:?}");
    assert_stats_add_up(&timer);
}
/// Threads at the limit remove items from their delay queues, and then,
/// once every removal has returned, insert as many: no insert is refused,
/// though the removals' cancels wait in the threads' batches, and other
/// threads (turning the wheel, reading the counts, refused inserts) take
/// those batches at the same time. No reading shows more than the limit.
#[test]
fn inserts_after_as_many_removals_are_never_refused() {
    const THREADS: usize = 4;
    const SHARE: usize = 8;
    let timer = limited(THREADS * SHARE);
    let queues: Vec<_> = (0..THREADS).map(|_| timer.delay_queue()).collect();
    let done = std::sync::atomic::AtomicBool::new(false);
    let removed = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                timer.advance(Duration::from_nanos(1));
                let pending = timer.pending_timeouts();
                assert!(pending <= THREADS * SHARE, "{pending} pending");
            }
        });
        let producers: Vec<_> = (queues.iter().zip(0..))
            .map(|(queue, seed)| {
                let removed = &removed;
                s.spawn(move || {
                    let (mut rng, mut refused) = (fastrand::Rng::with_seed(seed), Vec::new());
                    let mut held: Vec<_> = (0..SHARE)
                        .map(|i| queue.insert(i, Duration::from_secs(60)).unwrap())
                        .collect();
                    for round in 0..2_000 {
                        let n = rng.usize(0..=held.len());
                        for _ in 0..n {
                            let key = held.swap_remove(rng.usize(..held.len()));
                            assert!(queue.remove(&key).is_some());
                        }
                        removed.wait();
                        for i in 0..n {
                            match queue.insert(i, Duration::from_secs(60)) {
                                Ok(key) => held.push(key),
                                Err(e) => refused.push(format!("round {round}, {i} of {n}: {e}")),
                            }
                        }
                        removed.wait();
                    }
                    refused
                })
            })
            .collect();
        let refused: Vec<String> = producers
            .into_iter()
            .flat_map(|p| p.join().unwrap())
            .collect();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(refused.is_empty(), "refused: {refused:?}");
    });
    assert_eq!(timer.pending_timeouts(), THREADS * SHARE);
    assert_stats_add_up(&timer);
    drop(queues);
    assert_eq!(
        timer.pending_timeouts(),
        0,
        "a dropped queue's items are cancelled"
    );
}

/// At the limit nothing that moves or re-arms an existing timeout is refused
/// or counted again: a `Timeout::reset`, a periodic task's next run (fixed
/// rate and fixed delay), an `Interval`'s next tick (futures are filed past
/// the limit), a `DelayQueue::reset`. A fired timeout's reset is false.
#[test]
fn at_the_limit_resets_rearms_and_ticks_go_on_and_count_once() {
    let timer = limited(4);
    let fired = timer.new_timeout(|_| {}, MS).unwrap();
    let one_shot = timer.new_timeout(|_| {}, MS * 50).unwrap();
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (r1, r2) = (runs.clone(), runs.clone());
    let rate = timer
        .schedule_at_fixed_rate(
            move |_| {
                r1.fetch_add(1, SeqCst);
            },
            MS,
            MS,
        )
        .unwrap();
    let delay = timer
        .schedule_with_fixed_delay(
            move |_| {
                r2.fetch_add(1, SeqCst);
            },
            MS,
            MS,
        )
        .unwrap();
    assert!(timer.new_timeout(|_| {}, MS).unwrap_err().is_at_capacity());
    timer.advance(MS);
    assert!(fired.is_expired());
    assert!(!fired.reset(MS * 5), "a fired timeout is not reset");
    let queue = timer.delay_queue();
    let item = queue.insert("item", MS * 40).unwrap();
    assert!(queue.insert("x", MS).unwrap_err().is_at_capacity());
    let mut interval = task::spawn(timer.interval(MS * 3));
    for _ in 0..20 {
        assert!(one_shot.reset(MS * 50), "a reset at the limit");
        assert!(queue.reset(&item, MS * 40), "a queue's reset at the limit");
        while interval.enter(|cx, mut iv| iv.poll_tick(cx)).is_ready() {}
        assert_eq!(timer.pending_timeouts(), 5, "4 and the interval's entry");
        timer.advance(MS);
    }
    assert_eq!(runs.load(SeqCst), 2 * 21, "every run re-armed");
    assert!(rate.is_pending() && delay.is_pending() && one_shot.is_pending());
    let s = timer.stats();
    assert_eq!((s.cancelled, s.stopped), (0, 0), "{s:?}");
    drop(interval);
    assert_eq!(timer.pending_timeouts(), 4);
    assert_stats_add_up(&timer);
}

/// `stop()` returns what it stopped that a user can still run or look at:
/// callbacks, periodic tasks between runs, delay queue items' timeouts. A
/// pending `Sleep`'s entry counts as stopped too, but is woken, not returned;
/// a dropped one's batched cancel counts as cancelled.
#[test]
fn stop_returns_what_it_stopped_but_pending_futures() {
    let timer = limited(3);
    let t = timer.new_timeout(|_| {}, MS * 10).unwrap();
    let p = timer.schedule_at_fixed_rate(|_| {}, MS, MS).unwrap();
    let queue = timer.delay_queue();
    queue.insert(1, MS * 10).unwrap();
    let mut sleep = task::spawn(timer.sleep(MS * 10));
    assert_pending!(sleep.poll());
    let mut dropped = task::spawn(timer.sleep(MS * 10));
    assert_pending!(dropped.poll());
    drop(dropped);
    timer.advance(MS * 2);
    let stopped = timer.stop().unwrap();
    assert_eq!(
        stopped.len(),
        3,
        "the callback, the periodic task, the item"
    );
    assert!(stopped.contains(&t) && stopped.contains(&p));
    let s = timer.stats();
    assert_eq!(
        (s.scheduled, s.cancelled, s.stopped, s.pending),
        (5, 1, 4, 0),
        "{s:?}"
    );
    assert!(sleep.is_woken());
    assert_stats_add_up(&timer);
}

/// A key whose deadline fired but that no consumer has taken holds no place
/// under the limit: replacing it needs a new one, and at the limit that is
/// refused as the docs of `DelayMap::insert` say: the old value and its
/// fired deadline stay, and it comes out.
#[test]
fn replacing_a_fired_key_at_the_limit_keeps_the_old_value() {
    let timer = limited(1);
    let map = timer.delay_map();
    map.insert("k", 1, MS).unwrap();
    timer.advance(MS);
    assert_eq!(timer.pending_timeouts(), 0, "fired, not yet taken");
    let _full = timer.new_timeout(|_| {}, MS * 100).unwrap();
    let refused = map.insert("k", 2, MS * 5).unwrap_err();
    assert_eq!(refused, TimerError::AtCapacity { pending: 1, max: 1 });
    assert!(!map.reset("k", MS * 5), "a reset of it is refused too");
    assert_eq!(map.get("k"), Some(1));
    let mut t = task::spawn(());
    let got = t.enter(|cx, _| map.poll_expired(cx));
    assert_eq!(got, std::task::Poll::Ready(Some(("k", 1))));
    assert_stats_add_up(&timer);
}

/// Producers at the limit (callbacks, queue items inserted and removed,
/// sleeps dropped) race `stop()`: each call either succeeds or is refused
/// with a typed error, none panics or hangs, and afterwards the counts add
/// up with nothing pending and `stopped` no less than what `stop()` returned.
#[test]
fn producers_at_the_limit_racing_stop_leave_counts_that_add_up() {
    for round in 0..20u64 {
        let timer = limited(16);
        let started = std::sync::Barrier::new(4);
        let stopped = std::thread::scope(|s| {
            for seed in 0..3 {
                let (timer, started) = (&timer, &started);
                s.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(round * 3 + seed);
                    let queue = timer.delay_queue();
                    started.wait();
                    for i in 0..2_000 {
                        match rng.u8(0..3) {
                            0 => match timer.new_timeout(|_| {}, MS * rng.u32(1..50)) {
                                Ok(t) if rng.bool() => drop(t.cancel()),
                                Ok(_) => {}
                                Err(e) => assert!(e.is_at_capacity() || e.is_shutdown(), "{e}"),
                            },
                            1 => match queue.insert(i, MS * rng.u32(1..50)) {
                                Ok(key) => drop(queue.remove(&key)),
                                Err(e) => assert!(e.is_at_capacity() || e.is_shutdown(), "{e}"),
                            },
                            _ => {
                                let mut sleep = task::spawn(timer.sleep(MS * rng.u32(1..50)));
                                let _ = sleep.poll();
                            }
                        }
                    }
                });
            }
            started.wait();
            timer.advance(MS * 3);
            timer.stop().unwrap()
        });
        let s = timer.stats();
        assert_eq!(s.pending, 0, "round {round}: {s:?}");
        assert!(s.stopped >= stopped.len() as u64, "round {round}: {s:?}");
        // A producer may cancel one after `stop()` returned it (`is_stopped`'s docs).
        assert!(stopped.iter().all(|t| t.is_stopped() || t.is_cancelled()));
        assert_stats_add_up(&timer);
    }
}

/// Constant churn at the limit, with no pause between threads: each thread holds its share of
/// callbacks and queue items, and ends one (a `cancel`, a `remove`) before it makes the next. At no
/// moment do the threads hold more than the limit, so no schedule is refused, whatever the other
/// threads' cancels and batches are doing meanwhile.
#[test]
fn a_thread_that_ends_one_before_it_makes_one_is_never_refused() {
    const THREADS: usize = 4;
    const SHARE: usize = 4;
    let timer = limited(THREADS * SHARE);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(SeqCst) {
                timer.advance(Duration::from_nanos(1));
            }
        });
        let producers: Vec<_> = (0..THREADS as u64)
            .map(|seed| {
                let timer = &timer;
                s.spawn(move || {
                    let (mut rng, queue) = (fastrand::Rng::with_seed(seed), timer.delay_queue());
                    let (mut timeouts, mut items) = (Vec::new(), Vec::new());
                    for round in 0..20_000 {
                        if timeouts.len() + items.len() == SHARE {
                            if items.is_empty() || rng.bool() && !timeouts.is_empty() {
                                let t: hashed_wheel_timer::Timeout =
                                    timeouts.swap_remove(rng.usize(..timeouts.len()));
                                assert!(t.cancel());
                            } else if !items.is_empty() {
                                let key = items.swap_remove(rng.usize(..items.len()));
                                assert!(queue.remove(&key).is_some());
                            }
                        }
                        let made = if rng.bool() {
                            timer
                                .new_timeout(|_| {}, Duration::from_secs(60))
                                .map(|t| timeouts.push(t))
                        } else {
                            queue
                                .insert(round, Duration::from_secs(60))
                                .map(|k| items.push(k))
                        };
                        made.unwrap_or_else(|e| panic!("round {round}: {e}"));
                    }
                })
            })
            .collect();
        let ended: Vec<_> = producers.into_iter().map(|p| p.join()).collect();
        done.store(true, SeqCst); // before a producer's panic goes on: the scope waits for all
        ended.into_iter().for_each(|e| e.unwrap());
    });
    assert_stats_add_up(&timer);
}
