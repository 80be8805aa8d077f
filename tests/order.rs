//! Firing order: within a tick by deadline, then by submission; equal
//! deadlines first in, first out, as Netty's EventLoop orders scheduled
//! tasks by id.

mod common;

use common::{manual, Fired};
use hashed_wheel_timer::HashedWheelTimer;
use std::ops::Range;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Schedules one timeout per label, all with the same delay.
fn batch(fired: &Fired, timer: &HashedWheelTimer, labels: Range<usize>, delay: Duration) {
    for label in labels {
        fired.schedule(timer, label, delay);
    }
}

#[test]
fn equal_deadlines_fire_in_submission_order() {
    let timer = manual(MS);
    let fired = Fired::default();
    // The first half reaches the wheel before the second half is submitted;
    // all 1,000 share one deadline, 50 ms from the start.
    batch(&fired, &timer, 0..500, MS * 50);
    timer.advance(MS * 10);
    batch(&fired, &timer, 500..1000, MS * 40);
    timer.advance(MS * 100);
    assert_eq!(fired.labels(), (0..1000).collect::<Vec<_>>());
}

#[test]
fn equal_deadlines_in_a_later_round_fire_in_submission_order() {
    // 5 s is round 9 of a 512-tick wheel: the first two batches wait in the
    // overflow, the third arrives after the round moved into its buckets.
    let timer = manual(MS);
    let fired = Fired::default();
    batch(&fired, &timer, 0..100, MS * 5000);
    timer.advance(MS * 1000);
    batch(&fired, &timer, 100..200, MS * 4000);
    timer.advance(MS * 3700);
    batch(&fired, &timer, 200..300, MS * 300);
    timer.advance(MS * 1000);
    assert_eq!(fired.labels(), (0..300).collect::<Vec<_>>());
}

#[test]
fn within_a_tick_by_deadline_then_by_submission() {
    let timer = manual(MS * 10);
    let fired = Fired::default();
    // Filed into the wheel first ...
    fired.schedule(&timer, 0, MS * 9);
    fired.schedule(&timer, 1, MS * 8);
    fired.schedule(&timer, 2, MS * 9);
    timer.advance(Duration::ZERO);
    // ... then, still in the intake when the tick fires, earlier deadlines
    // of the same tick.
    fired.schedule(&timer, 3, MS);
    fired.schedule(&timer, 4, MS * 9);
    fired.schedule(&timer, 5, MS * 8);
    fired.schedule(&timer, 6, MS);
    timer.advance(MS * 10);
    assert_eq!(fired.labels(), vec![3, 6, 1, 5, 0, 2, 4]);
}

/// Cells in a lane's ring (`RING_BITS` in `src/lane.rs`): one thread's
/// timeouts past these, not yet drained, overflow.
const RING: usize = 1 << 14;

#[test]
fn equal_deadlines_fire_in_submission_order_across_a_full_ring() {
    let timer = manual(MS);
    let fired = Fired::default();
    let ts: Vec<_> = (0..RING + 100)
        .map(|label| fired.schedule(&timer, label, MS * 5))
        .collect();
    // Cancels free the oldest cells: the ring has room again, yet these
    // come after the 100 that overflowed.
    ts[..50].iter().for_each(|t| assert!(t.cancel()));
    batch(&fired, &timer, RING + 100..RING + 200, MS * 5);
    // Filed, overflow and all: the next ones queue in the ring again.
    timer.advance(Duration::ZERO);
    batch(&fired, &timer, RING + 200..RING + 300, MS * 5);
    timer.advance(MS * 5);
    let labels = fired.labels();
    let first_swap = labels.windows(2).find(|w| w[0] > w[1]);
    assert_eq!(first_swap, None, "fired out of submission order");
    assert_eq!(labels, (50..RING + 300).collect::<Vec<_>>());
}

/// On a tokio clock the driver turns where tokio wakes it: a timeout that
/// arrives while it sleeps, due with one already in the wheel, is filed
/// by the turn that fires both, and still fires second.
#[tokio::test(start_paused = true)]
async fn an_equal_deadline_filed_by_the_firing_turn_fires_after_the_one_in_the_wheel() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let labels = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let deadline = timer.now() + MS * 50;
    let schedule_at = |label: usize| {
        let labels = labels.clone();
        let task = move |_: &hashed_wheel_timer::Timeout| labels.lock().unwrap().push(label);
        timer.new_timeout_at(task, deadline).unwrap()
    };
    let _first = schedule_at(0);
    tokio::time::sleep(MS * 10).await; // the driver files the first
    let _second = schedule_at(1); // does not wake it: due with the first
    tokio::time::sleep(MS * 100).await;
    assert_eq!(*labels.lock().unwrap(), vec![0, 1]);
}
