//! The crate's `DelayQueue` against tokio-util's on a paused runtime left to auto-advance: a
//! producer task sleeps (tokio's own sleep) between random inserts, removes and resets applied to
//! both queues, and a consumer task per queue awaits the next item, so that items come out where
//! the consumers are woken, not where a test polls. Each item comes out of each queue once, or is
//! removed from both; never before its deadline; and ours no later than tokio-util's.
//!
//! tokio-util's stream ends whenever its queue is empty: its consumer then waits for the
//! producer's next insert (a `Notify`) and polls again.

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use hashed_wheel_timer::{DelayKey, HashedWheelTimer};
use proptest::prelude::*;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::time::delay_queue::Key as TheirKey;
use tokio_util::time::DelayQueue as TheirQueue;

#[derive(Debug, Clone, Copy)]
enum Op {
    Insert(Duration),
    Remove(usize),
    Reset(usize, Duration),
}

fn delay() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0..40u64).prop_map(Duration::from_millis),
        (0..40_000u64).prop_map(Duration::from_micros),
        (0..600_000_000u64).prop_map(Duration::from_micros), // up to ten minutes: later rounds
    ]
}

fn ops() -> impl Strategy<Value = Vec<(Duration, Op)>> {
    let gap = prop_oneof![
        Just(Duration::ZERO),
        (1..3_000u64).prop_map(Duration::from_micros),
        (1..20u64).prop_map(Duration::from_millis),
        (1..200u64).prop_map(Duration::from_secs),
    ];
    let op = prop_oneof![
        4 => delay().prop_map(Op::Insert),
        1 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), delay()).prop_map(|(i, d)| Op::Reset(i, d)),
    ];
    prop::collection::vec((gap, op), 1..40)
}

type Out = Arc<Mutex<HashMap<u32, Instant>>>;

