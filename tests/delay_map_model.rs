//! Model check with proptest: random operations on a `DelayMap` on the
//! manual clock against a plain `BTreeMap` of deadlines. After every step
//! the keys, values and deadlines agree; the stream yields exactly the keys
//! due, in deadline order, never one early, replaced or removed.

use hashed_wheel_timer::{DelayMap, HashedWheelTimer, TimerError};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::task::{Context, Poll};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[derive(Debug, Clone)]
enum Op {
    /// Insert key with this delay in ms (with `insert_at` if the flag).
    Insert(u8, u64, bool),
    Reset(u8, u64, bool),
    Remove(u8),
    Advance(u64),
    Drain,
    Close,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let key = 0u8..8;
    let delay = prop_oneof![Just(0u64), 0..5u64, 0..60u64, 0..2_000u64];
    let op = prop_oneof![
        5 => (key.clone(), delay.clone(), any::<bool>()).prop_map(|(k, d, at)| Op::Insert(k, d, at)),
        3 => (key.clone(), delay, any::<bool>()).prop_map(|(k, d, at)| Op::Reset(k, d, at)),
        2 => key.prop_map(Op::Remove),
        4 => prop_oneof![0..3u64, 0..60u64, 0..700u64].prop_map(Op::Advance),
        3 => Just(Op::Drain),
        1 => Just(Op::Close),
    ];
    prop::collection::vec(op, 1..80)
}

/// The reference: each key's deadline (ms since the start), value, and
/// whether the deadline has fired (at a turn of the wheel: an advance, or
/// a poll of the stream).
#[derive(Default)]
struct Model {
    now: u64,
    closed: bool,
    keys: BTreeMap<u8, (u64, usize, bool)>,
}

impl Model {
    fn turn(&mut self) {
        let now = self.now;
        self.keys.values_mut().for_each(|e| e.2 |= e.0 <= now);
    }
}

fn check(ops: Vec<Op>) -> Result<(), String> {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let start = timer.now();
    let map: DelayMap<u8, usize> = timer.delay_map();
    let mut model = Model::default();
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    for (step, op) in ops.into_iter().enumerate() {
        let at = |n: u64| timer.now() + ms(n);
        match op {
            Op::Insert(k, d, absolute) => {
                let got = if absolute {
                    map.insert_at(k, step, at(d))
                } else {
                    map.insert(k, step, ms(d))
                };
                let want = if model.closed {
                    Err(TimerError::QueueClosed)
                } else {
                    Ok(model
                        .keys
                        .insert(k, (model.now + d, step, false))
                        .map(|e| e.1))
                };
                if got != want {
                    return Err(format!("step {step} {op:?}: {got:?}, want {want:?}"));
                }
            }
            Op::Reset(k, d, absolute) => {
                let got = if absolute {
                    map.reset_at(&k, at(d))
                } else {
                    map.reset(&k, ms(d))
                };
                // A fired deadline is replaced by a fresh one, which a
                // closed map refuses.
                let entry = model.keys.get_mut(&k).filter(|e| !(e.2 && model.closed));
                let want = entry.is_some();
                if let Some(entry) = entry {
                    *entry = (model.now + d, entry.1, false);
                }
                if got != want {
                    return Err(format!("step {step} {op:?}: {got}, want {want}"));
                }
            }
            Op::Remove(k) => {
                let (got, want) = (map.remove(&k), model.keys.remove(&k).map(|e| e.1));
                if got != want {
                    return Err(format!("step {step} {op:?}: {got:?}, want {want:?}"));
                }
            }
            Op::Advance(n) => {
                timer.advance(ms(n));
                model.now += n;
                model.turn();
            }
            Op::Close => {
                map.close();
                model.closed = true;
            }
            Op::Drain => {
                model.turn();
                let mut got = Vec::new();
                let end = loop {
                    match map.poll_expired(&mut cx) {
                        Poll::Ready(Some(pair)) => got.push(pair),
                        Poll::Ready(None) => break true,
                        Poll::Pending => break false,
                    }
                };
                // Due keys, in deadline order (any order among equal ones).
                let mut due: Vec<(u64, u8, usize)> = model
                    .keys
                    .iter()
                    .filter(|(_, e)| e.0 <= model.now)
                    .map(|(&k, &(deadline, v, _))| (deadline, k, v))
                    .collect();
                due.sort_unstable();
                let order: Vec<u64> = got
                    .iter()
                    .map(|(k, _)| model.keys.get(k).map_or(u64::MAX, |e| e.0))
                    .collect();
                let mut sorted: Vec<(u64, u8, usize)> = got
                    .iter()
                    .zip(&order)
                    .map(|(&(k, v), &d)| (d, k, v))
                    .collect();
                sorted.sort_unstable();
                if sorted != due || order.windows(2).any(|w| w[0] > w[1]) {
                    return Err(format!("step {step}: yielded {got:?}, due {due:?}"));
                }
                model.keys.retain(|_, e| e.0 > model.now);
                if end != (model.closed && model.keys.is_empty()) {
                    return Err(format!("step {step}: the stream ended: {end}"));
                }
                if timer.pending_timeouts() != model.keys.len() {
                    return Err(format!("step {step}: {} pending", timer.pending_timeouts()));
                }
            }
        }
        for k in 0..8 {
            let want = model.keys.get(&k).map(|&(d, v, _)| (start + ms(d), v));
            let got = map.get_deadline(&k).zip(map.get(&k));
            if got != want || map.contains_key(&k) != want.is_some() {
                return Err(format!("step {step}: key {k}: {got:?}, want {want:?}"));
            }
        }
        if map.len() != model.keys.len() {
            return Err(format!("step {step}: len {}", map.len()));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 512 }))]

    #[test]
    fn delay_map_against_a_btreemap_of_deadlines(ops in ops()) {
        check(ops).map_err(TestCaseError::fail)?;
    }
}
