//! `DelayMap`, on the manual clock and on tokio's paused clock: expired
//! pairs in deadline order and never early, insert replacing a key's value
//! and deadline, reset either way (even of a key whose deadline has just
//! fired), remove, refusals that change nothing, the stream's end, and
//! threads racing expiry on one key with nothing lost or yielded twice.

mod common;

use common::manual;
use futures::StreamExt;
use hashed_wheel_timer::{DelayMap, HashedWheelTimer, TimerError};
use std::collections::HashSet;
use std::sync::{mpsc, Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Every pair ready now, in the order the stream gives them.
fn drain<K: std::hash::Hash + Eq, V>(map: &DelayMap<K, V>) -> Vec<(K, V)> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut out = Vec::new();
    while let Poll::Ready(Some(pair)) = map.poll_expired(&mut cx) {
        out.push(pair);
    }
    out
}

/// Turns the clock a tick at a time and drains, until the map is closed
/// and empty, or 200 ticks after it closed, past every deadline the tests
/// set (so that a key never yielded fails the test, not hangs it).
fn turn_and_drain<K: std::hash::Hash + Eq, V>(
    timer: &HashedWheelTimer,
    map: &DelayMap<K, V>,
) -> Vec<(K, V)> {
    let (mut out, mut after_close) = (Vec::new(), 0);
    while !map.is_closed() || (!map.is_empty() && after_close < 200) {
        after_close += map.is_closed() as u32;
        timer.advance(MS);
        out.extend(drain(map));
    }
    out
}

