//! Defects found in `DelayQueue`, `DelayMap` and the tower layer, each
//! guarded by a test that failed before its fix.

use hashed_wheel_timer::{DelayMap, HashedWheelTimer, TimerError};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

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

/// A key that panics when dropped (unless already unwinding).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct PanicsOnDrop(u32);

impl Drop for PanicsOnDrop {
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
    let map = timer.delay_map::<PanicsOnDrop, u32>();
    map.insert(PanicsOnDrop(1), 10, Duration::from_millis(1))
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

/// A waker that records its wake, or panics when woken.
struct Wakes(std::sync::atomic::AtomicBool, bool);

impl futures::task::ArcWake for Wakes {
    fn wake_by_ref(waker: &Arc<Wakes>) {
        assert!(!waker.1, "a consumer's waker panicked when woken");
        waker.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One consumer's waker panics when woken: the other consumers waiting on
/// the queue are woken all the same, not left waiting for an item that is
/// there.
#[test]
fn a_waker_that_panics_does_not_cost_the_other_consumers_their_wake_up() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let queue = timer.delay_queue::<u32>();
    let (first, second) = (queue.clone(), queue.clone());
    let panics = Arc::new(Wakes(Default::default(), true));
    let records = Arc::new(Wakes(Default::default(), false));
    for (consumer, waker) in [(&first, &panics), (&second, &records)] {
        let waker = futures::task::waker(waker.clone());
        let polled = consumer.poll_expired(&mut Context::from_waker(&waker));
        assert!(polled.is_pending());
    }
    queue.insert(7, Duration::from_millis(1)).unwrap();
    timer.advance(Duration::from_millis(1)); // the driver catches the panic
    assert!(
        records.0.load(std::sync::atomic::Ordering::SeqCst),
        "the second consumer was never woken"
    );
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(matches!(second.poll_expired(&mut cx), Poll::Ready(Some(e)) if *e.get_ref() == 7));
}
