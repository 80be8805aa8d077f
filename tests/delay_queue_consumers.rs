//! A shared `DelayQueue` / `DelayMap` drained by several consumers at once (on a multi-thread
//! runtime, on a paused tokio clock), consumers dropped mid-poll, tasks sharing one handle, and
//! consumers against housekeeping on other threads (the methods alone: `delay_queue_housekeeping.rs`).

mod common;

use common::{drain_now, manual, within};
use futures::StreamExt;
use hashed_wheel_timer::{DelayQueue, HashedWheelTimer};
use std::sync::Arc;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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
/// moved, and they waited for ever. Up to 64 may share one; a fifth woke the oldest when it was 4.)
#[test]
fn tasks_sharing_one_handle_on_a_paused_clock_let_time_advance() {
    for tasks in [2u32, 4, 5, 32] {
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
