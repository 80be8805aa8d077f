//! `DelayQueue` and `DelayMap` against hostile user types and odd call patterns: keys whose `Hash`,
//! `Eq`, `Clone` or `Drop` panic, or whose hash changes each call; items and values whose `Drop`
//! panics or calls back into the queue; consumers' wakers that call back; `compact` and the
//! capacity methods, `close`, `peek` and `deadline` racing producers and consumers; stale keys.
//! Expected everywhere: no hang, no deadlock, nothing lost or given twice, counts that add up.

mod common;

use common::{assert_stats_add_up, manual, CountingWaker};
use hashed_wheel_timer::{DelayKey, DelayMap, DelayQueue, HashedWheelTimer, TimerError};
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
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

fn caught<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
}

fn noop_cx() -> Context<'static> {
    Context::from_waker(futures::task::noop_waker_ref())
}

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
    /// If not 0, its `Hash` panics for every key but this one.
    hash_panics_but_for: AtomicU32,
    hash_changes: AtomicBool, // its `Hash` writes a different number each call
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
        let only = self.1.hash_panics_but_for.load(SeqCst);
        assert!(
            only == 0 || only == self.0,
            "Hash of key {} panicked",
            self.0
        );
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
    let removed = caught(|| map.remove(&1));
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
    let replaced = caught(|| map.insert(Hostile(1, mode.clone()), 20, Duration::ZERO));
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

/// A `Hash` that panics for the keys already in a shard, as its map grows or rehashes in an insert
/// (now and then): the insert fails, and every other key stays in the map, comes out once, with its
/// value.
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
        // A rehash, which hashes the keys already in, panics.
        let only = if step % 4 == 0 { next } else { 0 };
        mode.hash_panics_but_for.store(only, SeqCst);
        let inserted =
            caught(|| map.insert(Hostile(next, mode.clone()), next, Duration::from_secs(1)));
        mode.hash_panics_but_for.store(0, SeqCst);
        if let Ok(result) = inserted {
            assert_eq!(result, Ok(None));
            live.insert(next);
        }
        assert_eq!(map.len(), live.len(), "step {step}: keys lost");
    }
    timer.advance(Duration::from_secs(2));
    for (key, value) in drain_map(&map) {
        assert!(key.0 == value && live.remove(&value), "{value}");
    }
    assert!(live.is_empty(), "never came out: {live:?}");
}

/// `Eq` and `Clone` that panic under a shard's lock: the call panics, and the map (its lock not
/// poisoned) keeps every key, value and deadline as they were; a key whose deadline fired and
/// whose reset panics comes out as it would have.
#[test]
fn eq_and_clone_that_panic_leave_the_map_as_it_was() {
    let timer = manual(MS);
    let (map, mode) = hostile_map(&timer);
    for k in 1..=3 {
        map.insert(Hostile(k, mode.clone()), k * 10, 5 * MS)
            .unwrap();
    }
    mode.eq_panics.store(true, SeqCst);
    let dup = caught(|| map.insert(Hostile(1, mode.clone()), 99, MS));
    mode.eq_panics.store(false, SeqCst);
    assert!(dup.is_err());
    mode.clone_panics.store(true, SeqCst);
    let fresh = caught(|| map.insert(Hostile(4, mode.clone()), 40, MS));
    assert!(fresh.is_err());
    assert_eq!(timer.pending_timeouts(), 3, "no deadline filed for key 4");
    timer.advance(5 * MS); // every deadline fired, none yielded yet
    let reset = caught(|| map.reset(&2, 10 * MS));
    mode.clone_panics.store(false, SeqCst);
    assert!(reset.is_err(), "a fired key's reset clones it");
    assert!(finishes(move || {
        let mut got: Vec<_> = drain_map(&map).into_iter().map(|(k, v)| (k.0, v)).collect();
        got.sort_unstable();
        assert_eq!(got, [(1, 10), (2, 20), (3, 30)]);
        assert!(map.is_empty() && map.get_deadline(&1).is_none());
    }));
    assert_stats_add_up(&timer);
}

