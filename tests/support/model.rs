//! The reference model and checker shared by `tests/model.rs` (proptest)
//! and `fuzz/fuzz_targets/operations.rs` (cargo-fuzz): random operation
//! sequences against a manual-clock timer and a plain `BTreeMap` model.
//! After every step the fired set and order, cancel and reset results,
//! fates, deadlines, `remaining()`, `pending_timeouts()` and `stats()` must
//! agree; nothing fires early or more than one tick late.
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
    /// Schedule with `new_timeout_at`, this many nanoseconds from now.
    ScheduleAt(u64),
    /// Reset the n-th timeout scheduled so far (modulo their number) to
    /// fire this many nanoseconds from now.
    Reset(usize, u64),
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
    /// Next sequence number: a reset takes a new one, as a schedule does.
    seq: usize,
    /// Timeouts reset at least once: among equal deadlines, their order
    /// with others is not defined.
    reset: HashSet<usize>,
    /// `stats()` as it must read.
    scheduled: u64,
    fired: u64,
    cancelled: u64,
    stopped_count: u64,
}

/// The end of a timer's time, 2^61 ns (73 years): no clock reads later, and
/// a deadline there never comes.
const END: u64 = u64::MAX >> 3;

impl Model {
    fn key(&mut self, delay: u64) -> (u64, u64, usize) {
        let deadline = self.now.saturating_add(delay).min(END);
        // The first tick ending at or after the deadline; for one already
        // processed (the deadline passed), the current one: it fires at the
        // next advance, even by zero.
        let fire_tick = deadline.div_ceil(self.tick).max(self.now / self.tick);
        self.seq += 1;
        (fire_tick, deadline, self.seq)
    }

    fn schedule(&mut self, delay: u64) -> usize {
        let id = self.fates.len();
        let key = self.key(delay);
        self.queue.insert(key, id);
        self.fates.push(Fate::Pending);
        self.keys.push(key);
        self.scheduled += 1;
        id
    }

    fn reset(&mut self, id: usize, delay: u64) -> bool {
        if self.fates[id] != Fate::Pending || self.stopped {
            return false;
        }
        self.queue.remove(&self.keys[id]);
        let key = self.key(delay);
        self.queue.insert(key, id);
        self.keys[id] = key;
        self.reset.insert(id);
        true
    }

    fn cancel(&mut self, id: usize) -> bool {
        match self.fates[id] {
            Fate::Pending => {
                self.queue.remove(&self.keys[id]);
                self.fates[id] = Fate::Cancelled;
                self.cancelled += 1;
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
        self.now = self.now.saturating_add(by).min(END);
        let last_tick = (self.now / self.tick).min(END.div_ceil(self.tick) - 1);
        let mut fired = vec![];
        while let Some((&key, &id)) = self.queue.iter().next() {
            if key.0 > last_tick {
                break;
            }
            self.queue.remove(&key);
            self.fates[id] = Fate::Fired;
            self.fired += 1;
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
        self.stopped_count += ids.len() as u64;
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
        seq: 0,
        reset: HashSet::new(),
        scheduled: 0,
        fired: 0,
        cancelled: 0,
        stopped_count: 0,
    };
    let log: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let mut handles: Vec<Timeout> = vec![];

    for op in ops {
        match op {
            Op::Schedule(delay) | Op::ScheduleAt(delay) => {
                let log = log.clone();
                let id = handles.len();
                let task =
                    move |t: &Timeout| log.lock().unwrap().push((id, t.timer().unwrap().now()));
                let result = match op {
                    Op::ScheduleAt(_) => timer.new_timeout_at(task, at(timer.now(), delay)),
                    _ => timer.new_timeout(task, Duration::from_nanos(delay)),
                };
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
            Op::Reset(n, delay) if !handles.is_empty() => {
                let id = n % handles.len();
                let reset = match n % 2 {
                    0 => handles[id].reset(Duration::from_nanos(delay)),
                    _ => handles[id].reset_at(at(timer.now(), delay)),
                };
                ensure_eq!(reset, model.reset(id, delay), "reset of {id}");
            }
            Op::Reset(..) => {}
            Op::Advance(by) => {
                let expected = model.advance(by);
                timer.advance(Duration::from_nanos(by));
                let fired: Vec<(usize, Instant)> = std::mem::take(&mut *log.lock().unwrap());
                let ids: Vec<usize> = fired.iter().map(|f| f.0).collect();
                ensure_eq!(
                    in_order(&model, &ids),
                    in_order(&model, &expected),
                    "fired set and order"
                );
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
        let stats = timer.stats();
        ensure_eq!(
            (
                stats.scheduled,
                stats.fired,
                stats.cancelled,
                stats.stopped,
                stats.pending
            ),
            (
                model.scheduled,
                model.fired,
                model.cancelled,
                model.stopped_count,
                model.pending()
            ),
            "stats (scheduled, fired, cancelled, stopped, pending)"
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
            let deadline = model.keys[id].1;
            ensure_eq!(t.deadline(), at(origin, deadline), "deadline of {id}");
            let remaining = match fate {
                Fate::Pending => deadline.saturating_sub(model.now),
                _ => 0,
            };
            ensure_eq!(
                t.remaining(),
                Duration::from_nanos(remaining),
                "remaining of {id}"
            );
        }
    }
    Ok(())
}

/// `from + nanos`, as the timer saturates an instant past what it holds.
fn at(from: Instant, nanos: u64) -> Instant {
    from.checked_add(Duration::from_nanos(nanos))
        .unwrap_or_else(|| from + Duration::from_secs(86_400 * 365 * 30))
}

/// `ids` as the order they fire in must be checked: by fire tick and
/// deadline, then by submission, except that a timeout ever reset has no
/// defined order among others with its deadline (each such group sorted).
fn in_order(model: &Model, ids: &[usize]) -> Vec<(u64, u64, usize)> {
    let mut keyed: Vec<(u64, u64, usize)> = ids
        .iter()
        .map(|&id| (model.keys[id].0, model.keys[id].1, id))
        .collect();
    let mut start = 0;
    while start < keyed.len() {
        let group = keyed[start..]
            .iter()
            .take_while(|k| (k.0, k.1) == (keyed[start].0, keyed[start].1))
            .count();
        let slice = &mut keyed[start..start + group];
        if slice.iter().any(|k| model.reset.contains(&k.2)) {
            slice.sort();
        }
        start += group;
    }
    keyed
}
