//! Which lanes this thread owns: one per timer it has scheduled on.
//!
//! A thread adopts a lane on its first schedule and lets go of it when it
//! exits, so a pool's threads reuse lanes rather than piling them up. A
//! lane of a timer that shut down is dropped the next time this thread
//! adopts one.

use std::cell::RefCell;
use std::sync::Arc;

use crate::lane::Lane;

/// The lanes this thread owns. Letting go on drop hands each one back.
struct Held(Vec<Arc<Lane>>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.iter().for_each(|lane| lane.let_go());
    }
}

#[cfg(not(loom))]
thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held(Vec::new())) };
}

#[cfg(loom)]
loom::thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held(Vec::new()));
}

/// Runs `f` on this thread's lane of timer `timer_id`, if it owns one.
/// `f` must not run user code: it may be called from inside another `f`
/// or while a task runs.
#[inline]
pub(crate) fn with_lane<R>(timer_id: u64, f: impl FnOnce(&Lane) -> R) -> Option<R> {
    HELD.try_with(|held| {
        let held = held.try_borrow().ok()?;
        let lane = held.0.iter().find(|lane| lane.timer_id == timer_id)?;
        Some(f(lane))
    })
    .ok()
    .flatten()
}

/// Makes `adopt`'s lane this thread's, if this thread can hold one more.
/// `adopt` is called only then, and must hand over an owned lane.
pub(crate) fn hold(adopt: impl FnOnce() -> Option<Arc<Lane>>) -> bool {
    HELD.try_with(|held| {
        let Ok(mut held) = held.try_borrow_mut() else {
            return false;
        };
        held.0.retain(|lane| {
            let closed = lane.is_closed();
            if closed {
                lane.let_go();
            }
            !closed
        });
        match adopt() {
            Some(lane) => {
                held.0.push(lane);
                true
            }
            None => false,
        }
    })
    .unwrap_or(false)
}
