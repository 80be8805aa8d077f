//! `DelayQueue`, on the manual clock: the behaviours of tokio-util's own
//! `DelayQueue` tests that apply here (order, reset, remove, insert after
//! expiry, many items, `insert_at` in the past), and what this queue adds:
//! sharing between threads, a stream that waits while empty, stale keys
//! that are harmless, and memory that comes back. `close`, `peek` and the
//! capacity methods are in `delay_queue_methods.rs`.

mod common;

use common::{drain, manual, poll, QueueExecutor};
use hashed_wheel_timer::{DelayKey, DelayQueue, Expired, HashedWheelTimer, TimerError};
use std::task::Poll;
use std::time::Duration;
use tokio_test::task;

const MS: Duration = Duration::from_millis(1);

fn items<T: Send + 'static>(queue: &DelayQueue<T>) -> Vec<T> {
    drain(queue).into_iter().map(Expired::into_inner).collect()
}

#[test]
fn an_item_with_no_delay_comes_out_at_the_next_poll() {
    let timer = manual(MS);
    timer.advance(3 * MS); // at a tick's end, which has been processed
    let queue = timer.delay_queue();
    let start = timer.now();
    let key = queue.insert("now", Duration::ZERO).unwrap();
    let mut t = task::spawn(());
    let e = match poll(&mut t, &queue) {
        Poll::Ready(Some(e)) => e,
        other => panic!(
            "expected an item, got {:?}",
            other.map(|o| o.map(|e| e.into_inner()))
        ),
    };
    assert_eq!((e.key(), *e.get_ref(), e.deadline()), (key, "now", start));
    assert_eq!(timer.now(), start, "no time passed");
    assert!(poll(&mut t, &queue).is_pending());
}

#[test]
fn an_item_fires_into_a_waiting_consumer_and_wakes_it() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    queue.insert("soon", MS).unwrap();
    let mut t = task::spawn(());
    assert!(poll(&mut t, &queue).is_pending());
    timer.advance(MS);
    assert!(t.is_woken(), "the consumer is woken when its item fires");
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(Some(_))));
}

#[test]
fn items_with_no_delay_come_out_in_insertion_order() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    for i in 0..20 {
        queue.insert(i, Duration::ZERO).unwrap();
    }
    timer.advance(MS);
    assert_eq!(items(&queue), (0..20).collect::<Vec<_>>());
}

#[test]
fn an_item_never_comes_out_before_its_deadline() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let start = timer.now();
    queue.insert('a', 5 * MS).unwrap();
    let mut t = task::spawn(());
    for _ in 0..4 {
        timer.advance(MS);
        assert!(
            poll(&mut t, &queue).is_pending(),
            "early at {:?}",
            timer.now() - start
        );
        assert!(!t.is_woken());
    }
    timer.advance(MS);
    assert!(t.is_woken());
    let e = drain(&queue).pop().expect("due at 5 ms");
    assert_eq!(e.deadline(), start + 5 * MS);
    assert!(timer.now() >= e.deadline());
}

#[test]
fn items_come_out_in_deadline_order_whatever_the_insertion_order() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let start = timer.now();
    let delays = [30u64, 5, 17, 5, 900, 1, 60, 17, 2_000, 0];
    for (i, &d) in delays.iter().enumerate() {
        queue.insert(i, Duration::from_millis(d)).unwrap();
    }
    let mut out = Vec::new();
    for _ in 0..2_100 {
        timer.advance(MS);
        for e in drain(&queue) {
            assert!(timer.now() >= e.deadline(), "early");
            assert_eq!(
                e.deadline(),
                start + Duration::from_millis(delays[e.key_index()])
            );
            out.push(*e.get_ref());
        }
    }
    // Deadline order; equal deadlines in insertion order.
    let mut want: Vec<usize> = (0..delays.len()).collect();
    want.sort_by_key(|&i| delays[i]);
    assert_eq!(out, want);
    assert!(queue.is_empty());
}

/// The label an `Expired<usize>` carries, standing in for its key.
trait KeyIndex {
    fn key_index(&self) -> usize;
}

impl KeyIndex for Expired<usize> {
    fn key_index(&self) -> usize {
        *self.get_ref()
    }
}

