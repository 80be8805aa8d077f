//! The reference model and checker shared by `tests/model.rs` (proptest)
//! and `fuzz/fuzz_targets/operations.rs` (cargo-fuzz): random operation
//! sequences against a manual-clock timer and a plain `BTreeMap` model.
//! After every step the fired set and order, cancel results, fates and
//! `pending_timeouts()` must agree; nothing fires early or more than one
//! tick late.
#![allow(dead_code)]

use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($msg:tt)+) => {{
        let (left, right) = (&$left, &$right);
        ensure!(left == right, "{}: {:?} != {:?}", format!($($msg)+), left, right);
    }};
}

#[derive(Debug, Clone)]
pub enum Op {
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

/// Runs `ops` on a timer with this tick (ns) and wheel size, checking every
/// step against the model.
pub fn check(tick: u64, wheel: usize, ops: Vec<Op>) -> Result<(), String> {
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
                let log = log.clone();
                let id = handles.len();
                let result = timer.new_timeout(
                    move |t: &Timeout| log.lock().unwrap().push((id, t.timer().unwrap().now())),
                    Duration::from_nanos(delay),
                );
                if model.stopped {
                    ensure_eq!(
                        result.unwrap_err(),
                        TimerError::Shutdown,
                        "schedule after stop"
                    );
                    continue;
                }
                ensure_eq!(model.schedule(delay), id, "ids");
                handles.push(result.unwrap());
            }
            Op::Cancel(n) if !handles.is_empty() => {
                let id = n % handles.len();
                ensure_eq!(handles[id].cancel(), model.cancel(id), "cancel of {id}");
            }
            Op::Cancel(_) => {}
            Op::Advance(by) => {
                let expected = model.advance(by);
                timer.advance(Duration::from_nanos(by));
                let fired: Vec<(usize, Instant)> = std::mem::take(&mut *log.lock().unwrap());
                let ids: Vec<usize> = fired.iter().map(|f| f.0).collect();
                ensure_eq!(ids, expected, "fired set and order");
                for (id, at) in fired {
                    let deadline = handles[id].deadline();
                    ensure!(at >= deadline, "{id} fired early");
                    let late = at - deadline;
                    ensure!(late <= Duration::from_nanos(tick), "{id} late by {late:?}");
                    ensure_eq!(
                        at - origin,
                        Duration::from_nanos(model.keys[id].0 * tick),
                        "fire time of {id}"
                    );
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
                ensure_eq!(stopped, expected, "stop() result");
            }
        }
        ensure_eq!(
            timer.pending_timeouts(),
            model.pending(),
            "pending_timeouts"
        );
        for (id, t) in handles.iter().enumerate() {
            let fate = match (t.is_expired(), t.is_cancelled(), t.is_stopped()) {
                (true, false, false) => Fate::Fired,
                (false, true, false) => Fate::Cancelled,
                (false, false, true) => Fate::Stopped,
                (false, false, false) => Fate::Pending,
                other => return Err(format!("{id}: two states {other:?}")),
            };
            ensure_eq!(fate, model.fates[id], "fate of {id}");
        }
    }
    Ok(())
}
