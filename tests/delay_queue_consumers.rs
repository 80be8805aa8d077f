//! A shared `DelayQueue` / `DelayMap` drained by several consumers at once (on a multi-thread
//! runtime, on a paused tokio clock), consumers dropped mid-poll, and the housekeeping methods
//! (`compact`, `shrink_to_fit`, `reserve`, `clear`, `close`) while items are fired but not taken.

mod common;

use common::{manual, within};
use futures::{FutureExt, StreamExt};
use hashed_wheel_timer::{DelayKey, DelayQueue, HashedWheelTimer, TimerError};
use std::sync::Arc;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Takes what the stream yields now, without waiting.
fn drain_now<T>(queue: &DelayQueue<T>) -> Vec<T> {
    let mut stream = queue;
    std::iter::from_fn(|| stream.next().now_or_never().flatten())
        .map(|e| e.into_inner())
        .collect()
}

/// Consumers on a multi-thread runtime, each in a `select!` of `next()` against a yield (so that
/// its `next()` future is often dropped mid-poll), against a producer and a thread advancing the
/// manual clock: every item comes out exactly once, and each consumer ends at `close()`.
#[test]
fn consumers_in_select_on_a_multi_thread_runtime_take_each_item_once_and_end_at_close() {
    within("consumers in select!", || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = manual(ms(1));
            let queue: DelayQueue<u32> = timer.delay_queue();
            let consumers: Vec<_> = (0..4)
                .map(|_| {
                    let mut queue = queue.clone();
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        loop {
                            tokio::select! {
                                e = queue.next() => match e {
                                    Some(e) => got.push(e.into_inner()),
                                    None => return got,
                                },
                                _ = tokio::task::yield_now() => {}
                            }
                        }
                    })
                })
                .collect();
            let total = 2_000u32;
            for i in 0..total {
                queue.insert(i, ms(u64::from(i % 50))).unwrap();
                if i % 100 == 0 {
                    timer.advance(ms(3));
                    tokio::task::yield_now().await;
                }
            }
            timer.advance(ms(100));
            queue.close();
            let mut all = Vec::new();
            for c in consumers {
                all.extend(c.await.unwrap());
            }
            all.sort_unstable();
            assert_eq!(
                all,
                (0..total).collect::<Vec<_>>(),
                "each item exactly once"
            );
            assert!(queue.is_empty());
        });
    });
}

/// The same on a paused current-thread runtime with a `tokio_clock()` timer, time moving by
/// auto-advance: the consumers' `next()` futures are dropped whenever the other branch wins.
#[test]
fn consumers_in_select_on_a_paused_tokio_clock_take_each_item_once() {
    within("consumers on a paused clock", || {
        common::paused::paused_runtime().block_on(async {
            let timer = common::paused::tokio_clock();
            let queue: DelayQueue<u32> = timer.delay_queue();
            let consumers: Vec<_> = (0..3)
                .map(|n| {
                    let mut queue = queue.clone();
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        let mut tick = tokio::time::interval(ms(1 + n));
                        loop {
                            tokio::select! {
                                e = queue.next() => match e {
                                    Some(e) => got.push(e.into_inner()),
                                    None => return got,
                                },
                                _ = tick.tick() => {}
                            }
                        }
                    })
                })
                .collect();
            for i in 0..300u32 {
                queue.insert(i, ms(u64::from(i % 37))).unwrap();
                if i % 20 == 0 {
                    tokio::time::sleep(ms(2)).await;
                }
            }
            queue.close();
            let mut all = Vec::new();
            for c in consumers {
                all.extend(c.await.unwrap());
            }
            all.sort_unstable();
            assert_eq!(all, (0..300).collect::<Vec<_>>(), "each item exactly once");
        });
    });
}

/// Two consumers wait; the item fires and wakes both; the first is dropped without polling again:
/// the other still takes the item (nobody sleeps while it is due).
#[test]
fn a_consumer_dropped_after_its_wake_leaves_the_item_to_another() {
    let timer = manual(ms(1));
    let queue: DelayQueue<&str> = timer.delay_queue();
    let (a, b) = (queue.clone(), queue.clone());
    let mut fa = tokio_test::task::spawn(async move { a.clone().next().await });
    let mut fb = tokio_test::task::spawn(async move { b.clone().next().await });
    assert!(fa.poll().is_pending() && fb.poll().is_pending());
    queue.insert("x", ms(5)).unwrap();
    timer.advance(ms(5));
    assert!(fb.is_woken(), "every waiting consumer is woken");
    drop(fa);
    let got = fb.poll().map(|e| e.map(|e| e.into_inner()));
    assert_eq!(got, std::task::Poll::Ready(Some("x")));
}

