//! Drivers that wait on each other across timers. A task of timer A that stops or advances B waits
//! for B's driver; if B's driver is in a task that stops or advances A (or C, whose task waits for
//! A, ...), each waits for the other for ever. Each wait from a timer's task or driver is an edge
//! here, and the one that would close a ring is not taken: `stop()` is refused, and `advance` only
//! moves the clock, as in a task of the running `advance`.

use std::sync::{Mutex, PoisonError};

use crate::engine::driver::Shared;

/// (a timer whose task or driver a thread runs, the timer whose driver that thread waits for).
/// No ring is ever added, so following the edges from any timer ends.
static WAITS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// The edges of one wait, taken away when it is done.
pub(crate) struct Waiting(Vec<(u64, u64)>);

impl Shared {
    /// Records that the other timers this thread runs a task of or drives wait for this one's
    /// driver. `None`, with nothing recorded, if this one's driver already waits, through others,
    /// for one of them.
    pub(crate) fn wait_for_driver(&self) -> Option<Waiting> {
        let mut running = Shared::running_here();
        running.retain(|&id| id != self.id.get());
        let mut waits = WAITS.lock().unwrap_or_else(PoisonError::into_inner);
        let mut awaited = vec![self.id.get()]; // this driver, and those it waits for
        while let Some(from) = awaited.pop() {
            if running.contains(&from) {
                return None;
            }
            awaited.extend(waits.iter().filter(|e| e.0 == from).map(|e| e.1));
        }
        let edges: Vec<(u64, u64)> = running.into_iter().map(|id| (id, self.id.get())).collect();
        waits.extend_from_slice(&edges);
        Some(Waiting(edges))
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waits = WAITS.lock().unwrap_or_else(PoisonError::into_inner);
        for edge in &self.0 {
            if let Some(at) = waits.iter().position(|e| e == edge) {
                waits.swap_remove(at);
            }
        }
    }
}
