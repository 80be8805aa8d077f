//! The handle to one entry, which users know as `Timeout`: a reference to
//! the entry, and to its timer's `Shared`, which it keeps alive.
//! Its public methods are the face's, in `timeout.rs`; here is what makes
//! it a handle: the reference it holds, cloning and dropping it, and its
//! identity.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::engine::driver::Shared;
use crate::engine::entry::key::Key;
use crate::engine::entry::Entry;

// The engine's reference to an entry. Its public docs are on the face's
// re-export (`lib.rs`), its public methods in `timeout.rs`.
#[allow(missing_docs)]
pub struct Timeout {
    /// Keeps the timer's memory alive (not its driver: that goes with the
    /// last `HashedWheelTimer`).
    shared: Arc<Shared>,
    /// Holds one of the entry's references.
    key: Key,
}

impl Timeout {
    /// A handle that takes over one reference to `key` from the caller.
    #[inline(always)]
    pub(crate) fn from_parts(key: Key, shared: &Arc<Shared>) -> Timeout {
        Timeout {
            shared: shared.clone(),
            key,
        }
    }

    pub(crate) fn key(&self) -> Key {
        self.key
    }

    pub(crate) fn entry(&self) -> &Entry {
        self.shared().entry(self.key)
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Clone for Timeout {
    fn clone(&self) -> Timeout {
        self.shared().slots.retain(self.key);
        Timeout {
            shared: self.shared.clone(),
            key: self.key,
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
