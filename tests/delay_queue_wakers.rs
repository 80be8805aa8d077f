//! How many wakers a `DelayQueue` keeps for the consumers waiting on it:
//! one per consumer handle at most, however many times, and with however
//! many different wakers, it was polled; none for a handle dropped; and
//! every waiting consumer is still woken.

mod common;

use common::manual;
use futures::task::{waker, ArcWake};
use hashed_wheel_timer::{DelayQueue, HashedWheelTimer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// A waker's target that counts its wake-ups. The queue holds a clone of
/// a waker as one more strong reference to it.
#[derive(Default)]
struct Counted(AtomicUsize);

impl ArcWake for Counted {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Counted {
    fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Polls `queue` once with a fresh waker, which it drops after: the
/// returned target's strong count is 1 unless the queue kept a clone.
fn poll_with_fresh_waker(queue: &DelayQueue<u32>) -> (Arc<Counted>, bool) {
    let target = Arc::new(Counted::default());
    let w = waker(target.clone());
    let pending = queue
        .poll_expired(&mut Context::from_waker(&w))
        .is_pending();
    (target, pending)
}

/// How many of `targets` the queue still holds a waker of.
fn kept(targets: &[Arc<Counted>]) -> usize {
    targets.iter().filter(|t| Arc::strong_count(t) > 1).count()
}

#[test]
fn a_consumer_polling_an_empty_queue_with_fresh_wakers_keeps_one() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let targets: Vec<Arc<Counted>> = (0..10_000)
        .map(|_| {
            let (target, pending) = poll_with_fresh_waker(&queue);
            assert!(pending, "the queue is empty");
            target
        })
        .collect();
    assert!(
        kept(&targets) <= 64,
        "{} wakers kept for one consumer (one per task, for up to 64 tasks sharing it)",
        kept(&targets)
    );
    // The one it kept is the latest, and it is woken when an item fires.
    queue.insert(7, MS).unwrap();
    timer.advance(MS);
    assert!(
        targets.last().unwrap().wakes() >= 1,
        "the consumer was woken"
    );
    assert_eq!(kept(&targets), 0, "a waker is given up once woken");
}

#[test]
fn several_consumers_keep_a_bounded_number_of_wakers_each_and_are_all_woken() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let consumers: Vec<DelayQueue<u32>> = (0..3).map(|_| queue.clone()).collect();
    let mut targets: Vec<Vec<Arc<Counted>>> = vec![Vec::new(); consumers.len()];
    for _ in 0..1_000 {
        for (consumer, targets) in consumers.iter().zip(&mut targets) {
            targets.push(poll_with_fresh_waker(consumer).0);
        }
    }
    let all: usize = targets.iter().map(|t| kept(t)).sum();
    // A handle keeps a waker per task polling it, for up to 64 tasks: fresh wakers look like tasks.
    assert!(all <= 64 * consumers.len(), "{all} wakers kept");
    queue.insert(7, MS).unwrap();
    timer.advance(MS);
    for (i, targets) in targets.iter().enumerate() {
        assert!(
            targets.last().unwrap().wakes() >= 1,
            "consumer {i} was not woken"
        );
    }
    // Exactly one of them gets the item.
    let got: Vec<u32> = consumers
        .iter()
        .filter_map(|c| match poll_expired_noop(c) {
            Poll::Ready(Some(e)) => Some(e.into_inner()),
            _ => None,
        })
        .collect();
    assert_eq!(got, vec![7]);
}

fn poll_expired_noop(queue: &DelayQueue<u32>) -> Poll<Option<hashed_wheel_timer::Expired<u32>>> {
    queue.poll_expired(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

#[test]
fn a_dropped_consumer_handle_keeps_no_waker() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let consumer = queue.clone();
    let targets: Vec<Arc<Counted>> = (0..10)
        .map(|_| poll_with_fresh_waker(&consumer).0)
        .collect();
    drop(consumer);
    assert_eq!(kept(&targets), 0, "the dropped consumer's waker is kept");
}

/// Two tasks polling one handle (through `&DelayQueue`): the handle keeps
/// one waker, but neither task is left waiting. The one whose waker the
/// other replaced is woken then, to poll again.
#[test]
fn tasks_sharing_one_handle_are_never_left_waiting() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let (first, pending) = poll_with_fresh_waker(&queue);
    assert!(pending);
    let (second, pending) = poll_with_fresh_waker(&queue);
    assert!(pending);
    queue.insert(7, MS).unwrap();
    timer.advance(MS);
    assert!(first.wakes() >= 1, "the first task was left waiting");
    assert!(second.wakes() >= 1, "the second task was left waiting");
}

/// The same waker polled again is kept once and not woken for it.
#[test]
fn polling_again_with_the_same_waker_neither_wakes_nor_adds() {
    let timer = manual(MS);
    let queue = timer.delay_queue::<u32>();
    let target = Arc::new(Counted::default());
    let w = waker(target.clone());
    for _ in 0..100 {
        assert!(queue
            .poll_expired(&mut Context::from_waker(&w))
            .is_pending());
    }
    drop(w);
    assert_eq!(Arc::strong_count(&target), 2, "one waker kept");
    assert_eq!(target.wakes(), 0, "no wake-up without an item");
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

/// `stop()` tells each delay queue of its timer in turn. A consumer's waker that panics when
/// woken neither makes `stop()` panic nor leaves the next queue's consumer unwoken.
#[test]
fn stop_tells_every_queue_though_a_consumers_waker_panics() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let (first, second) = (timer.delay_queue::<u32>(), timer.delay_queue::<u32>());
    let panics = Arc::new(Wakes(Default::default(), true));
    let records = Arc::new(Wakes(Default::default(), false));
    for (queue, waker) in [(&first, &panics), (&second, &records)] {
        let waker = futures::task::waker(waker.clone());
        assert!(queue
            .poll_expired(&mut Context::from_waker(&waker))
            .is_pending());
    }
    let stop = std::panic::AssertUnwindSafe(|| timer.stop());
    assert!(std::panic::catch_unwind(stop).is_ok(), "stop() panicked");
    let woken = records.0.load(std::sync::atomic::Ordering::SeqCst);
    assert!(woken, "the second queue's consumer was never woken");
}

/// `close()` wakes the consumers so they can end: one whose waker panics neither makes `close()`
/// (of a queue or a map) panic nor leaves another consumer unwoken.
#[test]
fn close_wakes_every_consumer_though_one_waker_panics() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    for close_map in [false, true] {
        let (queue, map) = (timer.delay_queue::<u32>(), timer.delay_map::<u32, u32>());
        let panics = Arc::new(Wakes(Default::default(), true));
        let records = Arc::new(Wakes(Default::default(), false));
        let consumers = [(queue.clone(), map.clone()), (queue.clone(), map.clone())];
        for ((queue, map), waker) in consumers.iter().zip([&panics, &records]) {
            let waker = futures::task::waker(waker.clone());
            let mut cx = Context::from_waker(&waker);
            let polled = match close_map {
                true => {
                    futures::Stream::poll_next(std::pin::Pin::new(&mut &*map), &mut cx).is_pending()
                }
                false => queue.poll_expired(&mut cx).is_pending(),
            };
            assert!(polled);
        }
        let close = std::panic::AssertUnwindSafe(|| match close_map {
            true => map.close(),
            false => queue.close(),
        });
        assert!(std::panic::catch_unwind(close).is_ok(), "close() panicked");
        let woken = records.0.load(std::sync::atomic::Ordering::SeqCst);
        assert!(woken, "the other consumer was never woken");
    }
}