/// A key whose hash differs each call: lookups miss, but nothing hangs or panics, and every value
/// is dropped exactly once in the end.
#[test]
fn a_hash_that_changes_each_call_only_misses() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let made = Arc::new(AtomicUsize::new(0));
    let (timer, d, m) = (manual(MS), drops.clone(), made.clone());
    assert!(finishes(move || {
        let map: DelayMap<Hostile, Counted> = timer.delay_map();
        let mode = Arc::new(Mode::default());
        mode.hash_changes.store(true, SeqCst);
        for i in 0..300u32 {
            m.fetch_add(1, SeqCst);
            let key = Hostile(i % 50, mode.clone());
            let _ = map.insert(key, Counted(d.clone()), (i % 7) * MS);
            let _ = map.remove(&(i % 13));
            let _ = map.reset(&(i % 11), MS);
            let _ = (map.get_deadline(&(i % 5)), map.contains_key(&i), map.len());
            if i % 17 == 0 {
                timer.advance(MS);
                drop(drain_map(&map));
            }
        }
        timer.advance(10 * MS);
        drop(drain_map(&map));
        map.close();
        drop(drain_map(&map));
        drop(map);
    }));
    assert_eq!(drops.load(SeqCst), made.load(SeqCst), "dropped once");
}

/// A consumer's waker that calls back into its queue, wherever the queue wakes it: on the
/// driver's turn (`advance`), in an insert or reset due at once, in `remove` and `clear` once
/// closed, and in `close`.
struct Reenters(DelayQueue<u32>, Mutex<Vec<DelayKey>>, AtomicUsize);

impl futures::task::ArcWake for Reenters {
    fn wake_by_ref(this: &Arc<Self>) {
        let q = &this.0;
        let n = this.2.fetch_add(1, SeqCst);
        let _ = (q.len(), q.is_empty(), q.peek(), q.capacity());
        let key = this.1.lock().unwrap().pop();
        if let Some(key) = key {
            let _ = (q.deadline(&key), q.reset(&key, 2 * MS));
            let _ = if n % 2 == 0 { q.remove(&key) } else { None };
        }
        if n == 30 {
            q.clear();
        }
        if n < 50 {
            if let Ok(key) = q.insert(1_000 + n as u32, Duration::ZERO) {
                this.1.lock().unwrap().push(key);
            }
            let _ = q
                .poll_expired(&mut noop_cx())
                .map(|e| e.map(|e| e.into_inner()));
        }
        q.shrink_to_fit();
    }
}

#[test]
fn a_waker_that_calls_back_into_its_queue_deadlocks_nothing() {
    let timer = manual(MS);
    let queue: DelayQueue<u32> = timer.delay_queue();
    let reenters = Arc::new(Reenters(
        queue.clone(),
        Mutex::new(Vec::new()),
        AtomicUsize::new(0),
    ));
    let (t, q, r) = (timer.clone(), queue.clone(), reenters.clone());
    assert!(finishes(move || {
        let waker = futures::task::waker(r.clone());
        let mut cx = Context::from_waker(&waker);
        for i in 0..20u32 {
            let key = q.insert(i, (i % 4) * MS).unwrap();
            r.1.lock().unwrap().push(key);
            let _ = q.poll_expired(&mut cx);
            t.advance(MS);
            let _ = q.poll_expired(&mut cx);
            let _ = q.reset(&key, Duration::ZERO);
            let _ = q.poll_expired(&mut cx);
            let _ = q.remove(&key);
        }
        q.close();
        let _ = q.poll_expired(&mut cx);
        q.clear();
        let _ = q.poll_expired(&mut cx);
        q.compact();
    }));
    assert!(reenters.2.load(SeqCst) > 0, "the waker never ran");
    timer.advance(10 * MS);
    assert_stats_add_up(&timer);
}

/// An item whose `Drop` panics every time (even unwinding) and then calls back into its queue:
/// `clear`, `compact` around removals, and the last handle's drop each drop every item once,
/// catch each panic, and deadlock on nothing.
struct Bomb(Arc<AtomicUsize>, Arc<OnceLock<DelayQueue<Bomb>>>);

