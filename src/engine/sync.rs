//! Synchronisation primitives and `thread_local!`: std's, or loom's under `cfg(loom)` for the
//! models in `tests/loom/`. Statics (timer ids, the live-timer count) stay std's: loom's types
//! cannot be statics. The engine's queues are crossbeam's `SegQueue`, or under loom a locked `VecDeque`, so
//! that loom sees a push happen before the pop that takes it.

#[cfg(loom)]
use loom as base;
#[cfg(not(loom))]
use std as base;

pub(crate) use base::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
pub(crate) use base::sync::{Mutex, MutexGuard};
pub(crate) use base::thread::yield_now;
pub(crate) use base::thread_local;

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
pub(crate) use crossbeam_queue::SegQueue as Queue;

/// `mutex.lock()`, going on past a poisoning: no lock of the engine, a delay queue or a
/// delay map guards data a panic leaves half-changed (no user code runs under one, its
/// panic is caught, or, for a map key's `Hash` or `Eq`, the map stays sound).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// `SegQueue`'s API on a loom `Mutex`.
#[cfg(loom)]
pub(crate) struct Queue<T>(Mutex<std::collections::VecDeque<T>>);

#[cfg(loom)]
impl<T> Queue<T> {
    pub(crate) fn new() -> Queue<T> {
        Queue(Mutex::new(std::collections::VecDeque::new()))
    }

    pub(crate) fn push(&self, value: T) {
        self.0.lock().unwrap().push_back(value);
    }

    pub(crate) fn pop(&self) -> Option<T> {
        self.0.lock().unwrap().pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `std`'s `UnsafeCell` with loom's closure API, which loom checks.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Spins until `acquired()` returns true: crossbeam's backoff, briefly busy, then yielding the
/// thread (under loom, yielding at once so the model makes progress).
#[inline]
pub(crate) fn spin(mut acquired: impl FnMut() -> bool) {
    let backoff = crossbeam_utils::Backoff::new();
    while !acquired() {
        if cfg!(loom) {
            yield_now()
        } else {
            backoff.snooze()
        }
    }
}
