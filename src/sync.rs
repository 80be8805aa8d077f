//! Synchronisation primitives: std's, or loom's under `cfg(loom)`, so the
//! models in `tests/loom.rs` explore every interleaving of the crate's own
//! atomics and locks. Process-wide statics (timer ids, the live-timer count)
//! stay std's: loom's types cannot live in statics.
//!
//! The intake and cancel queues are crossbeam's under both; loom sees each
//! push and pop as one step.

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