impl Drop for Bomb {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        if let Some(queue) = self.1.get() {
            let _ = (queue.len(), queue.peek(), queue.capacity());
            let _ = queue.insert(Bomb(Arc::new(AtomicUsize::new(0)), Arc::default()), MS);
        }
        panic!("an item's Drop panicked");
    }
}

#[test]
fn items_that_panic_in_drop_and_call_back_are_each_dropped_once() {
    let timer = manual(MS);
    let drops = Arc::new(AtomicUsize::new(0));
    let (t, d) = (timer.clone(), drops.clone());
    assert!(finishes(move || {
        let queue: DelayQueue<Bomb> = t.delay_queue_with_capacity(usize::MAX);
        queue.reserve(usize::MAX);
        let cell = Arc::new(OnceLock::new());
        let _ = cell.set(queue.clone());
        let bomb = || Bomb(d.clone(), cell.clone());
        let insert = || queue.insert(bomb(), 5 * MS).unwrap();
        let keys: Vec<_> = (0..40).map(|_| insert()).collect();
        for key in keys.iter().step_by(2) {
            std::mem::forget(queue.remove(key).unwrap());
        }
        queue.compact();
        queue.shrink_to_fit();
        for key in keys.iter().skip(1).step_by(4) {
            std::mem::forget(queue.remove(key).expect("a key valid across compact"));
        }
        queue.clear(); // 10 left, each inserting one more (which is no bomb)
        assert_eq!((d.load(SeqCst), queue.len()), (10, 10));
        queue.clear();
        let other: DelayQueue<Bomb> = t.delay_queue();
        for _ in 0..5 {
            other.insert(Bomb(d.clone(), Arc::default()), MS).unwrap();
        }
        other.compact();
        drop(other); // the last handle
        assert_eq!(d.load(SeqCst), 15);
    }));
    assert_eq!(drops.load(SeqCst), 15);
    timer.advance(10 * MS);
    assert_stats_add_up(&timer);
}

/// `compact`, `shrink_to_fit`, `reserve` and `capacity` on one thread, against two threads
/// inserting and removing: every key stays valid, each remove gives back its own item, and what
/// is left comes out once each.
#[test]
fn compact_and_the_capacity_methods_racing_inserts_and_removes_lose_nothing() {
    let timer = manual(MS);
    let queue: DelayQueue<u64> = timer.delay_queue();
    let barrier = Arc::new(Barrier::new(3));
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let (queue, barrier) = (queue.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut kept = Vec::new();
                for i in 0..3_000u64 {
                    let item = w << 32 | i;
                    kept.push((queue.insert(item, (1 + i as u32 % 5) * MS).unwrap(), item));
                    if i % 3 != 0 {
                        let (key, item) = kept.swap_remove((i as usize * 7) % kept.len());
                        assert_eq!(queue.remove(&key), Some(item), "worker {w} step {i}");
                    }
                    if i % 64 == 0 {
                        queue.reserve(usize::MAX);
                    }
                }
                kept
            })
        })
        .collect();
    let compactor = {
        let (queue, barrier) = (queue.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            for i in 0..2_000 {
                match i % 3 {
                    0 => queue.compact(),
                    1 => queue.shrink_to_fit(),
                    // Read while others insert and compact: no bound holds between two reads.
                    _ => drop(queue.capacity()),
                }
            }
        })
    };
    let kept: Vec<(DelayKey, u64)> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    compactor.join().unwrap();
    assert_eq!(queue.len(), kept.len());
    queue.compact();
    assert_eq!(queue.capacity(), queue.len());
    for (key, item) in kept.iter().step_by(2) {
        assert_eq!(queue.remove(key), Some(*item));
    }
    timer.advance(10 * MS);
    let mut want: HashSet<u64> = kept.iter().skip(1).step_by(2).map(|&(_, i)| i).collect();
    for e in common::drain(&queue) {
        assert!(want.remove(e.get_ref()), "twice or wrongly");
    }
    assert!(want.is_empty(), "never came out: {want:?}");
    assert_stats_add_up(&timer);
}