#[test]
fn insert_at_a_past_deadline_comes_out_at_once() {
    let timer = manual(MS);
    timer.advance(100 * MS);
    let queue = timer.delay_queue();
    let past = timer.now() - 50 * MS;
    queue.insert_at("late", past).unwrap();
    let e = drain(&queue)
        .pop()
        .expect("due already: no tick to wait for");
    assert_eq!(e.deadline(), past);
}

#[test]
fn a_removed_item_never_comes_out() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let key = queue.insert("gone", 3 * MS).unwrap();
    let kept = queue.insert("kept", 3 * MS).unwrap();
    assert_eq!(queue.remove(&key), Some("gone"));
    assert_eq!(queue.remove(&key), None, "a stale key is harmless");
    assert_eq!(queue.deadline(&key), None);
    assert!(!queue.reset(&key, MS));
    assert_eq!(queue.len(), 1);
    assert_eq!(
        timer.pending_timeouts(),
        1,
        "the removed item's timeout was cancelled"
    );
    timer.advance(5 * MS);
    let out = drain(&queue);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].key(), kept);
    assert_eq!(timer.stats().cancelled, 1);
}

/// A removal's cancel waits in its thread's batch until the batch fills or the next turn, which
/// takes the batches before it fires anything: the removed items never fire, and each counts once.
#[test]
fn removed_items_are_cancelled_by_the_next_turn_before_they_can_fire() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let keys: Vec<_> = (0..3).map(|i| queue.insert(i, 3 * MS).unwrap()).collect();
    // A turn first: with `metrics`, a turn's end may read the counts, which take the batches.
    timer.advance(MS);
    keys.iter()
        .for_each(|key| assert!(queue.remove(key).is_some()));
    timer.advance(4 * MS);
    let stats = timer.stats();
    assert_eq!((stats.cancelled, stats.fired, stats.pending), (3, 0, 0));
    assert!(drain(&queue).is_empty());
}

#[test]
fn an_item_that_fired_can_still_be_removed_until_the_stream_yields_it() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let key = queue.insert(1, 2 * MS).unwrap();
    timer.advance(2 * MS);
    assert!(
        !queue.reset(&key, 10 * MS),
        "its deadline fired: reset is too late"
    );
    assert_eq!(queue.len(), 1, "fired, not yet yielded: still in the queue");
    assert_eq!(queue.remove(&key), Some(1));
    // A new item may take the removed one's slot while its fired key still
    // waits for the stream: that key must not take the new item early.
    let new = queue.insert(2, 50 * MS).unwrap();
    assert!(
        drain(&queue).is_empty(),
        "removed, so never yielded; the new one not early"
    );
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.remove(&new), Some(2));
}

#[test]
fn a_yielded_key_is_stale() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let key = queue.insert(1, MS).unwrap();
    timer.advance(MS);
    assert_eq!(drain(&queue).len(), 1);
    assert_eq!(queue.remove(&key), None);
    assert!(!queue.reset(&key, MS));
    assert!(!queue.reset_at(&key, timer.now() + MS));
    assert_eq!(queue.deadline(&key), None);
}

#[test]
fn reset_later_moves_the_item_and_its_old_deadline_no_longer_counts() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let start = timer.now();
    let key = queue.insert("x", 5 * MS).unwrap();
    timer.advance(MS);
    assert!(queue.reset(&key, 10 * MS));
    assert_eq!(queue.deadline(&key), Some(start + 11 * MS));
    timer.advance(9 * MS);
    assert!(
        drain(&queue).is_empty(),
        "not at the old deadline, nor early"
    );
    timer.advance(MS);
    let e = drain(&queue).pop().expect("due at 11 ms");
    assert_eq!(e.deadline(), start + 11 * MS);
}

#[test]
fn reset_earlier_brings_the_item_forward() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let start = timer.now();
    let first = queue.insert("first", 10 * MS).unwrap();
    let second = queue.insert("second", 20 * MS).unwrap();
    timer.advance(MS);
    // tokio-util's expire_second_key_when_reset_to_expire_earlier.
    assert!(queue.reset(&second, 2 * MS));
    timer.advance(2 * MS);
    let out = drain(&queue);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].key(), out[0].deadline()), (second, start + 3 * MS));
    assert_eq!(queue.deadline(&first), Some(start + 10 * MS));
    timer.advance(7 * MS);
    assert_eq!(items(&queue), vec!["first"]);
}