/// `close()` with fired items not yet taken: they come out, then the end; inserts are refused.
#[test]
fn close_with_fired_items_yields_them_then_ends() {
    let timer = manual(ms(1));
    let queue: DelayQueue<u32> = timer.delay_queue();
    let mut waiter = tokio_test::task::spawn(queue.clone().into_future());
    assert!(waiter.poll().is_pending());
    for i in 0..3 {
        queue.insert(i, ms(2)).unwrap();
    }
    let later = queue.insert(9, ms(50)).unwrap();
    timer.advance(ms(2));
    queue.close();
    assert_eq!(queue.insert(7, ms(1)), Err(TimerError::QueueClosed));
    assert!(waiter.is_woken());
    assert_eq!(drain_now(&queue), vec![0, 1, 2]);
    assert!(
        queue.clone().next().now_or_never().is_none(),
        "one item left"
    );
    assert_eq!(queue.remove(&later), Some(9));
    assert!(
        queue.clone().next().now_or_never().unwrap().is_none(),
        "ended"
    );
}

/// Keys stay valid after `compact` and `shrink_to_fit`, with fired items not yet taken; `len`
/// agrees with what the stream still yields.
#[test]
fn keys_stay_valid_after_compact_with_fired_items_not_taken() {
    let timer = manual(ms(1));
    let queue: DelayQueue<u32> = timer.delay_queue();
    let keys: Vec<DelayKey> = (0..40).map(|i| queue.insert(i, ms(10)).unwrap()).collect();
    for k in keys.iter().step_by(2) {
        assert!(queue.remove(k).is_some());
    }
    timer.advance(ms(10)); // all left fired, none taken
    queue.compact();
    queue.shrink_to_fit();
    assert_eq!(queue.len(), 20);
    assert!(queue.capacity() >= 20);
    // Old keys: deadline, reset (refused: fired), remove.
    for k in keys.iter().skip(1).step_by(4) {
        assert!(queue.deadline(k).is_some());
        assert!(!queue.reset(k, ms(5)), "fired: on its way out");
        assert!(queue.remove(k).is_some());
    }
    let first = queue.peek().expect("fired items left");
    assert!(keys.contains(&first), "peek names an item by its own key");
    let mut stream = &queue;
    let out: Vec<_> = std::iter::from_fn(|| stream.next().now_or_never().flatten()).collect();
    assert_eq!(out.first().map(|e| e.key()), Some(first));
    assert_eq!(out.len(), 10);
    assert!(
        out.iter().all(|e| keys[*e.get_ref() as usize] == e.key()),
        "each comes out with the key it was inserted with"
    );
    let out: Vec<u32> = out.into_iter().map(|e| e.into_inner()).collect();
    assert!(out.iter().all(|i| i % 4 == 3), "{out:?}");
    assert!(queue.is_empty());
    // Pending ones across a compact: reset by old keys moves them.
    let keys: Vec<DelayKey> = (0..10).map(|i| queue.insert(i, ms(10)).unwrap()).collect();
    for k in &keys[..5] {
        queue.remove(k);
    }
    queue.compact();
    for k in &keys[5..] {
        assert!(queue.reset(k, ms(20)));
    }
    timer.advance(ms(10));
    assert!(drain_now(&queue).is_empty(), "reset later");
    timer.advance(ms(10));
    assert_eq!(drain_now(&queue), vec![5, 6, 7, 8, 9]);
}

