//! What a `Timeout` holds to keep its timer alive: an anchor per thread.
//!
//! Handles holding the timer's own `Arc` would all bump one count shared by
//! every producer thread: with two threads scheduling and cancelling, that
//! cache line moved between cores twice per timeout, about a third of the
//! time spent. Instead a thread keeps an anchor of the last timer it made a
//! handle on, and handles count on the anchor: a cache line that, in the
//! common case, only that thread writes.
//!
//! The price: a thread keeps that timer's memory (not its tasks or worker,
//! which go with the last `HashedWheelTimer`) until it makes a handle on
//! another timer or exits. The thread that drops the last
//! `HashedWheelTimer` lets go of its anchor at once.

use std::cell::RefCell;
use std::sync::Arc;

use crate::engine::shared::Shared;

/// Holds a timer for the handles counted on it.
pub(crate) struct Anchor {
    pub(crate) shared: Arc<Shared>,
}

impl Anchor {
    /// A new anchor of `shared`, not this thread's.
    pub(crate) fn new(shared: &Arc<Shared>) -> Arc<Anchor> {
        Arc::new(Anchor {
            shared: shared.clone(),
        })
    }
}

#[cfg(not(loom))]
thread_local! {
    static LAST: RefCell<Option<Arc<Anchor>>> = const { RefCell::new(None) };
}

#[cfg(loom)]
loom::thread_local! {
    static LAST: RefCell<Option<Arc<Anchor>>> = RefCell::new(None);
}

/// An anchor of `shared` for a handle made on this thread.
#[inline]
pub(crate) fn here(shared: &Arc<Shared>) -> Arc<Anchor> {
    let cached = LAST.try_with(|last| {
        let last = last.try_borrow().ok()?;
        let anchor = last.as_ref()?;
        Arc::ptr_eq(&anchor.shared, shared).then(|| anchor.clone())
    });
    match cached {
        Ok(Some(anchor)) => anchor,
        _ => remember(shared),
    }
}

/// Lets go of this thread's anchor if it holds `shared`.
pub(crate) fn forget(shared: &Arc<Shared>) {
    let old = LAST.try_with(|last| {
        let mut last = last.try_borrow_mut().ok()?;
        let held = last.as_ref()?;
        Arc::ptr_eq(&held.shared, shared).then(|| last.take())?
    });
    drop(old); // after the borrow, as in `remember`
}

/// A new anchor of `shared`, kept as this thread's last one if it can be.
#[cold]
fn remember(shared: &Arc<Shared>) -> Arc<Anchor> {
    let anchor = Anchor::new(shared);
    let old = LAST.try_with(|last| {
        let mut last = last.try_borrow_mut().ok()?;
        last.replace(anchor.clone())
    });
    drop(old); // after the borrow: this may drop the last handle of a timer
    anchor
}

#[cfg(test)]
mod tests {
    use crate::HashedWheelTimer;
    use std::time::Duration;

    #[test]
    fn handles_made_on_one_thread_share_its_anchor() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let a = timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap();
        let b = timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap();
        assert!(std::sync::Arc::ptr_eq(a.anchor(), b.anchor()));
        let shared = timer.shared().clone();
        let elsewhere = std::thread::spawn(move || {
            let timer = HashedWheelTimer::of(&shared).unwrap();
            timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap()
        })
        .join()
        .unwrap();
        assert!(!std::sync::Arc::ptr_eq(a.anchor(), elsewhere.anchor()));
        assert!(std::sync::Arc::ptr_eq(a.shared(), elsewhere.shared()));
    }

    #[test]
    fn dropping_the_timer_frees_it_on_the_thread_that_used_it() {
        let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
        drop(timer.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
        let weak = std::sync::Arc::downgrade(timer.shared());
        drop(timer);
        assert!(weak.upgrade().is_none(), "nothing keeps it");
    }

    #[test]
    fn a_thread_lets_go_of_a_timer_when_it_moves_to_another() {
        use std::sync::mpsc::channel;
        let a = HashedWheelTimer::builder().manual_clock().build().unwrap();
        let weak = std::sync::Arc::downgrade(a.shared());
        let (go, wait) = channel::<()>();
        let (done, finished) = channel::<()>();
        let on_a = a.clone();
        let other = std::thread::spawn(move || {
            drop(on_a.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
            drop(on_a);
            done.send(()).unwrap();
            wait.recv().unwrap(); // `a` is dropped meanwhile
            let b = HashedWheelTimer::builder().manual_clock().build().unwrap();
            drop(b.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
            done.send(()).unwrap();
            wait.recv().unwrap(); // alive until checked
        });
        finished.recv().unwrap();
        drop(a); // the last handle, on a thread with no anchor of it
        assert!(
            weak.upgrade().is_some(),
            "the other thread's anchor holds it"
        );
        go.send(()).unwrap();
        finished.recv().unwrap();
        assert!(weak.upgrade().is_none(), "freed once that anchor moved on");
        go.send(()).unwrap();
        other.join().unwrap();
    }
}