/// `close` racing producers and two consumers, with `peek` and `deadline` racing the stream: each
/// insert that succeeded comes out exactly once, every consumer's stream ends, nothing hangs.
#[test]
fn close_racing_inserts_and_consumers_while_peek_races_the_stream() {
    let timer = manual(MS);
    let t = timer.clone();
    assert!(finishes(move || {
        let queue: DelayQueue<u64> = t.delay_queue();
        let (barrier, stop) = (Barrier::new(6), AtomicBool::new(false));
        let (mut sent, mut got) = std::thread::scope(|s| {
            let producers: Vec<_> = (0..2u64)
                .map(|w| {
                    let (queue, barrier) = (&queue, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let mut sent = Vec::new();
                        for i in 0.. {
                            match queue.insert(w << 32 | i, (i as u32 % 3) * MS) {
                                Ok(_) => sent.push(w << 32 | i),
                                Err(e) => return (assert_eq!(e, TimerError::QueueClosed), sent).1,
                            }
                            if i == 2_000 && w == 0 {
                                queue.close();
                            }
                        }
                        unreachable!()
                    })
                })
                .collect();
            let consumers: Vec<_> = (0..2)
                .map(|_| {
                    let (mut queue, barrier) = (queue.clone(), &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let items = futures::executor::block_on_stream(&mut queue);
                        items.map(|e| e.into_inner()).collect::<Vec<u64>>()
                    })
                })
                .collect();
            s.spawn(|| {
                barrier.wait();
                while !(queue.is_closed() && queue.is_empty()) {
                    let _ = queue.peek().map(|key| queue.deadline(&key));
                }
            });
            s.spawn(|| {
                barrier.wait();
                while !stop.load(SeqCst) {
                    t.advance(MS);
                    std::thread::yield_now();
                }
            });
            let join = |h: std::thread::ScopedJoinHandle<Vec<u64>>| h.join().unwrap();
            let sent: Vec<u64> = producers.into_iter().flat_map(join).collect();
            let got: Vec<u64> = consumers.into_iter().flat_map(join).collect();
            stop.store(true, SeqCst);
            (sent, got)
        });
        assert!(sent.len() > 2_000, "{} items", sent.len());
        sent.sort_unstable();
        got.sort_unstable();
        assert_eq!(sent, got, "each item inserted came out once");
        assert!(queue.is_empty());
    }));
    assert_stats_add_up(&timer);
}

/// Keys that name nothing: after `clear`, of another queue, yielded, and made up.
#[test]
fn stale_and_foreign_keys_name_nothing() {
    let timer = manual(MS);
    let (a, b): (DelayQueue<u32>, DelayQueue<u32>) = (timer.delay_queue(), timer.delay_queue());
    let cleared: Vec<DelayKey> = (0..10).map(|i| a.insert(i, MS).unwrap()).collect();
    a.clear();
    let fresh: Vec<DelayKey> = (10..20).map(|i| a.insert(i, MS).unwrap()).collect();
    let foreign: Vec<DelayKey> = (0..10).map(|i| b.insert(i, MS).unwrap()).collect();
    let made_up = [0, 1, u64::MAX, 1 << 63, 1 << 58, (1 << 58) - 1].map(DelayKey::from);
    for key in cleared.iter().chain(&foreign).chain(&made_up) {
        assert_eq!((a.remove(key), a.deadline(key)), (None, None), "{key:?}");
        assert!(!a.reset(key, MS) && a.try_remove(key).is_none());
    }
    a.compact();
    for (i, key) in fresh.iter().enumerate() {
        assert_eq!(a.remove(key), Some(10 + i as u32));
        assert_eq!(a.remove(key), None, "removed twice");
    }
    assert_eq!((a.len(), b.len()), (0, 10));
    assert_stats_add_up(&timer);
}

/// A `DelayMap` consumer's waker, and values' `Drop`, that call back into the map: from the
/// driver's turn, an insert due at once, `clear`, `remove`, `close` and the values' drops.
struct MapReenters(DelayMap<u32, Calls>, AtomicUsize);
struct Calls(Option<DelayMap<u32, Calls>>);

