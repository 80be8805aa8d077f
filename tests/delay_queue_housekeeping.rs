//! A shared `DelayQueue` / `DelayMap`'s housekeeping (`compact`, `shrink_to_fit`, `reserve`,
//! `clear`, `close`) while consumers wait and items are fired but not taken; consumers' wakers
//! that panic when a second task's poll replaces them or when their handle drops them.

mod common;

use common::{drain_now, manual};
use futures::{FutureExt, StreamExt};
use hashed_wheel_timer::{DelayKey, DelayQueue, HashedWheelTimer, TimerError};
use std::sync::Arc;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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

/// A handle polled by one task, then by 64 others (a handle keeps 64 tasks' wakers, so the
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
    for _ in 0..64 {
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