/// `reserve` of a huge count neither panics nor aborts on a shared queue.
#[test]
fn reserve_of_a_huge_count_does_not_panic() {
    let timer = manual(ms(1));
    let queue: DelayQueue<[u8; 64]> = timer.delay_queue();
    queue.insert([0; 64], ms(1)).unwrap();
    queue.reserve(usize::MAX);
    queue.reserve(usize::MAX / 2);
    queue.reserve(1 << 40);
    queue.reserve(10);
    assert!(queue.capacity() >= 11);
    let limited = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(100)
        .build()
        .unwrap();
    let q: DelayQueue<u8> = limited.delay_queue_with_capacity(usize::MAX);
    q.reserve(usize::MAX);
    assert!(q.capacity() >= 100);
}

/// `clear` while consumers wait and items are fired but not taken: nothing comes out, consumers
/// keep waiting for new items, which come out.
#[test]
fn clear_with_fired_items_and_waiting_consumers() {
    let timer = manual(ms(1));
    let queue: DelayQueue<u32> = timer.delay_queue();
    let mut waiter = tokio_test::task::spawn(queue.clone().into_future());
    assert!(waiter.poll().is_pending());
    let keys: Vec<_> = (0..5).map(|i| queue.insert(i, ms(1)).unwrap()).collect();
    timer.advance(ms(1));
    queue.clear();
    assert_eq!((queue.len(), queue.is_empty()), (0, true));
    assert!(keys.iter().all(|k| queue.deadline(k).is_none()));
    assert!(queue.peek().is_none());
    assert!(waiter.poll().is_pending(), "cleared, not closed");
    queue.insert(42, ms(1)).unwrap();
    timer.advance(ms(1));
    assert!(waiter.is_woken());
    match waiter.poll() {
        std::task::Poll::Ready((Some(e), _)) => assert_eq!(e.into_inner(), 42),
        _ => panic!("the new item comes out"),
    }
}

/// `new()` outside a runtime: on the default timer.
#[test]
fn new_outside_a_runtime_and_on_the_current_timer() {
    let q: DelayQueue<u8> = DelayQueue::new();
    assert!(q.timer().is_same(&hashed_wheel_timer::current_timer()));
    let m: hashed_wheel_timer::DelayMap<u8, u8> = hashed_wheel_timer::DelayMap::new();
    m.insert(1, 1, ms(1)).unwrap();
    assert_eq!(m.remove(&1), Some(1));
    let timer = manual(ms(1));
    let _g = hashed_wheel_timer::set_default(timer.clone());
    let q: DelayQueue<u8> = DelayQueue::new();
    q.insert(1, ms(1)).unwrap();
    timer.advance(ms(1));
    assert_eq!(drain_now(&q), vec![1]);
}

/// A `DelayMap` key whose deadline fired but was not yielded: replaced, reset and removed, the old
/// value never comes out.
#[test]
fn delay_map_replace_reset_remove_of_a_fired_key() {
    let timer = manual(ms(1));
    let map = timer.delay_map::<&str, u32>();
    map.insert("a", 1, ms(1)).unwrap();
    map.insert("b", 1, ms(1)).unwrap();
    map.insert("c", 1, ms(1)).unwrap();
    timer.advance(ms(1));
    assert_eq!(map.insert("a", 2, ms(5)).unwrap(), Some(1));
    assert!(map.reset(&"b", ms(5)));
    assert_eq!(map.remove(&"c"), Some(1));
    assert_eq!(map.len(), 2);
    let mut s = &map;
    assert!(s.next().now_or_never().is_none(), "nothing due");
    timer.advance(ms(5));
    let mut got: Vec<_> = std::iter::from_fn(|| s.next().now_or_never().flatten()).collect();
    got.sort_unstable();
    assert_eq!(got, vec![("a", 2), ("b", 1)]);
    assert!(map.is_empty());
}

/// Consumers on threads, one of them dropped while it waits: the others still get every item.
#[test]
fn a_dropped_consumer_leaves_nobody_asleep() {
    within("threads", || {
        let timer = manual(ms(1));
        let queue: DelayQueue<u32> = timer.delay_queue();
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let q = queue.clone();
                std::thread::spawn(move || futures::executor::block_on_stream(q).count())
            })
            .collect();
        let mut doomed = tokio_test::task::spawn(queue.clone().into_future());
        assert!(doomed.poll().is_pending());
        for i in 0..500 {
            queue.insert(i, ms(u64::from(i % 7))).unwrap();
        }
        timer.advance(ms(3));
        drop(doomed);
        timer.advance(ms(10));
        queue.close();
        let n: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(n, 500);
    });
}

