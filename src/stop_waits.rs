//! `stop()`s that wait on each other across timers. A task of timer A that stops B waits for B's
//! driver; if B's driver is in a task that stops A (or stops C, whose task stops A, ...), each
//! waits for the other for ever. Each waiting `stop()` called from a timer's task or driver is an
//! edge here, and the one that would close a cycle is refused.

use std::sync::{Mutex, PoisonError};

/// (a timer whose task or driver a thread runs, the timer that thread's `stop()` waits for).
static WAITS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

/// The edges of one waiting `stop()`, taken away when it is done.
pub(crate) struct Waiting(Vec<(u64, u64)>);

impl Waiting {
    /// Records that the timers `running` on this thread wait for `target`'s driver. `None`, with
    /// nothing recorded, if `target` already waits, through other `stop()`s, for one of them.
    pub(crate) fn start(running: Vec<u64>, target: u64) -> Option<Waiting> {
        let mut waits = WAITS.lock().unwrap_or_else(PoisonError::into_inner);
        // Every timer whose driver `target`'s waits, through other stops.
        let mut reached = vec![target];
        let mut next = 0;
        while let Some(&from) = reached.get(next) {
            if running.contains(&from) {
                return None;
            }
            for &(waiter, stopped) in waits.iter() {
                if waiter == from && !reached.contains(&stopped) {
                    reached.push(stopped);
                }
            }
            next += 1;
        }
        let edges: Vec<(u64, u64)> = running.into_iter().map(|id| (id, target)).collect();
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
