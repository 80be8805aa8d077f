//! `Timeout`, the handle to one entry: its reference, clone, drop and identity, in 8 bytes. Its
//! public methods are the face's, in `timeout.rs`.
//!
//! A handle is its timer's id and its entry's key; `TIMERS` maps each live timer's id to its
//! `Shared`, of whose `Arc` the handle holds one strong count. A handle that held the `Arc`
//! itself was 16 bytes: a pending timeout with its handle kept took 56 bytes, 40 now.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::engine::driver::Shared;
use crate::engine::entry::{arena::boxed_array, key::Key, Entry};

// Its public docs are on the face's re-export (`lib.rs`). Equal handles name one entry of one
// timer: a handle keeps its slot from reuse, and its timer's id.
#[allow(missing_docs)]
#[derive(PartialEq, Eq, Hash)]
pub struct Timeout {
    /// Its timer's id in `TIMERS`: the handle holds one strong count of that `Arc<Shared>` (it
    /// keeps the timer's memory alive, not its driver: that goes with the last `HashedWheelTimer`).
    timer: NonZeroU32,
    /// Holds one of the entry's references.
    key: Key,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Option<Timeout>>() == 8);

impl Timeout {
    /// A handle that takes over one reference to `key` from the caller.
    #[inline(always)]
    pub(crate) fn from_parts(key: Key, shared: &Arc<Shared>) -> Timeout {
        let (_counted, timer) = (Arc::into_raw(shared.clone()), shared.id.0);
        Timeout { timer, key }
    }

    pub(crate) fn key(&self) -> Key {
        self.key
    }

    pub(crate) fn entry(&self) -> &Entry {
        self.shared().entry(self.key)
    }

    #[inline(always)]
    pub(crate) fn shared(&self) -> &Shared {
        // SAFETY: the handle holds a strong count of its timer's `Arc` (`from_parts`, `clone`),
        // so the `Shared` lives, registered under this id, until the handle's drop gives it back.
        unsafe { &*shared_of(self.timer) }
    }
}

impl Clone for Timeout {
    fn clone(&self) -> Timeout {
        self.entry().retain();
        // SAFETY: the pointer is a live `Arc`'s (see `shared`); the count is the clone's own.
        unsafe { Arc::increment_strong_count(shared_of(self.timer)) };
        Timeout { ..*self }
    }
}

impl Drop for Timeout {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: takes back this handle's own strong count (see `shared`), once: dropped at the
        // end of this call, even if the release unwinds.
        let shared = unsafe { Arc::from_raw(shared_of(self.timer)) };
        shared.release(self.key, 1);
    }
}

/// Each live timer's `Shared` by id, in pages made as ids reach them; null for an id no timer
/// holds. Ids are `u32`s: no count of live timers that memory can hold finds the end.
static TIMERS: [OnceLock<Box<Page>>; 1 << 16] = [const { OnceLock::new() }; 1 << 16];
type Page = [AtomicPtr<Shared>; 1 << 16];
/// The ids given back by dropped timers, the next never given out, and whether one warned.
static IDS: Mutex<(Vec<u32>, u32, bool)> = Mutex::new((Vec::new(), 1, false));

/// Above this many live timers, the next logs one error, as Netty does: a timer per connection is
/// a common mistake that costs a thread each.
pub const TOO_MANY_TIMERS: usize = 64;

fn shared_of(id: NonZeroU32) -> *const Shared {
    place(id.get()).load(Ordering::Acquire)
}

/// `id`'s place in `TIMERS`, its page made if it is the first there.
fn place(id: u32) -> &'static AtomicPtr<Shared> {
    let page = TIMERS[(id >> 16) as usize]
        .get_or_init(|| boxed_array(|| AtomicPtr::new(std::ptr::null_mut())));
    &page[(id & 0xffff) as usize]
}

/// A timer's id, naming `shared`: its place in its `Arc`, filled before any handle of it exists.
/// The id is given back when the `Shared` drops, after its last handle.
pub(crate) struct Registered(NonZeroU32);

impl Registered {
    pub(crate) fn new(shared: *const Shared) -> Registered {
        let mut ids = IDS.lock().unwrap_or_else(PoisonError::into_inner);
        let id = ids.0.pop().unwrap_or(ids.1);
        ids.1 = ids.1.max(id + 1);
        let live = (ids.1 - 1) as usize - ids.0.len();
        if live > TOO_MANY_TIMERS && !std::mem::replace(&mut ids.2, true) {
            crate::engine::notice::error(format_args!(
                "you are creating too many HashedWheelTimer instances ({live} live, more than \
                 {TOO_MANY_TIMERS}). A timer is a shared resource with its own thread: reuse \
                 one across the application instead of one per connection or request."
            ));
        }
        place(id).store(shared.cast_mut(), Ordering::Release);
        Registered(NonZeroU32::new(id).expect("ids start at 1"))
    }

    /// The id, which also marks the threads that run the timer (`driver/mod.rs`).
    pub(crate) fn get(&self) -> u64 {
        u64::from(self.0.get())
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut ids = IDS.lock().unwrap_or_else(PoisonError::into_inner);
        ids.0.push(self.0.get());
    }
}

#[cfg(test)]
mod tests {
    use super::place;

    /// A flat table of 2^20 places ended there: the next live timer's id was out of bounds.
    #[test]
    fn ids_past_the_first_page_have_places_of_their_own_made_once() {
        let (id, below) = (70_000, 70_000 - (1 << 16));
        assert!(!std::ptr::eq(place(id), place(below)));
        assert!(std::ptr::eq(place(id), place(id)), "made once");
        assert!(std::ptr::eq(place(u32::MAX), place(u32::MAX)));
    }
}
