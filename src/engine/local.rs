//! Which lanes this thread owns: one per timer it has scheduled on.
//!
//! A thread adopts a lane on its first schedule and lets go of it when it
//! exits, so a pool's threads reuse lanes rather than pile them up; a lane
//! of a timer that shut down is dropped at this thread's next adoption.
//!
//! `LAST` caches the last look-up's timer id and lane index: a plain `Cell`,
//! so the common case (one timer per thread) costs no borrow and no search.
//! It is cleared whenever this thread lets go of that lane, and has no
//! destructor, so it stays readable while other thread-locals are destroyed.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use crate::engine::lane::Lane;

/// The lanes this thread owns, each handed back on drop.
struct Held(Vec<Arc<Lane>>);

impl Drop for Held {
    fn drop(&mut self) {
        forget_last();
        self.0.iter().for_each(|lane| lane.let_go());
    }
}

/// No timer has id 0.
const NONE: (u64, u32) = (0, 0);

#[cfg(not(loom))]
thread_local! {
    static HELD: RefCell<Held> = const { RefCell::new(Held(Vec::new())) };
    static LAST: Cell<(u64, u32)> = const { Cell::new(NONE) };
}

#[cfg(loom)]
loom::thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held(Vec::new()));
    static LAST: Cell<(u64, u32)> = Cell::new(NONE);
}

fn forget_last() {
    let _ = LAST.try_with(|last| last.set(NONE));
}

/// The index of this thread's lane of timer `timer_id`, if it owns one.
#[inline]
pub(crate) fn lane_index(timer_id: u64) -> Option<u32> {
    match LAST.try_with(Cell::get) {
        Ok((id, index)) if id == timer_id => Some(index),
        _ => lane_index_slow(timer_id),
    }
}

#[cold]
fn lane_index_slow(timer_id: u64) -> Option<u32> {
    let index = with_lane(timer_id, |lane| lane.index)?;
    let _ = LAST.try_with(|last| last.set((timer_id, index)));
    Some(index)
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
                forget_last();
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