/// A consumer's waker that calls back into the queue (insert, poll, peek, len, close) as the driver
/// wakes it: no deadlock, nothing lost.
#[test]
fn a_waker_calling_into_the_queue_as_it_is_woken() {
    within("waker re-entry", || {
        let timer = manual(ms(1));
        let queue: DelayQueue<u32> = timer.delay_queue();
        let q = queue.clone();
        let taken = Arc::new(std::sync::Mutex::new(Vec::new()));
        let waker = futures::task::waker(Arc::new(Reenter(q, taken.clone())));
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(queue.poll_expired(&mut cx).is_pending());
        queue.insert(1, ms(1)).unwrap();
        timer.advance(ms(1));
        queue.close();
        let mut out = drain_now(&queue);
        out.extend(taken.lock().unwrap().iter());
        assert!(out.contains(&1) && out.contains(&100), "{out:?}");
    });
}

struct Reenter(DelayQueue<u32>, Arc<std::sync::Mutex<Vec<u32>>>);

impl futures::task::ArcWake for Reenter {
    fn wake_by_ref(me: &Arc<Self>) {
        let _ = me.0.insert(100, Duration::ZERO);
        let _ = me.0.peek();
        let _ = me.0.len();
        me.0.compact();
        me.0.shrink_to_fit();
        me.0.reserve(4);
        let w = futures::task::noop_waker();
        if let std::task::Poll::Ready(Some(e)) =
            me.0.poll_expired(&mut std::task::Context::from_waker(&w))
        {
            me.1.lock().unwrap().push(e.into_inner());
        }
    }
}

/// A queue made on a stopped timer refuses inserts with a typed error, and its stream ends.
#[test]
fn a_queue_made_on_a_stopped_timer_refuses_and_ends() {
    let timer = manual(ms(1));
    timer.stop().unwrap();
    let queue: DelayQueue<u8> = timer.delay_queue();
    assert_eq!(queue.insert(1, ms(1)), Err(TimerError::Shutdown));
    assert!(queue.clone().next().now_or_never().unwrap().is_none());
    let map = timer.delay_map::<u8, u8>();
    assert_eq!(map.insert(1, 1, ms(1)), Err(TimerError::Shutdown));
    assert!(map.clone().next().now_or_never().unwrap().is_none());
}

/// Consumers in `select!` on a multi-thread runtime, the queue on that runtime's (real) tokio
/// clock: each key once, with the value of its last insert.
#[test]
fn consumers_on_a_multi_thread_runtime_on_its_tokio_clock() {
    within("tokio clock, multi-thread", || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
            let map = timer.delay_map::<u32, u32>();
            let consumers: Vec<_> = (0..3)
                .map(|_| {
                    let mut map = map.clone();
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        loop {
                            tokio::select! {
                                e = map.next() => match e {
                                    Some((k, v)) => got.push((k, v)),
                                    None => return got,
                                },
                                _ = tokio::time::sleep(Duration::from_micros(300)) => {}
                            }
                        }
                    })
                })
                .collect();
            for i in 0..300u32 {
                map.insert(i % 100, i, ms(300 + u64::from(i % 30))).unwrap(); // 10x the inserts' time
            }
            map.close();
            let mut all = Vec::new();
            for c in consumers {
                all.extend(c.await.unwrap());
            }
            all.sort_unstable();
            let want: Vec<_> = (0..100).map(|k| (k, k + 200)).collect();
            assert_eq!(all, want, "each key once, with its last value");
        });
    });
}

/// A waker that does nothing, each one a waker of its own.
struct Quiet;

impl futures::task::ArcWake for Quiet {
    fn wake_by_ref(_: &Arc<Self>) {}
}

/// Panics when woken, or, if armed, when its last reference drops.
struct Hostile(bool);

impl futures::task::ArcWake for Hostile {
    fn wake_by_ref(_: &Arc<Self>) {
        panic!("a consumer's waker panicked when woken");
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        if self.0 && !std::thread::panicking() {
            panic!("a consumer's waker panicked when dropped");
        }
    }
}

