//! Model check: random operation sequences against a manual-clock timer and
//! a plain reference model (a `BTreeMap` keyed by deadline). After every
//! step the fired set and order, cancel results and `pending_timeouts()`
//! must agree; nothing fires early or more than one tick late.

use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
enum Op {
    /// Schedule with this delay, in nanoseconds.
    Schedule(u64),
    /// Cancel the n-th timeout scheduled so far (modulo their number).
    Cancel(usize),
    /// Advance the clock by this many nanoseconds.
    Advance(u64),
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pending,
    Fired,
    Cancelled,
    Stopped,
}

/// The reference: what the timer must do, computed the plain way.
struct Model {
    tick: u64,
    now: u64,
    stopped: bool,
    /// (fire tick, deadline, sequence) -> id, for pending timeouts.
    queue: BTreeMap<(u64, u64, usize), usize>,
    fates: Vec<Fate>,
    keys: Vec<(u64, u64, usize)>,
}

impl Model {
    fn schedule(&mut self, delay: u64) -> usize {
        let id = self.fates.len();
        let deadline = self.now.saturating_add(delay);
        // The first tick ending at or after the deadline, but never a tick
        // already processed.
        let fire_tick = deadline.div_ceil(self.tick).max(self.now / self.tick + 1);
        let key = (fire_tick, deadline, id);
        self.queue.insert(key, id);
        self.fates.push(Fate::Pending);
        self.keys.push(key);
        id
    }

    fn cancel(&mut self, id: usize) -> bool {
        match self.fates[id] {
            Fate::Pending => {
                self.queue.remove(&self.keys[id]);
                self.fates[id] = Fate::Cancelled;
                true
            }
            Fate::Stopped => {
                self.fates[id] = Fate::Cancelled;
                true
            }
            _ => false,
        }
    }

    /// Returns the ids that fire, in order.
    fn advance(&mut self, by: u64) -> Vec<usize> {
        if self.stopped {
            return vec![];
        }
        self.now = self.now.saturating_add(by);
        let last_tick = self.now / self.tick;
        let mut fired = vec![];
        while let Some((&key, &id)) = self.queue.iter().next() {
            if key.0 > last_tick {
                break;
            }
            self.queue.remove(&key);
            self.fates[id] = Fate::Fired;
            fired.push(id);
        }
        fired
    }

    fn stop(&mut self) -> HashSet<usize> {
        self.stopped = true;
        let ids: HashSet<usize> = std::mem::take(&mut self.queue).into_values().collect();
        for &id in &ids {
            self.fates[id] = Fate::Stopped;
        }
        ids
    }

    fn pending(&self) -> usize {
        self.queue.len()
    }
}

fn ops(tick: u64, wheel: u64) -> impl Strategy<Value = Vec<Op>> {
    let turn = tick * wheel;
    let delay = prop_oneof![
        Just(0u64),
        0..tick * 3,
        (0..wheel * 4).prop_map(move |t| t * tick), // exact tick boundaries
        0..turn * 5,                                // several wheel turns
        Just(u64::MAX),
    ];
    let op = prop_oneof![
        6 => delay.prop_map(Op::Schedule),
        3 => any::<usize>().prop_map(Op::Cancel),
        4 => prop_oneof![0..tick * 2, 0..turn * 2, Just(tick)].prop_map(Op::Advance),
        1 => Just(Op::Stop),
    ];
    prop::collection::vec(op, 1..60)
}

fn check(tick: u64, wheel: usize, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .tick_duration(Duration::from_nanos(tick))
        .ticks_per_wheel(wheel)
        .build()
        .unwrap();
    let origin = timer.now();
    let mut model = Model {
        tick,
        now: 0,
        stopped: false,
        queue: BTreeMap::new(),
        fates: vec![],
        keys: vec![],
    };
    let log: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let mut handles: Vec<Timeout> = vec![];

    for op in ops {
        match op {
            Op::Schedule(delay) => {
                let (log, clock) = (log.clone(), timer.clone());
                let id = handles.len();
                let result = timer.new_timeout(
                    move |_: &Timeout| log.lock().unwrap().push((id, clock.now())),
                    Duration::from_nanos(delay),
                );
                if model.stopped {
                    prop_assert_eq!(result.unwrap_err(), TimerError::Shutdown);
                    continue;
                }
                prop_assert_eq!(model.schedule(delay), id);
                handles.push(result.unwrap());
            }
            Op::Cancel(n) if !handles.is_empty() => {
                let id = n % handles.len();
                prop_assert_eq!(handles[id].cancel(), model.cancel(id), "cancel of {}", id);
            }
            Op::Cancel(_) => {}
            Op::Advance(by) => {
                let expected = model.advance(by);
                timer.advance(Duration::from_nanos(by));
                let fired: Vec<(usize, Instant)> = std::mem::take(&mut *log.lock().unwrap());
                let ids: Vec<usize> = fired.iter().map(|f| f.0).collect();
                prop_assert_eq!(&ids, &expected, "fired set and order");
                for (id, at) in fired {
                    let deadline = handles[id].deadline();
                    prop_assert!(at >= deadline, "{} fired early", id);
                    let late = at - deadline;
                    prop_assert!(late <= Duration::from_nanos(tick), "{} late by {:?}", id, late);
                    prop_assert_eq!(at - origin, Duration::from_nanos(model.keys[id].0 * tick));
                }
            }
            Op::Stop => {
                let expected = model.stop();
                let stopped: HashSet<usize> = timer
                    .stop()
                    .unwrap()
                    .iter()
                    .map(|t| handles.iter().position(|h| h == t).unwrap())
                    .collect();
                prop_assert_eq!(stopped, expected);
            }
        }
        prop_assert_eq!(timer.pending_timeouts(), model.pending());
        for (id, t) in handles.iter().enumerate() {
            let fate = match (t.is_expired(), t.is_cancelled(), t.is_stopped()) {
                (true, false, false) => Fate::Fired,
                (false, true, false) => Fate::Cancelled,
                (false, false, true) => Fate::Stopped,
                (false, false, false) => Fate::Pending,
                other => return Err(TestCaseError::fail(format!("{id}: two states {other:?}"))),
            };
            prop_assert_eq!(fate, model.fates[id], "fate of {}", id);
        }
    }
    Ok(())
}

const CASES: u32 = if cfg!(miri) { 8 } else { 512 };

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn small_wheel_many_turns(ops in ops(10, 4)) {
        check(10, 4, ops)?;
    }

    #[test]
    fn default_wheel(ops in ops(1_000_000, 512)) {
        check(1_000_000, 512, ops)?;
    }

    #[test]
    fn odd_tick(ops in ops(7, 8)) {
        check(7, 8, ops)?;
    }
}