#[test]
fn repeated_resets_and_a_reset_of_an_item_inserted_already_due() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let start = timer.now();
    let key = queue.insert_at(0, start).unwrap();
    for i in 1..=50u32 {
        assert!(queue.reset(&key, 100 * MS), "reset {i}");
    }
    assert!(queue.reset_at(&key, start + 40 * MS));
    timer.advance(39 * MS);
    assert!(drain(&queue).is_empty());
    timer.advance(MS);
    assert_eq!(
        drain(&queue).pop().map(|e| e.deadline()),
        Some(start + 40 * MS)
    );
}

#[test]
fn an_item_due_beyond_one_turn_of_the_wheel_comes_out_at_its_deadline() {
    let timer = manual(MS); // 512 ticks a turn
    let queue = timer.delay_queue();
    let start = timer.now();
    queue.insert("far", 5_000 * MS).unwrap();
    queue.insert("near", 300 * MS).unwrap();
    timer.advance(4_999 * MS);
    assert_eq!(items(&queue), vec!["near"]);
    timer.advance(MS);
    let e = drain(&queue).pop().expect("due at 5 s");
    assert_eq!((*e.get_ref(), e.deadline()), ("far", start + 5_000 * MS));
}

#[test]
fn inserts_after_items_expired_come_out_too() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    queue.insert(1, MS).unwrap();
    timer.advance(MS);
    assert_eq!(items(&queue), vec![1]);
    // tokio-util's insert_after_ready_poll.
    queue.insert(2, 3 * MS).unwrap();
    queue.insert(3, 3 * MS).unwrap();
    queue.insert(4, 2 * MS).unwrap();
    timer.advance(3 * MS);
    assert_eq!(items(&queue), vec![4, 2, 3]);
}

#[test]
fn many_items_come_out_once_each_in_deadline_order_and_never_early() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut keys = Vec::new();
    for i in 0..10_000u32 {
        keys.push((
            queue
                .insert(i, Duration::from_millis(rng.u64(0..3_000)))
                .unwrap(),
            i,
        ));
    }
    // Remove a third, reset a third.
    let mut removed = 0;
    for (n, (key, i)) in keys.iter().enumerate() {
        match n % 3 {
            0 => {
                assert_eq!(queue.remove(key), Some(*i));
                removed += 1;
            }
            1 => assert!(queue.reset(key, Duration::from_millis(rng.u64(0..3_000)))),
            _ => {}
        }
    }
    assert_eq!(queue.len(), 10_000 - removed);
    let mut seen = std::collections::HashSet::new();
    let mut last = timer.now();
    for _ in 0..3_100 {
        timer.advance(MS);
        for e in drain(&queue) {
            assert!(e.deadline() <= timer.now(), "early");
            assert!(
                e.deadline() >= last - MS,
                "out of order by more than a tick"
            );
            assert!(seen.insert(e.into_inner()), "an item came out twice");
        }
        last = timer.now();
    }
    assert_eq!(seen.len(), 10_000 - removed);
    assert!(queue.is_empty());
    assert_eq!(timer.pending_timeouts(), 0);
    // Counted once each: a removed item as cancelled, a yielded one as fired.
    let s = timer.stats();
    assert_eq!(
        (s.scheduled, s.cancelled, s.fired),
        (10_000, removed as u64, 10_000 - removed as u64)
    );
}

#[test]
fn clear_empties_the_queue_and_gives_back_every_timeout() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let keys: Vec<DelayKey> = (0..100)
        .map(|i| queue.insert(i, (i + 1) * MS).unwrap())
        .collect();
    timer.advance(10 * MS); // ten have fired, not yet yielded
    queue.clear();
    assert!(queue.is_empty());
    assert_eq!(timer.pending_timeouts(), 0);
    assert!(keys.iter().all(|k| queue.remove(k).is_none()));
    timer.advance(200 * MS);
    assert!(drain(&queue).is_empty(), "nothing comes out after clear");
    let key = queue.insert(7, MS).unwrap();
    timer.advance(MS);
    assert_eq!(
        drain(&queue).pop().map(|e| e.key()),
        Some(key),
        "usable after clear"
    );
}

