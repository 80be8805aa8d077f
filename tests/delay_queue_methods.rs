//! `DelayQueue` methods users reach for from tokio-util, on the manual
//! clock: `close` (inserts refused, the stream ends once drained, a reaper
//! task ends), `capacity` / `reserve` / `shrink_to_fit` / `compact`, keys
//! as numbers, `peek`, and which resets wake the consumer.

mod common;

use common::{drain, manual, poll};
use hashed_wheel_timer::{DelayKey, TimerError};
use std::task::Poll;
use std::time::Duration;
use tokio_test::task;

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_closed_queue_refuses_inserts_and_its_stream_ends_once_drained() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let mut t = task::spawn(());
    let later = queue.insert("later", 5 * MS).unwrap();
    let kept = queue.insert("kept", 2 * MS).unwrap();
    assert!(poll(&mut t, &queue).is_pending());
    assert!(!queue.is_closed());
    queue.close();
    assert!(
        queue.is_closed() && queue.clone().is_closed(),
        "for every handle"
    );
    assert!(t.is_woken(), "a waiting consumer looks again");
    assert_eq!(queue.insert("refused", MS), Err(TimerError::QueueClosed));
    assert_eq!(queue.len(), 2, "the refused item is not in");
    assert!(queue.reset(&kept, 3 * MS), "reset works as before");
    assert!(poll(&mut t, &queue).is_pending(), "two items still to come");
    timer.advance(3 * MS);
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(Some(e)) if e.key() == kept));
    assert!(poll(&mut t, &queue).is_pending(), "one still to come");
    assert_eq!(queue.remove(&later), Some("later"));
    assert!(t.is_woken(), "the last remove wakes the consumer");
    assert!(matches!(poll(&mut t, &queue), Poll::Ready(None)));
    assert!(
        matches!(poll(&mut t, &queue), Poll::Ready(None)),
        "and stays ended"
    );
}

#[test]
fn a_refused_insert_drops_its_item_at_once() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    queue.close();
    let item = std::sync::Arc::new(());
    assert_eq!(
        queue.insert(item.clone(), MS).unwrap_err(),
        TimerError::QueueClosed
    );
    assert_eq!(std::sync::Arc::strong_count(&item), 1, "dropped, not kept");
}

/// On a paused runtime, a reaper that never ends fails the test after an
/// hour of auto-advanced time instead of hanging it.
#[tokio::test(start_paused = true)]
async fn a_reaper_task_ends_when_its_queue_is_closed() {
    use futures::StreamExt;
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let mut reaper_queue = queue.clone();
    let reaper = tokio::spawn(async move {
        let mut reaped = Vec::new();
        while let Some(e) = reaper_queue.next().await {
            reaped.push(e.into_inner());
        }
        reaped
    });
    queue.insert("idle", 10 * MS).unwrap();
    tokio::task::yield_now().await;
    queue.close(); // the connection closed
    timer.advance(10 * MS);
    let ended = tokio::time::timeout(Duration::from_secs(3600), reaper).await;
    let reaped = ended.expect("the reaper ended").unwrap();
    assert_eq!(reaped, ["idle"], "it ended after the last item");
}

#[test]
fn capacity_reserve_and_shrink_to_fit() {
    let timer = manual(MS);
    let queue = timer.delay_queue_with_capacity::<u32>(64);
    assert!(queue.capacity() >= 64);
    let before = queue.capacity();
    queue.reserve(1_000);
    assert!(queue.capacity() >= 1_000, "room in this thread's shard");
    let keys: Vec<DelayKey> = (0..1_000).map(|i| queue.insert(i, MS).unwrap()).collect();
    assert!(queue.capacity() >= 1_000);
    for key in &keys[1..] {
        queue.remove(key);
    }
    queue.shrink_to_fit();
    assert!(
        queue.capacity() < 1_000,
        "the room past the last item is given back"
    );
    assert!(queue.capacity() >= 1);
    assert_eq!(queue.remove(&keys[0]), Some(0), "keys stay valid");
    queue.shrink_to_fit();
    assert_eq!(queue.capacity(), 0);
    assert!(before >= 64);
}

/// A capacity past what the timer can hold is clamped to it, not a "capacity overflow" panic.
#[test]
fn a_huge_capacity_or_reserve_is_clamped_to_what_the_timer_holds() {
    let timer = hashed_wheel_timer::HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(1_000)
        .build()
        .unwrap();
    let queue = timer.delay_queue_with_capacity::<u32>(usize::MAX);
    assert!((1_000..1 << 20).contains(&queue.capacity()));
    queue.reserve(usize::MAX);
    queue.insert(1, MS).unwrap();
    queue.reserve(usize::MAX);
    assert!((1_000..1 << 20).contains(&queue.capacity()));
}