#[test]
fn pairs_come_out_in_deadline_order_and_never_early() {
    let timer = manual(MS);
    let map = timer.delay_map();
    for (key, ms) in [("c", 30), ("a", 10), ("b", 20)] {
        assert_eq!(map.insert(key, ms, ms as u32 * MS).unwrap(), None);
    }
    assert_eq!((map.len(), timer.pending_timeouts()), (3, 3));
    timer.advance(9 * MS);
    assert!(drain(&map).is_empty(), "nothing before its deadline");
    timer.advance(MS);
    assert_eq!(drain(&map), [("a", 10)]);
    timer.advance(30 * MS);
    assert_eq!(drain(&map), [("b", 20), ("c", 30)]);
    assert!(map.is_empty() && !map.contains_key("a"));
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn insert_replaces_the_value_and_the_deadline_either_way() {
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert("k", 1, 10 * MS).unwrap();
    assert_eq!(map.insert("k", 2, 30 * MS).unwrap(), Some(1), "later");
    assert_eq!(map.get_deadline("k"), Some(timer.now() + 30 * MS));
    timer.advance(29 * MS);
    assert!(drain(&map).is_empty(), "the old deadline no longer counts");
    assert_eq!(map.insert("k", 3, 5 * MS).unwrap(), Some(2), "earlier");
    timer.advance(4 * MS);
    assert!(drain(&map).is_empty());
    timer.advance(MS);
    assert_eq!(drain(&map), [("k", 3)], "the new value, once");
    timer.advance(100 * MS);
    assert!(drain(&map).is_empty());
    assert_eq!(timer.pending_timeouts(), 0);
}

/// The key's deadline fired, but the stream has not yet yielded it: an
/// insert still replaces it, and a reset still moves it; the fired one is
/// skipped.
#[test]
fn a_key_whose_deadline_fired_is_still_replaced_reset_and_removed() {
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert("replaced", 1, 10 * MS).unwrap();
    map.insert("reset", 1, 10 * MS).unwrap();
    map.insert("removed", 1, 10 * MS).unwrap();
    timer.advance(10 * MS); // all three fired, none yielded
    assert_eq!(map.insert("replaced", 2, 5 * MS).unwrap(), Some(1));
    assert!(map.reset("reset", 5 * MS));
    assert_eq!(map.get_deadline("reset"), Some(timer.now() + 5 * MS));
    assert_eq!(map.remove("removed"), Some(1));
    assert!(
        drain(&map).is_empty(),
        "no replaced, moved or removed value"
    );
    assert_eq!(map.len(), 2);
    timer.advance(5 * MS);
    let mut out = drain(&map);
    out.sort();
    assert_eq!(out, [("replaced", 2), ("reset", 1)]);
}

#[test]
fn reset_moves_a_deadline_either_way_and_misses_absent_keys() {
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert(1u32, "later", 10 * MS).unwrap();
    map.insert(2u32, "earlier", 50 * MS).unwrap();
    assert!(map.reset(&1, 40 * MS));
    assert!(map.reset_at(&2, timer.now() + 20 * MS));
    assert!(!map.reset(&3, MS), "absent");
    timer.advance(19 * MS);
    assert!(drain(&map).is_empty());
    timer.advance(MS);
    assert_eq!(drain(&map), [(2, "earlier")]);
    assert!(!map.reset(&2, MS), "yielded: gone");
    timer.advance(19 * MS);
    assert!(
        drain(&map).is_empty(),
        "the old deadline of 1 no longer counts"
    );
    timer.advance(MS);
    assert_eq!(drain(&map), [(1, "later")]);
}

#[test]
fn remove_get_contains_len_and_clear() {
    let timer = manual(MS);
    let map: DelayMap<String, u64> = timer.delay_map();
    for i in 0..100 {
        map.insert(format!("key {i}"), i, (1 + i as u32) * MS)
            .unwrap();
    }
    assert_eq!(map.len(), 100);
    assert_eq!(map.get("key 7"), Some(7), "borrowed form of the key");
    assert_eq!(map.remove("key 7"), Some(7));
    assert_eq!(map.remove("key 7"), None, "once");
    assert!(!map.contains_key("key 7") && map.contains_key("key 8"));
    assert_eq!(map.get_deadline("key 7"), None);
    assert_eq!(timer.pending_timeouts(), 99);
    map.clear();
    assert!(map.is_empty());
    assert_eq!(timer.pending_timeouts(), 0, "clear cancels the deadlines");
    timer.advance(200 * MS);
    assert!(drain(&map).is_empty());
}

#[test]
fn close_refuses_inserts_keeps_what_is_in_and_ends_the_stream_once_drained() {
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert("in", 1, 5 * MS).unwrap();
    map.close();
    assert!(map.is_closed());
    assert_eq!(map.insert("new", 2, MS), Err(TimerError::QueueClosed));
    assert_eq!(map.insert("in", 3, MS), Err(TimerError::QueueClosed));
    assert_eq!(map.get("in"), Some(1), "a refused insert changes nothing");
    assert!(map.reset("in", 10 * MS), "reset works as before");
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(map.poll_expired(&mut cx).is_pending());
    timer.advance(10 * MS);
    assert_eq!(map.poll_expired(&mut cx), Poll::Ready(Some(("in", 1))));
    assert_eq!(map.poll_expired(&mut cx), Poll::Ready(None));
}

#[test]
fn a_stopped_timer_refuses_inserts_and_keeps_the_keys_for_remove() {
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert("in", 1, 5 * MS).unwrap();
    assert_eq!(timer.stop().unwrap().len(), 1);
    assert_eq!(map.insert("new", 2, MS), Err(TimerError::Shutdown));
    assert_eq!(map.insert("in", 3, MS), Err(TimerError::Shutdown));
    assert!(!map.reset("in", MS), "refused");
    assert_eq!(map.remove("in"), Some(1), "the value stayed");
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert_eq!(map.poll_expired(&mut cx), Poll::Ready(None));
}

#[test]
fn at_the_pending_limit_a_new_key_is_refused_and_a_replacement_is_not() {
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .max_pending_timeouts(2)
        .build()
        .unwrap();
    let map = timer.delay_map();
    map.insert(1, "a", 5 * MS).unwrap();
    map.insert(2, "b", 5 * MS).unwrap();
    let refused = map.insert(3, "c", 5 * MS).unwrap_err();
    assert!(refused.is_at_capacity());
    assert!(!map.contains_key(&3));
    assert_eq!(map.insert(1, "a2", 9 * MS), Ok(Some("a")), "moved in place");
    timer.advance(9 * MS);
    let mut out = drain(&map);
    out.sort();
    assert_eq!(out, [(1, "a2"), (2, "b")]);
}

#[test]
fn new_uses_the_current_timer_and_handles_share_one_map() {
    let manual = manual(MS);
    let _guard = hashed_wheel_timer::set_default(manual.clone());
    let map: DelayMap<u8, u8> = DelayMap::new();
    assert!(map.timer().is_same(&manual));
    let other = map.clone();
    other.insert(1, 1, MS).unwrap();
    assert_eq!(map.len(), 1);
    manual.advance(MS);
    assert_eq!(drain(&map), [(1, 1)]);
    assert!(drain(&other).is_empty(), "each key to one consumer");
    fn shareable<T: Clone + Send + Sync + 'static>() {}
    shareable::<DelayMap<String, Vec<u8>>>();
}

/// One key, raced: this thread inserts fresh values (each due in a tick or
/// two) and removes, while another advances the clock and drains the
/// stream; every 1,000 rounds this one waits for the clock to pass its
/// value, so both sides win some however the threads are scheduled. Every value is accounted for exactly once: replaced (returned
/// by `insert`), removed, yielded, or left in the map at the end.
#[test]
fn expiry_racing_insert_and_remove_on_one_key_loses_and_repeats_nothing() {
    const ROUNDS: u64 = if cfg!(miri) { 50 } else { 20_000 };
    let timer = manual(MS);
    let map: DelayMap<u8, u64> = timer.delay_map();
    let driver = {
        let (timer, map) = (timer.clone(), map.clone());
        std::thread::spawn(move || turn_and_drain(&timer, &map))
    };
    let mut back = Vec::new();
    for value in 0..ROUNDS {
        match value % 4 {
            3 => back.extend(map.remove(&0)),
            _ => back.extend(map.insert(0, value, MS * (value % 3) as u32).unwrap()),
        }
        if value % 2 == 0 {
            assert!(!map.reset(&1, MS), "absent");
            map.reset(&0, MS);
        }
        if value % 1_000 == 0 {
            // Let the clock pass the value just inserted, whatever the
            // scheduler does: the stream then yields some, as it must.
            let at = timer.now();
            while timer.now() < at + 3 * MS {
                std::thread::yield_now();
            }
        }
    }
    map.close();
    let yielded: Vec<u64> = driver.join().unwrap().into_iter().map(|(_, v)| v).collect();
    let inserted = (0..ROUNDS).filter(|v| v % 4 != 3).count();
    let all: HashSet<u64> = back.iter().chain(&yielded).copied().collect();
    assert_eq!(all.len(), back.len() + yielded.len(), "no value twice");
    assert_eq!(all.len(), inserted, "no value lost");
    assert!(
        !yielded.is_empty() && !back.is_empty(),
        "both sides won some"
    );
    assert_eq!(timer.pending_timeouts(), 0);
}

/// Threads on different keys, and two consumers turning the clock: every
/// key not removed comes out once, to one of them.
#[test]
fn threads_on_their_own_keys_and_two_consumers() {
    const KEYS: u32 = if cfg!(miri) { 20 } else { 5_000 };
    let timer = manual(MS);
    let map: DelayMap<u32, u32> = timer.delay_map();
    let producers: Vec<_> = (0..2u32)
        .map(|t| {
            let map = map.clone();
            std::thread::spawn(move || {
                let mut removed = Vec::new();
                for k in (0..KEYS).map(|i| i * 2 + t) {
                    map.insert(k, k, MS * (1 + k % 50)).unwrap();
                    // Unless the consumers' clock passed its deadline.
                    if k % 3 == 0 && map.remove(&k).is_some() {
                        removed.push(k);
                    }
                }
                removed
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (timer, map) = (timer.clone(), map.clone());
            std::thread::spawn(move || turn_and_drain(&timer, &map))
        })
        .collect();
    let removed: HashSet<u32> = producers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    assert!(!removed.is_empty());
    map.close();
    let mut got: Vec<u32> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .map(|(k, v)| {
            assert_eq!(k, v);
            k
        })
        .collect();
    got.sort_unstable();
    let want: Vec<u32> = (0..KEYS * 2).filter(|k| !removed.contains(k)).collect();
    assert_eq!(got, want);
}

/// On tokio's paused clock, the stream auto-advances to each deadline and
/// yields it then, never before; a reset from another task moves it.
#[tokio::test(start_paused = true)]
async fn on_the_paused_tokio_clock() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let mut map = timer.delay_map();
    let start = tokio::time::Instant::now();
    map.insert("b", 2, Duration::from_secs(20)).unwrap();
    map.insert_at("a", 1, start + Duration::from_secs(10))
        .unwrap();
    map.insert("c", 3, Duration::from_secs(5)).unwrap();
    let resetter = map.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(resetter.reset("c", Duration::from_secs(29))); // due at 30 s
    });
    for (pair, at) in [(("a", 1), 10), (("b", 2), 20), (("c", 3), 30)] {
        assert_eq!(map.next().await, Some(pair));
        assert_eq!(start.elapsed(), Duration::from_secs(at), "at its deadline");
    }
    map.close();
    assert_eq!(map.next().await, None);
}