#[test]
fn dropping_the_last_handle_cancels_every_pending_timeout() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    for i in 0..1_000u64 {
        queue.insert(i, Duration::from_secs(1 + i)).unwrap();
    }
    let clone = queue.clone();
    drop(queue);
    assert_eq!(
        timer.pending_timeouts(),
        1_000,
        "a clone still holds the queue"
    );
    drop(clone);
    assert_eq!(timer.pending_timeouts(), 0);
    assert_eq!(timer.stats().cancelled, 1_000);
}

#[test]
fn an_empty_queue_waits_rather_than_ends() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u8>();
    let mut t = task::spawn(());
    assert!(
        poll(&mut t, &queue).is_pending(),
        "tokio-util would end here"
    );
    queue.insert(1, 2 * MS).unwrap();
    timer.advance(2 * MS);
    assert!(t.is_woken());
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(Some(_))));
    assert!(
        poll(&mut t, &queue).is_pending(),
        "empty again: waits again"
    );
}

#[test]
fn the_stream_ends_once_the_timer_stopped_and_the_queue_is_empty() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let fired = queue.insert("fired", MS).unwrap();
    let pending = queue.insert("pending", Duration::from_secs(60)).unwrap();
    timer.advance(MS);
    let mut t = task::spawn(());
    let stopped = timer.stop().unwrap();
    assert_eq!(stopped.len(), 1, "the pending item's timeout is returned");
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(Some(e)) if e.key() == fired));
    assert!(
        poll(&mut t, &queue).is_pending(),
        "an item is still in the queue"
    );
    assert_eq!(queue.insert("late", MS), Err(TimerError::Shutdown));
    assert_eq!(queue.remove(&pending), Some("pending"), "nothing is lost");
    assert!(t.is_woken(), "the last remove wakes the consumer");
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(None)));
}

#[test]
fn stop_wakes_a_consumer_waiting_on_an_empty_queue() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u8>();
    let mut t = task::spawn(());
    assert!(poll(&mut t, &queue).is_pending());
    timer.stop().unwrap();
    assert!(t.is_woken());
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(None)));
}

#[test]
fn running_a_stopped_items_task_hands_the_item_to_the_stream() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let key = queue.insert(5, Duration::from_secs(60)).unwrap();
    for timeout in timer.stop().unwrap() {
        timeout
            .take_task()
            .expect("stopped with its task")
            .run(&timeout);
    }
    let out = drain(&queue);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].key(), *out[0].get_ref()), (key, 5));
}

#[test]
fn a_key_from_another_queue_names_nothing() {
    let timer = manual(MS);
    let a = timer.delay_queue();
    let b = timer.delay_queue();
    let key_a = a.insert("a", MS).unwrap();
    let _key_b = b.insert("b", MS).unwrap();
    assert_eq!(b.remove(&key_a), None);
    assert_eq!(b.deadline(&key_a), None);
    assert_eq!(a.remove(&key_a), Some("a"));
}

#[test]
fn items_come_out_in_order_on_a_timer_with_an_executor() {
    let jobs = QueueExecutor::default();
    let timer = jobs.timer(MS);
    let queue = timer.delay_queue();
    for i in 0..10u64 {
        queue.insert(i, Duration::from_millis(10 - i)).unwrap();
    }
    timer.advance(10 * MS);
    assert_eq!(
        jobs.len(),
        0,
        "an item's timeout runs on the driver, not the executor"
    );
    assert_eq!(items(&queue), (0..10).rev().collect::<Vec<_>>());
}

#[test]
fn refused_inserts_drop_the_item_and_count_nowhere() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(2)
        .build()
        .unwrap();
    let queue = timer.delay_queue();
    let item = std::sync::Arc::new(());
    queue.insert(item.clone(), MS).unwrap();
    queue.insert(item.clone(), MS).unwrap();
    assert!(matches!(
        queue.insert(item.clone(), MS),
        Err(TimerError::AtCapacity { .. })
    ));
    assert_eq!(
        std::sync::Arc::strong_count(&item),
        3,
        "the refused item was dropped"
    );
    assert_eq!(queue.len(), 2);
}

struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("an item's Drop panicked");
        }
    }
}

#[test]
fn a_panicking_item_drop_does_not_escape_clear_or_the_queues_drop() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    queue.insert(PanicsOnDrop, MS).unwrap();
    queue.clear();
    queue.insert(PanicsOnDrop, Duration::from_secs(5)).unwrap();
    drop(queue);
    assert_eq!(timer.pending_timeouts(), 0);
}
