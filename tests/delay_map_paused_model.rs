//! Model check with proptest: random operations on a `DelayMap` on a `tokio_clock()` timer on a
//! paused runtime, against a `HashMap` of deadlines and values: insert and `insert_at` (replacing),
//! reset and `reset_at` (earlier, later, into the past), remove, `advance` by nothing, by less than
//! a millisecond and by more, draining through one of two consumers, `close`. Deadlines are
//! `tokio::time::Instant`s, off the millisecond grid too. After each drain exactly the keys due
//! by now came out (on a paused clock what is due is ready at that instant), each once, with its
//! latest value; nothing comes out early, replaced or removed.
//!
//! The map starts on or off tokio's millisecond grid, on the default wheel or on a small one of
//! quarter-, one- or ten-millisecond ticks. `tests/delay_map_model.rs` checks deadline order on
//! the manual clock; here the order is not asserted, as a key reset into the past after another
//! fired comes out after that one.

use std::collections::HashMap;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::noop_waker_ref;
use hashed_wheel_timer::{DelayMap, HashedWheelTimer, TimerError};
use proptest::prelude::*;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
enum Op {
    Insert(u8, Duration, bool),
    Reset(u8, Duration, bool),
    /// `reset_at(now - back)`.
    ResetPast(u8, Duration),
    Remove(u8),
    Advance(Duration),
    /// Through the map's first handle, or (true) its second.
    Drain(bool),
    Close,
}

fn delay() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0..50u64).prop_map(Duration::from_millis),
        (0..50_000u64).prop_map(Duration::from_micros),
        (0..2_000_000u64).prop_map(Duration::from_nanos),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let key = 0u8..6;
    let op = prop_oneof![
        5 => (key.clone(), delay(), any::<bool>()).prop_map(|(k, d, at)| Op::Insert(k, d, at)),
        3 => (key.clone(), delay(), any::<bool>()).prop_map(|(k, d, at)| Op::Reset(k, d, at)),
        1 => (key.clone(), 0..3_000u64).prop_map(|(k, us)| Op::ResetPast(k, Duration::from_micros(us))),
        2 => key.prop_map(Op::Remove),
        4 => prop_oneof![
            Just(Duration::ZERO),
            (1..1_000u64).prop_map(Duration::from_micros),
            (1..30u64).prop_map(Duration::from_millis),
        ]
        .prop_map(Op::Advance),
        3 => any::<bool>().prop_map(Op::Drain),
        1 => Just(Op::Close),
    ];
    prop::collection::vec(op, 1..60)
}

/// `offset`: how far off tokio's millisecond grid the map starts; `wheel`: its timer's tick and
/// buckets.
async fn check(offset: Duration, wheel: (Duration, usize), ops: Vec<Op>) {
    tokio::time::advance(offset).await;
    let timer = HashedWheelTimer::builder().tokio_clock();
    let timer = timer.tick_duration(wheel.0).ticks_per_wheel(wheel.1);
    let timer = timer.build().unwrap();
    let start = Instant::now();
    let first: DelayMap<u8, usize> = timer.delay_map();
    let second = first.clone();
    let mut model: HashMap<u8, (Instant, usize)> = HashMap::new();
    let mut closed = false;
    let mut cx = Context::from_waker(noop_waker_ref());
    for (step, op) in ops.into_iter().enumerate() {
        let now = Instant::now();
        let at = |d: Duration| now + d;
        match op {
            Op::Insert(k, d, absolute) => {
                let got = if absolute {
                    first.insert_at(k, step, at(d))
                } else {
                    first.insert(k, step, d)
                };
                if closed {
                    assert_eq!(got, Err(TimerError::QueueClosed), "step {step}");
                } else {
                    let want = model.insert(k, (at(d), step)).map(|e| e.1);
                    assert_eq!(got, Ok(want), "step {step} {op:?}");
                }
            }
            Op::Reset(k, d, absolute) => {
                let got = if absolute {
                    first.reset_at(&k, at(d))
                } else {
                    first.reset(&k, d)
                };
                reset(&mut model, k, at(d), got, closed, now, step);
            }
            Op::ResetPast(k, back) => {
                let to = (now - back).max(start);
                let got = first.reset_at(&k, to);
                reset(&mut model, k, to, got, closed, now, step);
            }
            Op::Remove(k) => {
                let want = model.remove(&k).map(|e| e.1);
                assert_eq!(first.remove(&k), want, "step {step} {op:?}");
            }
            Op::Advance(by) => tokio::time::advance(by).await,
            Op::Close => {
                first.close();
                closed = true;
            }
            Op::Drain(other) => {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
                let consumer = if other { &second } else { &first };
                let mut got = Vec::new();
                let end = loop {
                    match consumer.poll_expired(&mut cx) {
                        Poll::Ready(Some(pair)) => got.push(pair),
                        Poll::Ready(None) => break true,
                        Poll::Pending => break false,
                    }
                };
                got.sort_unstable();
                let mut due: Vec<(u8, usize)> = model
                    .iter()
                    .filter(|(_, e)| e.0 <= now)
                    .map(|(&k, e)| (k, e.1))
                    .collect();
                due.sort_unstable();
                assert_eq!(
                    got,
                    due,
                    "step {step}: yielded, and due by {:?}",
                    now - start
                );
                model.retain(|_, e| e.0 > now);
                assert_eq!(end, closed && model.is_empty(), "step {step}: the end");
                assert_eq!(
                    timer.pending_timeouts(),
                    model.len(),
                    "step {step}: pending"
                );
            }
        }
        for k in 0..6 {
            let want = model.get(&k).map(|&(d, v)| (d.into_std(), v));
            let got = first.get_deadline(&k).zip(first.get(&k));
            assert_eq!(got, want, "step {step}: key {k}");
        }
        assert_eq!(first.len(), model.len(), "step {step}: len");
    }
}

