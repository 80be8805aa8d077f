//! `DelayQueue` and `DelayMap` against hostile user types and odd call patterns: keys whose `Hash`,
//! `Eq`, `Clone` or `Drop` panic, or whose hash changes each call; items and values whose `Drop`
//! panics or calls back into the queue; consumers' wakers that call back; `compact` and the
//! capacity methods, `close`, `peek` and `deadline` racing producers and consumers; stale keys.
//! Expected everywhere: no hang, no deadlock, nothing lost or given twice, counts that add up.

mod common;

use common::{assert_stats_add_up, manual, CountingWaker};
use futures::StreamExt;
use hashed_wheel_timer::{DelayKey, DelayMap, DelayQueue, HashedWheelTimer, TimerError};
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Runs `f` on a thread of its own: true if it returned within 20 s (a deadlock fails the test
/// instead of hanging it). A panic in `f` counts as not finishing.
fn finishes(f: impl FnOnce() + Send + 'static) -> bool {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    finished.recv_timeout(Duration::from_secs(20)).is_ok()
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(futures::task::noop_waker_ref())
}

/// Every pair ready now.
fn drain_map<K: Hash + Eq, V>(map: &DelayMap<K, V>) -> Vec<(K, V)> {
    let mut out = Vec::new();
    while let Poll::Ready(Some(pair)) = map.poll_expired(&mut noop_cx()) {
        out.push(pair);
    }
    out
}

/// What a `Hostile` key does wrong, shared by the keys of one test.
#[derive(Default)]
struct Mode {
    /// Its `Hash` panics at this call from now (1: the next); 0: never.
    hash_panics_in: AtomicUsize,
    /// Its `Hash` writes a different number each call.
    hash_changes: AtomicBool,
    eq_panics: AtomicBool,
    clone_panics: AtomicBool,
    drop_panics: AtomicBool,
    counter: AtomicUsize,
}

/// A key whose `Hash`, `Eq`, `Clone` and `Drop` misbehave as its `Mode` says. Lookups by `u32`
/// (through `Borrow`) run none of its code.
struct Hostile(u32, Arc<Mode>);

impl Hash for Hostile {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let left = self.1.hash_panics_in.load(SeqCst);
        if left > 0 && self.1.hash_panics_in.fetch_sub(1, SeqCst) == 1 {
            panic!("Hash of key {} panicked", self.0);
        }
        if self.1.hash_changes.load(SeqCst) {
            self.1.counter.fetch_add(1, SeqCst).hash(state);
        } else {
            self.0.hash(state);
        }
    }
}

impl PartialEq for Hostile {
    fn eq(&self, other: &Hostile) -> bool {
        assert!(
            !self.1.eq_panics.load(SeqCst),
            "Eq of key {} panicked",
            self.0
        );
        self.0 == other.0
    }
}

impl Eq for Hostile {}

impl Clone for Hostile {
    fn clone(&self) -> Hostile {
        assert!(!self.1.clone_panics.load(SeqCst), "Clone of key {}", self.0);
        Hostile(self.0, self.1.clone())
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        if self.1.drop_panics.load(SeqCst) && !std::thread::panicking() {
            panic!("Drop of key {} panicked", self.0);
        }
    }
}

impl Borrow<u32> for Hostile {
    fn borrow(&self) -> &u32 {
        &self.0
    }
}

fn hostile_map(timer: &HashedWheelTimer) -> (DelayMap<Hostile, u32>, Arc<Mode>) {
    (timer.delay_map(), Arc::new(Mode::default()))
}

/// `remove` of a key whose `Drop` panics: the map's own copy of the key is dropped where the panic
/// is caught, as the stream's is, so the value is still returned and the deadline cancelled.
#[test]
fn remove_of_a_key_that_panics_in_drop_returns_its_value_and_cancels_its_deadline() {
    let timer = manual(MS);
    let (map, mode) = hostile_map(&timer);
    map.insert(Hostile(1, mode.clone()), 10, 5 * MS).unwrap();
    mode.drop_panics.store(true, SeqCst);
    let removed = catch_unwind(AssertUnwindSafe(|| map.remove(&1)));
    mode.drop_panics.store(false, SeqCst);
    match removed {
        Ok(value) => assert_eq!(value, Some(10)),
        Err(_) => panic!("remove panicked: the value was lost and its deadline left pending"),
    }
    timer.advance(10 * MS);
    assert!(drain_map(&map).is_empty() && map.is_empty());
    assert_eq!(timer.pending_timeouts(), 0);
    assert_stats_add_up(&timer);
}

/// `insert` replacing a key, the offered copy of which panics when dropped: the old value is
/// returned, and a consumer is woken for a deadline due at once.
#[test]
fn insert_replacing_a_key_that_panics_in_drop_returns_the_old_value_and_wakes() {
    let timer = manual(MS);
    let (map, mode) = hostile_map(&timer);
    map.insert(Hostile(1, mode.clone()), 10, 5 * MS).unwrap();
    let (counter, waker) = CountingWaker::new();
    assert!(map
        .poll_expired(&mut Context::from_waker(&waker))
        .is_pending());
    mode.drop_panics.store(true, SeqCst);
    let replaced = catch_unwind(AssertUnwindSafe(|| {
        map.insert(Hostile(1, mode.clone()), 20, Duration::ZERO)
    }));
    mode.drop_panics.store(false, SeqCst);
    match replaced {
        Ok(old) => assert_eq!(old, Ok(Some(10))),
        Err(_) => panic!("insert panicked: the old value was lost, and no consumer woken"),
    }
    assert!(counter.wakes() > 0, "the consumer was not woken");
    let pairs = drain_map(&map);
    assert_eq!(
        pairs.iter().map(|(k, v)| (k.0, *v)).collect::<Vec<_>>(),
        [(1, 20)]
    );
    assert_stats_add_up(&timer);
}

/// A `Hash` that panics now and then, in the middle of an insert (once the shard is picked, in
/// the map's own hashing): the insert fails, and every other key stays in the map, comes out
/// once, with its value.
#[test]
fn a_hash_that_panics_in_an_insert_loses_no_other_key() {
    let timer = manual(MS);
    let (map, mode) = hostile_map(&timer);
    let mut live: HashSet<u32> = HashSet::new();
    let mut next = 0u32;
    for step in 0..4_000u32 {
        if live.len() >= 200 {
            let gone = *live.iter().next().unwrap();
            assert_eq!(map.remove(&gone), Some(gone), "step {step}: key {gone}");
            live.remove(&gone);
        }
        next += 1;
        // The shard's pick, the map's hash of the new key, then any rehash: the third panics.
        mode.hash_panics_in.store(3, SeqCst);
        let inserted = catch_unwind(AssertUnwindSafe(|| {
            map.insert(Hostile(next, mode.clone()), next, Duration::from_secs(1))
        }));
        mode.hash_panics_in.store(0, SeqCst);
        if let Ok(result) = inserted {
            assert_eq!(result, Ok(None));
            live.insert(next);
        }
        assert_eq!(map.len(), live.len(), "step {step}: keys lost");
    }
    timer.advance(Duration::from_secs(2));
    let mut out: Vec<u32> = drain_map(&map)
        .into_iter()
        .map(|(k, v)| {
            assert_eq!(k.0, v);
            v
        })
        .collect();
    out.sort_unstable();
    let mut want: Vec<u32> = live.into_iter().collect();
    want.sort_unstable();
    assert_eq!(out, want);
}