impl Drop for Calls {
    fn drop(&mut self) {
        if let Some(map) = self.0.take() {
            let _ = (
                map.len(),
                map.get_deadline(&1),
                map.remove(&2),
                map.reset(&3, MS),
            );
            let _ = map.insert(4, Calls(None), MS);
        }
    }
}

impl futures::task::ArcWake for MapReenters {
    fn wake_by_ref(this: &Arc<Self>) {
        let (map, n) = (&this.0, this.1.fetch_add(1, SeqCst) as u32);
        let _ = (map.len(), map.contains_key(&n), map.remove(&(n % 7)));
        let _ = (
            map.insert(n % 5, Calls(Some(map.clone())), Duration::ZERO),
            map.reset(&1, MS),
        );
        if n % 10 == 9 {
            map.clear();
        }
    }
}

#[test]
fn a_waker_and_values_that_call_back_into_their_map_deadlock_nothing() {
    let timer = manual(MS);
    let map: DelayMap<u32, Calls> = timer.delay_map();
    let waker = Arc::new(MapReenters(map.clone(), AtomicUsize::new(0)));
    let (t, m, w) = (timer.clone(), map.clone(), waker.clone());
    assert!(finishes(move || {
        let cx_waker = futures::task::waker(w.clone());
        let mut cx = Context::from_waker(&cx_waker);
        for i in 0..40 {
            let _ = m.insert(i % 6, Calls(Some(m.clone())), (i % 3) * MS);
            let _ = m.poll_expired(&mut cx);
            t.advance(MS);
            let _ = m.poll_expired(&mut cx);
        }
        m.close();
        m.clear();
        let _ = m.poll_expired(&mut cx);
    }));
    assert!(waker.1.load(SeqCst) > 0, "the waker never ran");
    map.clear();
    drop((map, waker)); // the waker's handle is the last
    timer.advance(10 * MS);
    assert_stats_add_up(&timer);
}

/// A fired item's notice names it by its slot and its generation's low bits. Removed before the
/// stream took it, with 64 inserts into its slot since, the notice's bits name the last of them
/// too: the stream must not yield that one before its deadline, nor twice.
#[test]
fn a_removed_items_notice_yields_no_later_item_of_its_slot_early() {
    use futures::{FutureExt, StreamExt};
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let fired = queue.insert(0u32, MS).unwrap();
    timer.advance(MS); // its notice waits for the stream
    assert_eq!(queue.remove(&fired), Some(0));
    for i in 1..64 {
        let key = queue.insert(i, MS * 100).unwrap();
        assert_eq!(queue.remove(&key), Some(i));
    }
    let later = queue.insert(64, MS * 100).unwrap();
    let mut stream = &queue;
    assert!(stream.next().now_or_never().is_none(), "not due");
    timer.advance(MS * 100);
    let out = stream.next().now_or_never().flatten();
    assert_eq!(out.map(|e| (e.key(), e.into_inner())), Some((later, 64)));
    assert!(stream.next().now_or_never().is_none(), "once");
}

/// As above, with the timer stopped before the stream looks: the later item's timeout, stopped, not
/// fired, keeps it in the queue (for `remove`, or its task run).
#[test]
fn a_removed_items_notice_yields_no_stopped_item_of_its_slot() {
    use futures::{FutureExt, StreamExt};
    let timer = manual(MS);
    let queue = timer.delay_queue();
    let fired = queue.insert(0u32, MS).unwrap();
    timer.advance(MS);
    assert_eq!(queue.remove(&fired), Some(0));
    for i in 1..64 {
        let key = queue.insert(i, MS * 100).unwrap();
        assert_eq!(queue.remove(&key), Some(i));
    }
    let stopped = queue.insert(64, MS * 100).unwrap();
    assert_eq!(timer.stop().unwrap().len(), 1);
    assert!(
        (&queue).next().now_or_never().is_none(),
        "left in the queue"
    );
    assert_eq!(queue.remove(&stopped), Some(64));
}