/// A panic payload whose own destructor panics (`panic_any(Bomb)`).
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the panic payload's destructor panicked");
    }
}

/// Panics with a `Bomb` when woken, or when dropped.
struct Throws;

static THROWN: AtomicUsize = AtomicUsize::new(0);

impl ArcWake for Throws {
    fn wake_by_ref(_: &Arc<Self>) {
        THROWN.fetch_add(1, Ordering::SeqCst);
        std::panic::panic_any(Bomb);
    }
}

impl Drop for Throws {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            std::panic::panic_any(Bomb);
        }
    }
}

/// A consumer's waker, and an item's `Drop`, panicking with a payload whose destructor panics
/// too: the queue catches both panics, as it catches a plain one, and nothing unwinds out of
/// `insert`, `remove`, `clear` or the last handle's drop.
#[test]
fn panics_whose_payloads_panic_on_drop_do_not_escape_the_queue() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let unwinds = |what: &str, f: &mut dyn FnMut()| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        assert!(caught.is_ok(), "{what} unwound");
    };
    let queue = timer.delay_queue::<Throws>();
    let waker = futures::task::waker(Arc::new(Throws));
    assert!(queue
        .poll_expired(&mut Context::from_waker(&waker))
        .is_pending());
    let mut key = None;
    unwinds("insert, waking", &mut || {
        key = queue.insert(Throws, Duration::ZERO).ok()
    });
    let key = key.expect("inserted");
    assert_eq!(THROWN.load(Ordering::SeqCst), 1, "the consumer was woken");
    let mut removed = None;
    unwinds("remove", &mut || removed = queue.remove(&key));
    std::mem::forget(removed.expect("removed")); // ours to drop, and it panics
    queue.insert(Throws, MS).unwrap();
    unwinds("clear", &mut || queue.clear());
    queue.insert(Throws, MS).unwrap();
    unwinds("the last drop", &mut || drop(queue.clone()));
    std::mem::forget(waker); // its target panics when dropped
    let last = std::sync::Mutex::new(Some(queue));
    unwinds("the last handle's drop", &mut || {
        drop(last.lock().unwrap().take())
    });
}