/// `tokio::time::advance` past a deadline: the pair is ready at the next
/// poll, and a key replaced a moment before its deadline is not yielded.
#[tokio::test(start_paused = true)]
async fn advancing_the_paused_clock_past_a_replaced_key() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let map = timer.delay_map();
    map.insert(7, "old", Duration::from_millis(50)).unwrap();
    tokio::time::advance(Duration::from_millis(49)).await;
    assert_eq!(
        map.insert(7, "new", Duration::from_millis(50)).unwrap(),
        Some("old")
    );
    tokio::time::advance(Duration::from_millis(10)).await;
    assert!(drain(&map).is_empty());
    tokio::time::advance(Duration::from_millis(40)).await;
    assert_eq!(drain(&map), [(7, "new")]);
}

/// A reset or a replacing insert earlier wakes no consumer (a wake-up per
/// earlier reset is a context switch for a poll that finds nothing): the
/// key's timeout wakes it at the new deadline. A reset to now wakes it at once.
#[test]
fn an_earlier_reset_wakes_the_consumer_only_when_due() {
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert("a", 1, 10 * MS).unwrap();
    map.insert("b", 2, 10 * MS).unwrap();
    let mut consumer = tokio_test::task::spawn(());
    assert!(consumer.enter(|cx, _| map.poll_expired(cx)).is_pending());
    assert!(map.reset(&"a", 5 * MS));
    assert_eq!(map.insert("b", 3, 4 * MS).unwrap(), Some(2));
    assert!(!consumer.is_woken(), "earlier, not yet due");
    timer.advance(4 * MS);
    assert!(consumer.is_woken(), "due at the new deadline");
    assert_eq!(drain(&map), [("b", 3)]);
    let mut consumer = tokio_test::task::spawn(());
    assert!(consumer.enter(|cx, _| map.poll_expired(cx)).is_pending());
    assert!(map.reset(&"a", Duration::ZERO));
    assert!(consumer.is_woken(), "a reset to now");
}

