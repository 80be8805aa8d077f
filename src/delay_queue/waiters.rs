//! The consumers of a delay queue waiting for an item, and how the driver wakes them without a
//! lost wake-up and, mostly, without a lock.
//!
//! A consumer is a handle: the queue, or one of its clones, each with a [`Seat`] here, which keeps
//! a waker for each task polling the handle (`SHARED` at most).
//!
//! A consumer that finds nothing registers its waker, arms the flag, and looks again. The driver
//! pushes, then reads the flag, and takes the lock only if it is armed. A full fence on each side,
//! between the write of one and the read of the other, means at least one of them sees the other's
//! write: the consumer finds the item, or the driver finds the flag (the store-buffering pattern;
//! `loom_models` below checks it).

use std::task::Waker;

use slab::Slab;

use crate::delay_queue::caught;
use crate::engine::driver::dispatch::each_then_first_panic;
use crate::engine::sync::{fence, lock, AtomicBool, Mutex, Ordering};

#[derive(Default)]
pub(crate) struct Waiters {
    /// True while a waker may be registered.
    armed: AtomicBool,
    /// One slot per handle that has waited: its tasks' latest wakers, `SHARED` at most, until woken.
    seats: Mutex<Slab<Vec<Waker>>>,
}

/// How many tasks polling one handle keep a waker each; past that, the oldest is woken to poll again.
const SHARED: usize = 64;

/// A handle's slot among the waiters: its index + 1, 0 before it first
/// waits. Written only under the waiters' lock (std's atomic: loom sees
/// the lock), given up by `Waiters::leave` when the handle drops.
#[derive(Default)]
pub(crate) struct Seat(std::sync::atomic::AtomicUsize);

impl Waiters {
    /// Registers `waker` among those to wake for `seat`'s handle, before the
    /// caller looks for an item once more.
    pub(crate) fn register(&self, seat: &Seat, waker: &Waker) {
        let displaced = {
            let mut seats = lock(&self.seats);
            let taken = seat.0.load(Ordering::Relaxed).checked_sub(1);
            let index = taken.filter(|&i| seats.contains(i)).unwrap_or_else(|| {
                let index = seats.insert(Vec::new());
                seat.0.store(index + 1, Ordering::Relaxed);
                index
            });
            let kept = &mut seats[index];
            let fresh = !kept.iter().any(|w| w.will_wake(waker));
            let displaced = (fresh && kept.len() == SHARED).then(|| kept.remove(0));
            kept.extend(fresh.then(|| waker.clone()));
            self.armed.store(true, Ordering::Relaxed);
            displaced
        };
        fence(Ordering::SeqCst);
        // Outside the lock: a waker may run user code, another task's, whose panic is caught.
        if let Some(displaced) = displaced {
            caught("consumer's replaced waker", || displaced.wake());
        }
    }

    /// `seat`'s handle is dropped: gives its slot up.
    pub(crate) fn leave(&self, seat: &Seat) {
        let Some(index) = seat.0.load(Ordering::Relaxed).checked_sub(1) else {
            return;
        };
        let waker = lock(&self.seats).try_remove(index);
        seat.0.store(0, Ordering::Relaxed);
        caught("consumer's waker, dropped,", || drop(waker)); // outside the lock
    }

    /// After an item was pushed, or anything else a waiting consumer must see: wakes every one.
    #[inline]
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        let mut seats = lock(&self.seats);
        self.armed.store(false, Ordering::Relaxed);
        let wakers: Vec<Waker> = seats.iter_mut().flat_map(|(_, w)| w.drain(..)).collect();
        drop(seats);
        // Outside the lock: a waker may run user code. If one panics, the rest are woken first.
        each_then_first_panic(wakers, Waker::wake);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::engine::sync::AtomicUsize;
    use futures::task::{waker, ArcWake};
    use loom::sync::Arc;

    struct Flag(loom::sync::atomic::AtomicBool);

    impl ArcWake for Flag {
        fn wake_by_ref(arc_self: &std::sync::Arc<Self>) {
            arc_self.0.store(true, Ordering::SeqCst);
        }
    }

    /// The waiters, the count of items queued, and a producer thread that
    /// queues one and wakes the waiters.
    fn producer() -> (Arc<Waiters>, Arc<AtomicUsize>, loom::thread::JoinHandle<()>) {
        let waiters = Arc::new(Waiters::default());
        let queued = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (waiters, queued) = (waiters.clone(), queued.clone());
            loom::thread::spawn(move || {
                queued.fetch_add(1, Ordering::Relaxed);
                waiters.wake_all();
            })
        };
        (waiters, queued, producer)
    }

    fn flag() -> std::sync::Arc<Flag> {
        std::sync::Arc::new(Flag(loom::sync::atomic::AtomicBool::new(false)))
    }

    /// A consumer that finds the queue empty and registers, against a
    /// producer that pushes and wakes: the consumer either finds the item
    /// on its second look or is woken; then one that replaces its waker.
    #[test]
    fn loom_models_a_delay_queue_consumer_is_never_left_waiting_even_replacing_its_waker() {
        loom::model(|| {
            let (waiters, queued, producer) = producer();
            let woken = flag();
            let found_at_once = queued.load(Ordering::Relaxed) == 1;
            let mut found = found_at_once;
            if !found {
                waiters.register(&Seat::default(), &waker(woken.clone()));
                found = queued.load(Ordering::Relaxed) == 1;
            }
            producer.join().unwrap();
            assert!(
                found || woken.0.load(Ordering::SeqCst),
                "the item was pushed, and the consumer neither saw it nor was woken"
            );
        });
        // One consumer polls twice, with a new waker the second time (as two tasks sharing its
        // handle: its seat keeps both), and a second consumer on another thread waits too,
        // against a producer that pushes and wakes: each poll either finds the item or its waker
        // is woken. Then both handles drop, racing nothing left.
        loom::model(|| {
            let (waiters, queued, producer) = producer();
            let other = {
                let (waiters, queued) = (waiters.clone(), queued.clone());
                loom::thread::spawn(move || {
                    let (seat, woken) = (Seat::default(), flag());
                    waiters.register(&seat, &waker(woken.clone()));
                    let found = queued.load(Ordering::Relaxed) == 1;
                    (seat, woken, found)
                })
            };
            let seat = Seat::default();
            let (first, second) = (flag(), flag());
            waiters.register(&seat, &waker(first.clone()));
            let first_found = queued.load(Ordering::Relaxed) == 1;
            waiters.register(&seat, &waker(second.clone()));
            let found = queued.load(Ordering::Relaxed) == 1;
            producer.join().unwrap();
            let (other_seat, other_woken, other_found) = other.join().unwrap();
            for (found, flag, poll) in [
                (found, &second, "the consumer's latest poll"),
                (other_found, &other_woken, "the other consumer"),
                (first_found, &first, "the first poll"),
            ] {
                let woken = flag.0.load(Ordering::SeqCst);
                assert!(found || woken, "{poll} neither saw the item nor was woken");
            }
            waiters.leave(&seat);
            waiters.leave(&other_seat);
            assert!(
                lock(&waiters.seats).is_empty(),
                "the handles gave their seats up"
            );
        });
    }
}
