//! Counts live timers, to warn once when there are too many, as Netty does:
//! a timer per connection is a common mistake that costs a thread each.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Above this many live timers, log one error.
pub const TOO_MANY_TIMERS: usize = 64;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static WARNED: AtomicBool = AtomicBool::new(false);

/// Held by each timer for its lifetime.
pub(crate) struct Registration(());

impl Registration {
    pub(crate) fn new() -> Registration {
        let live = LIVE.fetch_add(1, Ordering::AcqRel) + 1;
        if live > TOO_MANY_TIMERS && !WARNED.swap(true, Ordering::AcqRel) {
            crate::engine::notice::error(format_args!(
                "you are creating too many HashedWheelTimer instances ({live} live, more than \
                 {TOO_MANY_TIMERS}). A timer is a shared resource with its own thread: reuse \
                 one across the application instead of one per connection or request."
            ));
        }
        Registration(())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::AcqRel);
    }
}
