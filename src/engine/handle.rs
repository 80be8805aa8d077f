//! The handle to one entry, which users know as `Timeout`: a reference to
//! the entry, kept alive through an anchor of its timer (see below).
//! Its public methods are the face's, in `timeout.rs`; here is what makes
//! it a handle: the reference it holds, cloning and dropping it, and its
//! identity.
//!
//! # Anchors
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
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::engine::entry::Entry;
use crate::engine::key::Key;
use crate::engine::shared::Shared;

// The engine's reference to an entry. Its public docs are on the face's
// re-export (`lib.rs`), its public methods in `timeout.rs`.
#[allow(missing_docs)]
pub struct Timeout {
    /// Keeps the timer alive (see "Anchors" above).
    anchor: Arc<Anchor>,
    /// Holds one of the entry's references.
    key: Key,
    /// Where the key was queued in a lane, or 0: a cancel reaches the
    /// lane's cell without waiting for the entry (see `Shared::cancel_at`).
    /// Stale once the worker took it, which a cancel finds out.
    mark: u32,
}

impl Timeout {
    /// A handle that takes over one reference to `key` from the caller.
    #[inline(always)]
    pub(crate) fn from_parts(key: Key, shared: &Arc<Shared>) -> Timeout {
        Timeout::on_anchor(key, here(shared))
    }

    /// `from_parts`, for a key just queued at `mark`.
    #[inline(always)]
    pub(crate) fn queued_at(key: Key, mark: u32, shared: &Arc<Shared>) -> Timeout {
        Timeout {
            anchor: here(shared),
            key,
            mark,
        }
    }

    /// `from_parts` on a given anchor: handles made in a batch share one.
    #[inline(always)]
    pub(crate) fn on_anchor(key: Key, anchor: Arc<Anchor>) -> Timeout {
        Timeout {
            anchor,
            key,
            mark: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn anchor(&self) -> &Arc<Anchor> {
        &self.anchor
    }

    pub(crate) fn key(&self) -> Key {
        self.key
    }

    /// Where the key was queued, or 0 (see the field).
    pub(crate) fn mark(&self) -> u32 {
        self.mark
    }

    pub(crate) fn entry(&self) -> &Entry {
        self.shared().entry(self.key)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.anchor.shared
    }
}

impl Clone for Timeout {
    fn clone(&self) -> Timeout {
        self.shared().slots.retain(self.key);
        Timeout {
            anchor: self.anchor.clone(),
            key: self.key,
            mark: self.mark,
        }
    }
}

impl Drop for Timeout {
    #[inline]
    fn drop(&mut self) {
        self.shared().release(self.key);
    }
}

impl PartialEq for Timeout {
    /// Two handles are equal if they refer to the same timeout. (A handle
    /// keeps its entry's slot from being reused, so equal keys of one timer
    /// are the same timeout.)
    fn eq(&self, other: &Timeout) -> bool {
        self.key == other.key && Arc::ptr_eq(self.shared(), other.shared())
    }
}

impl Eq for Timeout {}

impl Hash for Timeout {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Arc::as_ptr(self.shared()).hash(state);
        self.key.hash(state);
    }
}

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
fn here(shared: &Arc<Shared>) -> Arc<Anchor> {
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