/// Counts its drops, and panics in each.
struct PanicsOnDrop(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        panic!("a value's Drop panics");
    }
}

/// Values (and their keys) are dropped where no panic escapes: by `clear`,
/// by a refused insert, and by the last handle's drop.
#[test]
fn a_value_that_panics_when_dropped_never_escapes_the_map() {
    let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let value = || PanicsOnDrop(drops.clone());
    let timer = manual(MS);
    let map = timer.delay_map();
    map.insert(1, value(), 10 * MS).unwrap();
    map.insert(2, value(), 10 * MS).unwrap();
    map.clear();
    assert_eq!(
        drops.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "cleared"
    );
    map.close();
    assert!(matches!(
        map.insert(3, value(), MS),
        Err(TimerError::QueueClosed)
    ));
    assert_eq!(
        drops.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "refused"
    );
    let map2 = timer.delay_map();
    map2.insert(4, value(), 10 * MS).unwrap();
    drop(map2);
    assert_eq!(
        drops.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "the last handle"
    );
}

/// Runs `f` on a thread of its own: true if it returned within 10 s (a
/// deadlock fails the test instead of hanging it).
fn finishes(f: impl FnOnce() + Send + 'static) -> bool {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    finished.recv_timeout(Duration::from_secs(10)).is_ok()
}

/// A value whose `Drop` looks its own key up in the map it was offered to.
struct LooksUp(Arc<OnceLock<DelayMap<u32, LooksUp>>>);

impl Drop for LooksUp {
    fn drop(&mut self) {
        if let Some(map) = self.0.get() {
            let _ = map.contains_key(&1);
        }
    }
}

/// A refused insert drops the offered value where `V`'s code may use the
/// map (the docs: of `V`'s code only `Clone`, in `get`, runs under a
/// shard's lock).
#[test]
fn a_refused_insert_drops_the_value_outside_the_maps_lock() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let map: DelayMap<u32, LooksUp> = timer.delay_map();
    let cell = Arc::new(OnceLock::new());
    let _ = cell.set(map.clone());
    timer.stop().unwrap();
    let finished = finishes(move || {
        let refused = map.insert(1, LooksUp(cell.clone()), Duration::from_secs(1));
        assert!(matches!(refused, Err(TimerError::Shutdown)));
    });
    assert!(finished, "the value's Drop deadlocked on the map's lock");
}

