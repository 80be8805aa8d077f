//! The consumers of a delay queue waiting for an item, and how the driver
//! wakes them without a lost wake-up and, mostly, without a lock.
//!
//! A consumer that finds nothing registers its waker, arms the flag, and
//! looks again. The driver pushes, then reads the flag, and takes the lock
//! only if it is armed. A full fence on each side, between the write of
//! one and the read of the other, means at least one of them sees the
//! other's write: the consumer finds the item, or the driver finds the
//! flag (the store-buffering pattern; `loom_models` below checks it).

use std::task::Waker;

use crate::engine::sync::{fence, AtomicBool, Mutex, Ordering};

#[derive(Default)]
pub(crate) struct Waiters {
    /// True while a waker may be registered.
    armed: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Waiters {
    /// Registers `waker` before the caller looks for an item once more.
    pub(crate) fn register(&self, waker: &Waker) {
        {
            let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
            if !wakers.iter().any(|w| w.will_wake(waker)) {
                wakers.push(waker.clone());
            }
            self.armed.store(true, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
    }

    /// After an item was pushed, or anything else a waiting consumer must
    /// see: wakes every registered consumer.
    #[inline]
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        let wakers = {
            let mut wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
            self.armed.store(false, Ordering::Relaxed);
            std::mem::take(&mut *wakers)
        };
        // Outside the lock: a waker may run user code.
        wakers.into_iter().for_each(Waker::wake);
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

    /// A consumer that finds the queue empty and registers, against a
    /// producer that pushes and wakes: the consumer either finds the item
    /// on its second look or is woken.
    #[test]
    fn loom_models_a_delay_queue_consumer_is_never_left_waiting() {
        loom::model(|| {
            let waiters = Arc::new(Waiters::default());
            let queued = Arc::new(AtomicUsize::new(0));
            let producer = {
                let (waiters, queued) = (waiters.clone(), queued.clone());
                loom::thread::spawn(move || {
                    queued.fetch_add(1, Ordering::Relaxed);
                    waiters.wake_all();
                })
            };
            let woken = std::sync::Arc::new(Flag(loom::sync::atomic::AtomicBool::new(false)));
            let found_at_once = queued.load(Ordering::Relaxed) == 1;
            let mut found = found_at_once;
            if !found {
                waiters.register(&waker(woken.clone()));
                found = queued.load(Ordering::Relaxed) == 1;
            }
            producer.join().unwrap();
            assert!(
                found || woken.0.load(Ordering::SeqCst),
                "the item was pushed, and the consumer neither saw it nor was woken"
            );
        });
    }
}
