//! `DelayQueue::peek` names the item that comes out next, and items come out in the order their
//! deadlines fired, on a paused tokio clock: cases `delay_queue_vs_tokio_util`'s proptest found.

mod common;

use common::paused::{ms, settle};
use hashed_wheel_timer::{DelayQueue, Expired, HashedWheelTimer};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Polls once with a waker that does nothing.
fn poll_once<T>(queue: &DelayQueue<T>) -> Poll<Option<Expired<T>>> {
    queue.poll_expired(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

/// tokio-util's `peek` is "the Key that poll_expired will pull out of the queue next"; this
/// crate's docs say the same. An item whose deadline fired comes out before one reset into the
/// past after that fire (the stream yields in the order deadlines fired), so `peek` names the
/// fired one first, then the other. (Found by `delay_queue_against_tokio_util`.)
#[tokio::test(start_paused = true)]
async fn peek_names_a_fired_item_before_one_reset_into_the_past() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let queue = timer.delay_queue();
    let start = Instant::now();
    let fired = queue.insert("fired", ms(5)).unwrap();
    let moved = queue.insert("moved", ms(100)).unwrap();
    tokio::time::advance(ms(6)).await;
    settle().await;
    assert_eq!(timer.stats().fired, 1, "the first item's deadline fired");
    assert!(queue.reset_at(&moved, start + ms(1)), "into the past");
    assert_eq!(queue.peek(), Some(fired), "peek names what comes out next");
    let Poll::Ready(Some(out)) = poll_once(&queue) else {
        panic!("the fired item is ready");
    };
    assert_eq!(out.key(), fired);
    assert_eq!(queue.peek(), Some(moved));
    let Poll::Ready(Some(out)) = poll_once(&queue) else {
        panic!("the moved item is ready");
    };
    assert_eq!(
        (out.key(), out.deadline()),
        (moved, (start + ms(1)).into_std())
    );
    assert_eq!(queue.peek(), None);
}

/// As above, with `insert_at` a deadline already past.
#[tokio::test(start_paused = true)]
async fn peek_names_a_fired_item_before_one_inserted_into_the_past() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let queue = timer.delay_queue();
    let start = Instant::now();
    let fired = queue.insert("fired", ms(5)).unwrap();
    tokio::time::advance(ms(6)).await;
    settle().await;
    assert_eq!(timer.stats().fired, 1, "the first item's deadline fired");
    let past = queue.insert_at("past", start + ms(1)).unwrap();
    assert_eq!(queue.peek(), Some(fired), "peek names what comes out next");
    let Poll::Ready(Some(out)) = poll_once(&queue) else {
        panic!("the fired item is ready");
    };
    assert_eq!(out.key(), fired);
    assert_eq!(queue.peek(), Some(past));
    assert!(matches!(poll_once(&queue), Poll::Ready(Some(e)) if e.key() == past));
}

/// On a tokio clock, items inserted already due come out in deadline order with an earlier one
/// due in the same tick whose deadline passed meanwhile, as peek says (proptest found them ahead
/// of it: filed at the tick's start, they fired first in the turn that fired all three).
#[tokio::test(start_paused = true)]
async fn items_inserted_already_due_come_out_after_an_earlier_one_of_their_tick() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let queue = timer.delay_queue();
    tokio::time::advance(ms(1)).await;
    let first = queue.insert("first", Duration::from_nanos(1)).unwrap();
    settle().await; // filed in the tick under way
    tokio::time::advance(Duration::from_micros(1)).await;
    let now = [(); 2].map(|()| queue.insert("now", Duration::ZERO).unwrap());
    assert_eq!(queue.peek(), Some(first), "the earliest deadline");
    for key in [first, now[0], now[1]] {
        assert!(matches!(poll_once(&queue), Poll::Ready(Some(e)) if e.key() == key));
    }
}