/// A consumer's waker that counts the keys in the map it wakes for, which locks every shard.
struct CountsOnWake(DelayMap<u32, u32>, std::sync::atomic::AtomicUsize);

impl futures::task::ArcWake for CountsOnWake {
    fn wake_by_ref(this: &Arc<Self>) {
        let _ = this.0.len();
        this.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A consumer's waker is user code: an insert or a reset that makes a key due wakes it with no
/// shard of the map locked, so a waker that uses the map does not deadlock. (Both woke it under
/// the key's shard lock.)
#[test]
fn a_consumers_waker_is_woken_with_no_lock_of_the_map_held() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let map: DelayMap<u32, u32> = timer.delay_map();
    let waker = Arc::new(CountsOnWake(map.clone(), Default::default()));
    let finished = finishes(move || {
        let wakes = || waker.1.load(std::sync::atomic::Ordering::SeqCst);
        let cx_waker = futures::task::waker(waker.clone());
        let mut cx = Context::from_waker(&cx_waker);
        assert!(map.poll_expired(&mut cx).is_pending());
        let before = wakes();
        map.insert(1, 10, Duration::ZERO).unwrap(); // due at once
        assert!(wakes() > before, "not woken by the insert");
        assert_eq!(map.poll_expired(&mut cx), Poll::Ready(Some((1, 10))));
        map.insert(2, 20, Duration::from_secs(1)).unwrap();
        assert!(map.poll_expired(&mut cx).is_pending());
        let before = wakes();
        assert!(map.reset(&2, Duration::ZERO)); // due at once
        assert!(wakes() > before, "not woken by the reset");
        assert_eq!(map.poll_expired(&mut cx), Poll::Ready(Some((2, 20))));
    });
    assert!(finished, "a waker that uses the map deadlocked on its lock");
}

/// A key that panics when dropped (unless already unwinding).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct KeyPanicsOnDrop(u32);

impl Drop for KeyPanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("key {} dropped", self.0);
        }
    }
}

/// The stream drops its own clone of an expired key where a panic is
/// caught, as the map's other drops are: the pair still comes out, not
/// lost with the panic.
#[test]
fn a_key_that_panics_in_drop_still_comes_out_with_its_value() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let map = timer.delay_map::<KeyPanicsOnDrop, u32>();
    map.insert(KeyPanicsOnDrop(1), 10, Duration::from_millis(1))
        .unwrap();
    timer.advance(Duration::from_millis(1));
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        map.poll_expired(&mut cx)
    }));
    let (key, value) = match polled {
        Ok(Poll::Ready(Some(pair))) => pair,
        Ok(other) => panic!("expected the pair, got {:?}", other.map(|_| ())),
        Err(_) => panic!("the stream's clone of the key panicked, and the pair was lost"),
    };
    assert_eq!((key.0, value), (1, 10));
    std::mem::forget(key);
    assert!(map.is_empty());
}

/// `shrink_to_fit` gives back what removed keys left, in the map and its queue, and keeps the
/// keys still there, with their deadlines.
#[test]
fn shrink_to_fit_gives_back_removed_keys_room_and_keeps_the_rest() {
    let timer = manual(MS);
    let map: DelayMap<u32, u32> = timer.delay_map();
    for key in 0..10_000 {
        map.insert(key, key, MS * (1 + key % 7)).unwrap();
    }
    let full = map.capacity();
    assert!(full >= 10_000, "{full} keys' room");
    for key in 0..10_000 {
        if key % 1000 != 0 {
            assert_eq!(map.remove(&key), Some(key));
        }
    }
    let before = map.capacity();
    map.shrink_to_fit();
    let after = map.capacity();
    assert!(
        after < 100 && after < before,
        "{after} keys' room kept for 10 keys, {before} before"
    );
    assert_eq!(map.len(), 10);
    // The keys left keep their deadlines, and come out once.
    let deadlines: Vec<_> = (0..10)
        .map(|i| map.get_deadline(&(i * 1000)).unwrap())
        .collect();
    assert!(deadlines.iter().all(|&d| d > timer.now()));
    timer.advance(MS * 7);
    let mut out = drain(&map);
    out.sort_unstable();
    assert_eq!(
        out,
        (0..10).map(|i| (i * 1000, i * 1000)).collect::<Vec<_>>()
    );
    assert!(map.is_empty());
}