/// On a timer with no `max_pending_timeouts`, room for 2^28 large items is more memory than
/// there is: the hint is not taken, where an allocation failure would abort the process.
#[test]
fn a_reserve_of_more_memory_than_there_is_aborts_nothing() {
    let timer = manual(MS);
    let queue = timer.delay_queue_with_capacity::<[u8; 1 << 16]>(usize::MAX);
    queue.reserve(usize::MAX);
    queue.insert([1; 1 << 16], MS).unwrap();
    queue.reserve(1 << 27);
    assert_eq!(queue.len(), 1);
}

#[test]
fn compact_keeps_keys_valid_and_gives_back_every_removed_slot() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let keys: Vec<DelayKey> = (0..100).map(|i| queue.insert(i, MS).unwrap()).collect();
    for key in keys.iter().step_by(2) {
        queue.remove(key);
    }
    queue.compact();
    assert_eq!(queue.capacity(), queue.len(), "no room left over");
    assert_eq!(queue.remove(&keys[0]), None, "a removed key stays stale");
    assert!(
        queue.reset(&keys[99], 3 * MS),
        "a moved item is found by its key"
    );
    assert_eq!(queue.deadline(&keys[99]), Some(timer.now() + 3 * MS));
    timer.advance(MS);
    let out = drain(&queue);
    assert_eq!(out.len(), 49, "every odd item but the reset one");
    assert!(
        out.iter().all(|e| keys.contains(&e.key())),
        "with their own keys"
    );
    assert_eq!(queue.remove(&keys[99]), Some(99));
}

#[test]
fn an_item_moved_by_two_compacts_keeps_its_key_and_its_old_places_name_new_items() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let keys: Vec<DelayKey> = (0..4).map(|i| queue.insert(i, 9 * MS).unwrap()).collect();
    assert!(queue.reset(&keys[3], 2 * MS), "the earliest");
    queue.remove(&keys[1]);
    queue.compact(); // item 3 moves to slot 1
    queue.remove(&keys[0]);
    queue.remove(&keys[2]);
    queue.compact(); // and on to slot 0
    assert_eq!(queue.capacity(), 1);
    assert_eq!(queue.peek(), Some(keys[3]), "peek names it by its own key");
    let newer = queue.insert(7, 5 * MS).unwrap();
    assert_eq!(
        queue.remove(&keys[1]),
        None,
        "a stale key names no newer item"
    );
    let out = queue.try_remove(&keys[3]).unwrap();
    assert_eq!((out.key(), out.into_inner()), (keys[3], 3));
    let newest = queue.insert(8, 4 * MS).unwrap(); // in slot 0 again
    assert_eq!(
        queue.peek(),
        Some(newest),
        "slot 0 no longer names the moved item"
    );
    timer.advance(9 * MS);
    let out = drain(&queue);
    let keys_out: Vec<_> = out.iter().map(|e| e.key()).collect();
    assert_eq!(
        keys_out,
        [newest, newer],
        "each with its own key, in deadline order"
    );
}

#[test]
fn keys_convert_to_and_from_u64_and_usize() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let a = queue.insert("a", MS).unwrap();
    let b = queue.insert("b", MS).unwrap();
    let raw_a: u64 = a.into();
    let raw_b: usize = b.into();
    assert_ne!(raw_a, raw_b as u64);
    assert_eq!(DelayKey::from(raw_a), a);
    assert_eq!(DelayKey::from(raw_b), b);
    let mut by_index = std::collections::HashMap::new();
    by_index.insert(raw_b, "b's state");
    assert_eq!(queue.remove(&DelayKey::from(raw_a)), Some("a"));
    let back = DelayKey::from(*by_index.keys().next().unwrap());
    assert_eq!(queue.remove(&back), Some("b"));
    assert_eq!(queue.remove(&DelayKey::from(raw_a)), None, "stale");
}

#[test]
fn peek_names_the_next_item_to_come_out() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    assert_eq!(queue.peek(), None);
    let late = queue.insert("late", 9 * MS).unwrap();
    let soon = queue.insert("soon", 2 * MS).unwrap();
    assert_eq!(queue.peek(), Some(soon));
    assert!(queue.reset(&late, MS));
    assert_eq!(queue.peek(), Some(late), "after a reset earlier");
    timer.advance(MS);
    assert_eq!(queue.peek(), Some(late), "fired, not yet yielded");
    assert_eq!(drain(&queue).len(), 1);
    assert_eq!(queue.peek(), Some(soon));
}

#[test]
fn a_reset_earlier_wakes_the_consumer_and_a_reset_later_does_not() {
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let key = queue.insert("x", 10 * MS).unwrap();
    let mut t = task::spawn(());
    assert!(poll(&mut t, &queue).is_pending());
    assert!(queue.reset(&key, 20 * MS));
    assert!(!t.is_woken(), "later: nothing to look at");
    assert!(queue.reset(&key, 5 * MS));
    assert!(
        t.is_woken(),
        "earlier: a consumer planning by peek looks again"
    );
}
