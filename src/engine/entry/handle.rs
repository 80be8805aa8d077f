//! `Timeout`, the handle to one entry: its reference, clone, drop and
//! identity. Its public methods are the face's, in `timeout.rs`.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::engine::driver::Shared;
use crate::engine::entry::{key::Key, Entry};

// Its public docs are on the face's re-export (`lib.rs`).
#[allow(missing_docs)]
pub struct Timeout {
    /// Keeps the timer's memory alive (not its driver: that goes with the last `HashedWheelTimer`).
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
        Timeout::from_parts(self.key, self.shared())
    }
}

impl Drop for Timeout {
    #[inline]
    fn drop(&mut self) {
        self.shared.release(self.key, 1);
    }
}

impl PartialEq for Timeout {
    /// Same key and timer: a handle keeps its slot from reuse.
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