async fn check(ops: Vec<(Duration, Op)>) {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let ours = timer.delay_queue::<u32>();
    let theirs = Arc::new(Mutex::new(TheirQueue::<u32>::new()));
    let (ours_out, theirs_out): (Out, Out) = Default::default();
    let inserted = Arc::new(Notify::new());
    let ours_consumer = {
        let (mut queue, out) = (ours.clone(), ours_out.clone());
        tokio::spawn(async move {
            while let Some(e) = queue.next().await {
                let first = out.lock().unwrap().insert(e.into_inner(), Instant::now());
                assert!(first.is_none(), "an item came out of ours twice");
            }
        })
    };
    let theirs_consumer = {
        let (queue, out, inserted) = (theirs.clone(), theirs_out.clone(), inserted.clone());
        tokio::spawn(async move {
            loop {
                let waiting = inserted.notified();
                let next = poll_fn(|cx| queue.lock().unwrap().poll_expired(cx)).await;
                match next {
                    Some(e) => {
                        out.lock().unwrap().insert(e.into_inner(), Instant::now());
                    }
                    None => waiting.await, // empty: until the next insert, or the end
                }
            }
        })
    };
    // id -> (ours, theirs, deadline, live)
    let mut items: Vec<(DelayKey, TheirKey, Instant, bool)> = Vec::new();
    for (gap, op) in ops {
        tokio::time::sleep(gap).await;
        let now = Instant::now();
        let out = |id: usize| ours_out.lock().unwrap().contains_key(&(id as u32));
        let live: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].3 && !out(i))
            .collect();
        let mut theirs = theirs.lock().unwrap();
        match op {
            Op::Insert(delay) => {
                let id = items.len() as u32;
                let key = ours.insert(id, delay).unwrap();
                items.push((key, theirs.insert(id, delay), now + delay, true));
                inserted.notify_one();
            }
            Op::Remove(index) | Op::Reset(index, _) if live.is_empty() => {
                let _ = index;
            }
            Op::Remove(index) => {
                let id = live[index % live.len()];
                if theirs_out.lock().unwrap().contains_key(&(id as u32)) {
                    continue; // out of tokio-util's, not yet of ours: leave it
                }
                let item = &mut items[id];
                assert_eq!(ours.remove(&item.0), Some(id as u32));
                assert_eq!(theirs.remove(&item.1).into_inner(), id as u32);
                item.3 = false;
            }
            Op::Reset(index, delay) => {
                let id = live[index % live.len()];
                if theirs_out.lock().unwrap().contains_key(&(id as u32)) {
                    continue;
                }
                let item = &mut items[id];
                if ours.reset(&item.0, delay) {
                    theirs.reset(&item.1, delay);
                    item.2 = now + delay;
                } else {
                    assert!(item.2 <= now, "a reset refused before the deadline");
                }
            }
        }
    }
    ours.close();
    tokio::time::sleep(Duration::from_millis(100)).await;
    ours_consumer.await.unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await; // tokio-util's last, up to its millisecond
    theirs_consumer.abort();
    let (ours_out, theirs_out) = (ours_out.lock().unwrap(), theirs_out.lock().unwrap());
    for (id, &(_, _, deadline, live)) in items.iter().enumerate() {
        let id = id as u32;
        let (ours, theirs) = (ours_out.get(&id), theirs_out.get(&id));
        if !live {
            assert!(
                ours.is_none() && theirs.is_none(),
                "removed item {id} came out"
            );
            continue;
        }
        let (Some(&ours), Some(&theirs)) = (ours, theirs) else {
            panic!("item {id} came out of ours {ours:?}, of tokio-util's {theirs:?}");
        };
        assert!(ours >= deadline, "item {id} came out of ours early");
        assert!(
            ours <= theirs,
            "item {id} due at {deadline:?}: ours at {ours:?}, after tokio-util's at {theirs:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(std::env::var("CASES").map_or(128, |c| c.parse().unwrap())))]

    #[test]
    fn delay_queue_auto_advanced_against_tokio_util(ops in ops()) {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(check(ops));
    }
}

/// Four consumer tasks share the queue on an auto-advancing paused runtime while a producer task
/// inserts, resets (into the past too), removes and peeks between sleeps: each item comes out
/// once to one consumer, never early, none is left unwoken (a lost wake-up would leave a consumer
/// waiting, and the runtime's clock jumping to the guard's deadline), and every stream ends
/// after `close`.
#[test]
fn four_consumer_tasks_share_the_queue_and_each_item_comes_out_once() {
    for seed in 0..16 {
        let mut runtime = tokio::runtime::Builder::new_current_thread();
        let runtime = runtime.enable_time().start_paused(true).build().unwrap();
        runtime.block_on(share(seed));
    }
}

async fn share(seed: u64) {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let queue = timer.delay_queue::<usize>();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let mut queue = queue.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(e) = queue.next().await {
                    let id = *e.get_ref();
                    assert!(
                        Instant::now() >= e.deadline().into(),
                        "item {id} came out early"
                    );
                    got.push(id);
                }
                got
            })
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut keys, mut removed) = (Vec::new(), Vec::new());
    let start = Instant::now();
    for id in 0..400 {
        tokio::time::sleep(Duration::from_micros(rng.u64(0..400))).await;
        let delay = Duration::from_micros(rng.u64(0..20_000));
        keys.push(queue.insert(id, delay).unwrap());
        let key = keys[rng.usize(0..keys.len())];
        match rng.u8(0..6) {
            0 => removed.extend(queue.remove(&key)),
            1 => _ = queue.reset_at(&key, start), // due, behind what fired
            2 => _ = queue.peek(),
            _ => {}
        }
    }
    queue.close();
    let guard = Duration::from_secs(3_600); // a hang guard on the paused clock
    let mut all = removed;
    for consumer in consumers {
        let got = tokio::time::timeout(guard, consumer).await;
        all.extend(got.expect("a consumer was left waiting").unwrap());
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..400).collect::<Vec<_>>(),
        "seed {seed}: each item once"
    );
}
