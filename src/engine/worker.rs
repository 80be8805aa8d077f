//! The worker thread: one per timer with a real clock, started by the first
//! timeout, ended by `stop()` or by dropping the last timer handle.
//!
//! Each loop: step the wheel up to the current tick (and fire what in the
//! next tick is due by now), fire what is due, then sleep until the next
//! tick with work, or a little past its end if one wake-up can then serve
//! the tick after it too, with nothing more than a tick late (see
//! `Shared::wheel_wake`). With nothing pending it parks with no timeout,
//! so an idle timer costs no wake-ups at all.
//!
//! Except while producers cancel timeouts young: when the worker finds
//! cells withdrawn from the lanes and an empty wheel, it sleeps one round
//! instead, and parks for good only after a round without them. Parked for
//! good, the worker must be woken by every new timeout, however far its
//! deadline; a producer that cancels each timeout soon after queueing it
//! would then wake the worker thousands of times a second, only for it to
//! file a timeout about to be cancelled.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::engine::intake::earliest;
use crate::engine::refusal::Refusal;
use crate::engine::shared::{Shared, BUSY};
use crate::engine::sync::Ordering;

/// Starts the worker if this timer has none yet.
#[inline(always)]
pub(crate) fn ensure_started(shared: &Arc<Shared>) -> Result<(), Refusal> {
    if shared.has_worker_thread() {
        return Ok(()); // the common case, without the lock
    }
    start(shared)
}

#[cold]
fn start(shared: &Arc<Shared>) -> Result<(), Refusal> {
    let mut worker = shared.worker.lock().unwrap_or_else(|p| p.into_inner());
    if worker.is_some() || shared.is_shutdown() {
        return Ok(());
    }
    let for_thread = Arc::clone(shared);
    let handle = thread::Builder::new()
        .name(shared.config.thread_name.clone())
        .spawn(move || run(for_thread))
        .map_err(|e| Refusal::WorkerSpawn(e.to_string()))?;
    shared.set_worker_thread(handle.thread().clone());
    *worker = Some(handle);
    Ok(())
}

fn run(shared: Arc<Shared>) {
    // Publish this thread before the first look at the queue, so that no
    // producer's unpark after that look can miss it.
    shared.set_worker_thread(thread::current());
    let clock = &shared.clock;
    let mut due = Vec::new();
    loop {
        shared.planned_wake.store(BUSY, Ordering::SeqCst);
        if shared.is_shutdown() {
            return;
        }
        #[cfg(test)]
        shared.worker_rounds.fetch_add(1, Ordering::Relaxed);
        let now = clock.now();
        let now_tick = clock.ticks_at(now);
        let drained = shared.step(now, now_tick, &mut due);
        shared.fire(&mut due);

        let cancelling_young = shared.intake.take_saw_withdrawn();
        let at_tick = |tick: u64| Some(clock.time_of(tick));
        let mut next = {
            let core = shared.lock_core();
            let linger = || clock.time_of(now_tick.saturating_add(core.wheel.ticks_per_round()));
            shared
                .wheel_wake(&core)
                .or_else(|| cancelling_young.then(linger))
        };
        next = earliest(next, drained.look_by.and_then(at_tick));
        if drained.more {
            next = at_tick(now_tick.saturating_add(1));
        }
        if shared.housekeeping_requested.load(Ordering::SeqCst) {
            next = earliest(next, at_tick(now_tick.saturating_add(1)));
        }
        let Ok(next) = shared.plan_sleep(now_tick, next) else {
            continue;
        };
        match next {
            None => thread::park(),
            Some(wake_at) => {
                let now = clock.now();
                if wake_at > now {
                    thread::park_timeout(Duration::from_nanos(wake_at - now));
                }
            }
        }
    }
}