/// A handle polled by one task, then by four others (a handle keeps four tasks' wakers, so the
/// first is woken to poll again): the first task's waker panics when woken, and the last task's
/// poll neither panics nor loses the item.
#[test]
fn a_replaced_waker_that_panics_does_not_escape_the_next_poll() {
    let timer = manual(ms(1));
    let queue: DelayQueue<u32> = timer.delay_queue();
    let first = futures::task::waker(Arc::new(Hostile(false)));
    assert!(queue
        .poll_expired(&mut std::task::Context::from_waker(&first))
        .is_pending());
    queue.insert(5, ms(1)).unwrap();
    for _ in 0..4 {
        let other = futures::task::waker(Arc::new(Quiet));
        let poll = std::panic::AssertUnwindSafe(|| {
            queue
                .poll_expired(&mut std::task::Context::from_waker(&other))
                .is_pending()
        });
        let polled = std::panic::catch_unwind(poll);
        assert!(
            matches!(polled, Ok(true)),
            "the poll panicked or found an item not yet due"
        );
    }
    timer.advance(ms(1));
    assert_eq!(drain_now(&queue), vec![5]);
}

/// A handle dropped while it keeps a consumer's waker whose drop panics: the drop does not unwind.
#[test]
fn a_handle_dropped_holding_a_waker_that_panics_when_dropped_does_not_unwind() {
    let timer = manual(ms(1));
    let queue: DelayQueue<u32> = timer.delay_queue();
    let consumer = queue.clone();
    let waker = futures::task::waker(Arc::new(Hostile(true)));
    assert!(consumer
        .poll_expired(&mut std::task::Context::from_waker(&waker))
        .is_pending());
    drop(waker); // the handle holds the last reference
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(consumer)));
    assert!(dropped.is_ok(), "the handle's drop unwound");
    queue.insert(1, ms(1)).unwrap();
    timer.advance(ms(1));
    assert_eq!(drain_now(&queue), vec![1]);
}

/// `clear()` of a closed queue whose consumers wait for items not yet due: they end.
#[test]
fn clear_of_a_closed_queue_ends_the_waiting_consumers() {
    let timer = manual(ms(1));
    let map = timer.delay_map::<u8, u8>();
    let queue: DelayQueue<u32> = timer.delay_queue();
    let mut waiter = tokio_test::task::spawn(queue.clone().into_future());
    let mut map_waiter = tokio_test::task::spawn(map.clone().into_future());
    queue.insert(1, ms(10)).unwrap();
    map.insert(1, 1, ms(10)).unwrap();
    assert!(waiter.poll().is_pending() && map_waiter.poll().is_pending());
    queue.close();
    map.close();
    assert!(
        waiter.poll().is_pending() && map_waiter.poll().is_pending(),
        "items left"
    );
    queue.clear();
    map.clear();
    assert!(waiter.is_woken() && map_waiter.is_woken());
    assert!(matches!(waiter.poll(), std::task::Poll::Ready((None, _))));
    assert!(matches!(
        map_waiter.poll(),
        std::task::Poll::Ready((None, _))
    ));
}

/// Consumers on threads, a producer inserting, resetting and removing, a thread compacting,
/// shrinking, reserving and peeking, and one advancing the manual clock: every item is removed or
/// yielded, exactly once, never before its deadline, with the key it was inserted with.
#[test]
fn consumers_against_housekeeping_and_removals_on_threads() {
    within("housekeeping against consumers", || {
        let timer = manual(ms(1));
        let queue: DelayQueue<u32> = timer.delay_queue();
        let consumers: Vec<_> = (0..3)
            .map(|_| {
                let (q, timer) = (queue.clone(), timer.clone());
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    for e in futures::executor::block_on_stream(q) {
                        assert!(e.deadline() <= timer.now(), "yielded before its deadline");
                        got.push((e.key(), e.into_inner()));
                    }
                    got
                })
            })
            .collect();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let keeper = {
            let (q, done) = (queue.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    q.compact();
                    q.shrink_to_fit();
                    q.reserve(3);
                    if let Some(k) = q.peek() {
                        let _ = q.deadline(&k);
                    }
                    let _ = (q.len(), q.capacity());
                    std::thread::yield_now();
                }
            })
        };
        let clock = {
            let (timer, done) = (timer.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    timer.advance(ms(1));
                    std::thread::yield_now();
                }
            })
        };
        let mut keys = Vec::new();
        let mut removed = Vec::new();
        for i in 0..3_000u32 {
            let key = queue.insert(i, ms(u64::from(i % 13))).unwrap();
            keys.push(key);
            match i % 5 {
                0 => {
                    let old = keys[(i / 2) as usize];
                    if let Some(v) = queue.remove(&old) {
                        removed.push((old, v));
                    }
                }
                1 => {
                    let _ = queue.reset(&keys[(i / 3) as usize], ms(u64::from(i % 7)));
                }
                _ => {}
            }
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        keeper.join().unwrap();
        clock.join().unwrap();
        timer.advance(ms(20));
        queue.close();
        let mut all = removed;
        for c in consumers {
            all.extend(c.join().unwrap());
        }
        all.sort_unstable_by_key(|&(_, v)| v);
        assert_eq!(all.len(), 3_000, "each item once, removed or yielded");
        for (i, (key, v)) in all.iter().enumerate() {
            assert_eq!((*v, *key), (i as u32, keys[i]), "with its own key");
        }
    });
}