/// A reset returned `got`: true if the key is in the map, unless its deadline fired and the map
/// is closed (then it keeps its old deadline, and false).
fn reset(
    model: &mut HashMap<u8, (Instant, usize)>,
    k: u8,
    to: Instant,
    got: bool,
    closed: bool,
    now: Instant,
    step: usize,
) {
    match model.get_mut(&k) {
        None => assert!(!got, "step {step}: reset of key {k}, not in the map"),
        Some(entry) if got => entry.0 = to,
        Some(entry) => assert!(
            closed && entry.0 <= now,
            "step {step}: reset of key {k} refused"
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("CASES").map_or(256, |c| c.parse().unwrap())))]

    #[test]
    fn delay_map_on_a_paused_clock_against_a_hashmap(
        offset in prop_oneof![Just(0u64), 0..1_000_000u64],
        wheel in prop_oneof![
            3 => Just((Duration::from_millis(1), 512)),
            1 => (
                prop_oneof![Just(250u64), Just(1_000), Just(10_000)].prop_map(Duration::from_micros),
                prop_oneof![Just(4usize), Just(16)],
            ),
        ],
        ops in ops(),
    ) {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(check(Duration::from_nanos(offset), wheel, ops));
    }
}

/// Counts its drops, and panics in each.
struct Bomb(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        panic!("an item panicked in Drop");
    }
}

/// Items and values that panic in `Drop`: where the crate drops them (`clear`, a refused insert,
/// the last handle's drop, a replaced deadline's fire), the panic is caught, each is dropped
/// once, and nothing else is lost; the ones handed back are the caller's to drop.
#[tokio::test(start_paused = true)]
async fn items_and_values_that_panic_in_drop_are_each_dropped_once_and_nothing_is_lost() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bomb = || Bomb(drops.clone());
    let dropped = || drops.load(std::sync::atomic::Ordering::SeqCst);
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let mut cx = Context::from_waker(noop_waker_ref());

    let queue = timer.delay_queue();
    for i in 0..4u64 {
        queue
            .insert(bomb(), Duration::from_micros(300 * i))
            .unwrap();
    }
    queue.clear();
    assert_eq!((dropped(), queue.len()), (4, 0), "clear");
    let _ = queue.insert(bomb(), Duration::from_millis(1)).unwrap();
    tokio::time::advance(Duration::from_millis(1)).await;
    let Poll::Ready(Some(out)) = queue.poll_expired(&mut cx) else {
        panic!("the item is due");
    };
    assert!(
        catch_unwind(AssertUnwindSafe(|| drop(out))).is_err(),
        "the caller's drop"
    );
    queue.close();
    assert!(queue.insert(bomb(), Duration::ZERO).is_err());
    assert_eq!(dropped(), 6, "a refused insert drops its item");
    let queue = timer.delay_queue();
    queue.insert(bomb(), Duration::from_millis(5)).unwrap();
    drop(queue);
    assert_eq!(dropped(), 7, "the last handle's drop");

    let map: DelayMap<u8, Bomb> = timer.delay_map();
    map.insert(1, bomb(), Duration::from_micros(10)).unwrap();
    tokio::time::advance(Duration::from_micros(10)).await;
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    // Its deadline fired; replacing it files a fresh one, and the fired one is skipped.
    let old = map.insert(1, bomb(), Duration::from_micros(500)).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| drop(old))).is_err());
    assert!(
        map.poll_expired(&mut cx).is_pending(),
        "the replaced deadline is skipped"
    );
    assert_eq!((dropped(), map.len()), (8, 1));
    tokio::time::advance(Duration::from_micros(500)).await;
    let Poll::Ready(Some((1, value))) = map.poll_expired(&mut cx) else {
        panic!("the new value is due");
    };
    assert!(catch_unwind(AssertUnwindSafe(|| drop(value))).is_err());
    map.insert(2, bomb(), Duration::from_millis(3)).unwrap();
    map.insert(3, bomb(), Duration::from_millis(3)).unwrap();
    map.clear();
    assert_eq!((dropped(), map.len()), (11, 0), "the map's clear");
    map.insert(4, bomb(), Duration::from_millis(3)).unwrap();
    drop(map);
    assert_eq!(dropped(), 12, "the map's last handle");
    assert_eq!(timer.pending_timeouts(), 0);
}
