//! Synchronisation primitives: std's, or loom's under `cfg(loom)` for the
//! models in `tests/loom.rs`. Statics (timer ids, the live-timer count)
//! stay std's: loom's types cannot be statics. Crossbeam queues stay
//! crossbeam's; loom sees each push and pop as one step.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread::LocalKey;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread::LocalKey;

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

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

/// Spins until `acquired()` returns true: briefly busy, then yielding the
/// thread (under loom, yielding at once so the model makes progress).
#[inline]
pub(crate) fn spin(mut acquired: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !acquired() {
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        if spins < 32 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
        spins = spins.saturating_add(1);
    }
}