/// A `DelayMap` on a paused tokio clock, drained by consumers in `select!`, while keys whose
/// deadline fired are replaced, reset and removed before they are yielded: each key comes out
/// once, with its last value, never an old one.
#[test]
fn delay_map_consumers_on_a_paused_clock_never_see_an_old_value() {
    within("map consumers on a paused clock", || {
        common::paused::paused_runtime().block_on(async {
            let timer = common::paused::tokio_clock();
            let map = timer.delay_map::<u32, u32>();
            for k in 0..60u32 {
                map.insert(k, 0, ms(5)).unwrap();
            }
            tokio::time::sleep(ms(6)).await; // fired, and no consumer yet
            for k in 0..60u32 {
                match k % 3 {
                    0 => assert!(map.insert(k, 1, ms(10)).unwrap().is_some()),
                    1 => assert!(map.reset(&k, ms(10))),
                    _ => assert_eq!(map.remove(&k), Some(0)),
                }
            }
            let consumers: Vec<_> = (0..3)
                .map(|n| {
                    let mut map = map.clone();
                    tokio::spawn(async move {
                        let mut got = Vec::new();
                        loop {
                            tokio::select! {
                                e = map.next() => match e {
                                    Some(pair) => got.push(pair),
                                    None => return got,
                                },
                                _ = tokio::time::sleep(ms(1 + n)) => {}
                            }
                        }
                    })
                })
                .collect();
            map.close();
            let mut all = Vec::new();
            for c in consumers {
                all.extend(c.await.unwrap());
            }
            all.sort_unstable();
            let want: Vec<_> = (0..60)
                .filter(|k| k % 3 != 2)
                .map(|k| (k, 1 - k % 3))
                .collect();
            assert_eq!(all, want);
        });
    });
}

/// Tasks sharing one handle (`&DelayQueue` is a stream), on a paused clock: they wait without
/// waking each other, so the runtime idles, auto-advance moves the clock, and each gets an item.
/// (Before, each poll woke the task that polled before it: they kept the runtime busy, time never
/// moved, and they waited for ever.)
#[test]
fn tasks_sharing_one_handle_on_a_paused_clock_let_time_advance() {
    for tasks in [2u32, 4] {
        let got = within("tasks sharing one handle", move || {
            common::paused::paused_runtime().block_on(async move {
                let timer = common::paused::tokio_clock();
                let queue = Arc::new(timer.delay_queue::<u32>());
                let consumers: Vec<_> = (0..tasks)
                    .map(|_| {
                        let queue = queue.clone();
                        tokio::spawn(async move {
                            let mut stream = &*queue;
                            stream.next().await.map(|e| e.into_inner())
                        })
                    })
                    .collect();
                tokio::task::yield_now().await; // each waits
                for i in 0..tasks {
                    queue.insert(i, ms(5)).unwrap();
                }
                let mut got = Vec::new();
                for c in consumers {
                    got.push(c.await.unwrap().expect("an item each"));
                }
                got.sort_unstable();
                got
            })
        });
        assert_eq!(got, (0..tasks).collect::<Vec<_>>());
    }
}
