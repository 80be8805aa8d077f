//! The handle to one entry, which users know as `Timeout`: a reference to
//! the entry, kept alive through an anchor of its timer (see `anchor.rs`).
//! Its public methods are the face's, in `timeout.rs`; here is what makes
//! it a handle: the reference it holds, cloning and dropping it, and its
//! identity.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::engine::anchor::{self, Anchor};
use crate::engine::entry::Entry;
use crate::engine::key::Key;
use crate::engine::shared::Shared;

/// A handle to a task scheduled on a [`HashedWheelTimer`](crate::HashedWheelTimer),
/// as returned by `new_timeout`. Netty's `Timeout`.
///
/// It is cheap to clone (two reference counts) and two words in size; every
/// clone refers to the same timeout. Dropping handles does not cancel: call
/// [`cancel`].
///
/// A one-shot timeout ends in exactly one of three ways: it *expires* (its
/// task ran), it is *cancelled*, or it is returned by
/// [`stop`](crate::HashedWheelTimer::stop) without running. A periodic
/// one (from [`schedule_at_fixed_rate`] or [`schedule_with_fixed_delay`])
/// stays pending across its runs, and ends cancelled, stopped, or expired
/// by a panicking run.
///
/// | | `is_pending` | `is_expired` | `is_cancelled` | `is_stopped` |
/// |---|---|---|---|---|
/// | waiting to run | yes | | | |
/// | one-shot: ran or running | | yes | | |
/// | periodic: running, more runs to come | yes | | | |
/// | periodic: a run panicked | | yes | | |
/// | [`cancel`] won | | | yes | |
/// | returned by `stop`, or ended by it | | | | yes |
///
/// [`is_panicked`](Timeout::is_panicked) is true on top of that when a run
/// of the task panicked.
///
/// # Examples
///
/// ```
/// use hashed_wheel_timer::HashedWheelTimer;
/// use std::time::Duration;
///
/// let timer = HashedWheelTimer::builder().manual_clock().build()?;
/// let t = timer.new_timeout(|_| println!("request timed out"), Duration::from_millis(100))?;
/// assert!(t.cancel(), "the response arrived first");
/// assert!(!t.cancel(), "only the first cancel wins");
/// timer.advance(Duration::from_secs(1));
/// assert!(t.is_cancelled() && !t.is_expired());
/// # Ok::<(), hashed_wheel_timer::TimerError>(())
/// ```
///
/// [`cancel`]: Timeout::cancel
/// [`schedule_at_fixed_rate`]: crate::HashedWheelTimer::schedule_at_fixed_rate
/// [`schedule_with_fixed_delay`]: crate::HashedWheelTimer::schedule_with_fixed_delay
pub struct Timeout {
    /// Keeps the timer alive; see `anchor.rs`.
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
        Timeout::on_anchor(key, anchor::here(shared))
    }

    /// `from_parts`, for a key just queued at `mark`.
    #[inline(always)]
    pub(crate) fn queued_at(key: Key, mark: u32, shared: &Arc<Shared>) -> Timeout {
        Timeout {
            anchor: anchor::here(shared),
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
