//! The worker thread: one per timer on a real clock, started by the first timeout, ended by
//! `stop()` or the last handle's drop. Each round: a `turn`, then sleep until the time it asked
//! for; with nothing pending, park with no timeout, so an idle timer costs no wake-ups. While
//! producers cancel young (withdrawn lane cells, an empty wheel), it sleeps a round instead:
//! parked, every new timeout would wake it, to file timeouts about to be cancelled.
//!
//! **On a tokio runtime** (`Builder::tokio_clock`) the driver is a task (`spawn_on_tokio`): the
//! same rounds, waiting on `sleep_until` (`tokio_wake`) or a producer's `Notify`, so a paused
//! runtime moves the timer as its own timers. The sleep's waker turns the wheel before it wakes the
//! task (`TurnWaker`): what is due at an instant has fired when tokio's own timers of that instant
//! wake. A round holds the driver lock (`stop()` waits for it), never across an `await`.

use std::sync::{Arc, Weak};
use std::task::{Context, Wake, Waker};
use std::{future::Future, thread, time::Duration};

use futures::future::select;
use futures::task::AtomicWaker;
use tokio::sync::Notify;

use crate::engine::driver::{counts::Refusal, Shared, Unpark, BUSY};
use crate::engine::sync::{lock, Ordering};
use crate::engine::{clock::Nanos, entry::key::Key};

#[inline(always)]
pub(crate) fn ensure_started(shared: &Arc<Shared>) -> Result<(), Refusal> {
    if shared.wake.get().is_some() {
        return Ok(()); // a driver runs: the common case, without the lock
    }
    start(shared)
}

#[cold]
fn start(shared: &Arc<Shared>) -> Result<(), Refusal> {
    let mut worker = lock(&shared.worker);
    if worker.is_some() || shared.is_shutdown() {
        return Ok(());
    }
    let (marker, for_thread) = (Arc::clone(shared), Arc::clone(shared));
    let handle = thread::Builder::new()
        .name(shared.config.thread_name.clone())
        .spawn(move || marker.mark(|| run(ShutDownOnDrop(for_thread))))
        .map_err(|e| Refusal::WorkerSpawn(e.to_string()))?;
    let _ = shared.wake.set(Unpark::Thread(handle.thread().clone()));
    *worker = Some(handle);
    Ok(())
}

fn run(guard: ShutDownOnDrop) {
    let shared = &guard.0;
    // Published before the first look at the queue: no unpark is missed.
    let _ = shared.wake.set(Unpark::Thread(thread::current()));
    let mut due = Vec::new();
    loop {
        match round(shared, &mut due) {
            Round::Exit => return,
            Round::Again => {}
            Round::Sleep(wake_at) => {
                match wake_at.map(|at| at.saturating_sub(shared.clock.now())) {
                    None => thread::park(),
                    Some(0) => continue,
                    Some(nanos) => thread::park_timeout(Duration::from_nanos(nanos)),
                }
                shared.counts.note_wakeup();
            }
        }
    }
}

pub(crate) enum Round {
    Exit,
    Again,
    /// Sleep until this time on the timer's clock (`None`: until woken).
    Sleep(Option<Nanos>),
}

/// A sleeping driver's round (worker thread, tokio task): `turn`, `plan_sleep`.
pub(crate) fn round(shared: &Arc<Shared>, due: &mut Vec<Key>) -> Round {
    shared.planned_wake.store(BUSY, Ordering::SeqCst);
    if shared.is_shutdown() {
        return Round::Exit;
    }
    let next = shared.turn(shared.clock.now(), due).next;
    shared.plan_sleep(next).map_or(Round::Again, Round::Sleep)
}

/// Spawns the driver on `runtime`; producers wake it through a `Notify`.
pub(crate) fn spawn_on_tokio(shared: &Arc<Shared>, runtime: &tokio::runtime::Handle) {
    let notify = Arc::new(Notify::new());
    let _ = shared.wake.set(Unpark::Task(notify.clone()));
    // The guard is the future's from the start: a task dropped before its first poll drops it too.
    runtime.spawn(drive(ShutDownOnDrop(shared.clone()), notify));
}

async fn drive(guard: ShutDownOnDrop, notify: Arc<Notify>) {
    let shared = &guard.0;
    let mut due = Vec::new();
    loop {
        let planned = shared.drive(|| round(shared, &mut due));
        match planned {
            Round::Exit => return,
            Round::Again => tokio::task::yield_now().await,
            Round::Sleep(None) => {
                notify.notified().await;
                shared.counts.note_wakeup();
            }
            Round::Sleep(Some(wake_at)) => {
                // On a tokio clock, a tokio `Instant` is the same instant.
                let at = shared.clock.to_instant(tokio_wake(shared, wake_at)).into();
                let woken = std::pin::pin!(notify.notified());
                let mut sleep = std::pin::pin!(tokio::time::sleep_until(at));
                let turn = Arc::new(TurnWaker {
                    shared: Arc::downgrade(shared),
                    task: AtomicWaker::new(),
                });
                let slept = std::future::poll_fn(|cx| {
                    turn.task.register(cx.waker());
                    let waker = Waker::from(turn.clone());
                    sleep.as_mut().poll(&mut Context::from_waker(&waker))
                });
                select(woken, slept).await;
                shared.counts.note_wakeup();
            }
        }
    }
}

/// When to ask tokio to wake the driver for a turn planned at `wake_at`, a tick's end or, in the
/// tick under way, its earliest deadline not due yet. tokio wakes a sleep at its own next
/// millisecond, not at the wheel's: asked for the tick's end, a timeout would wait for both. So it
/// is asked for the tick's start, once that is ahead, else for `wake_at` (a clock that can be paused:
/// at most tokio's next millisecond); the turn there fires what is due by then (`expire_due_by`).
fn tokio_wake(shared: &Shared, wake_at: Nanos) -> Nanos {
    let start = wake_at.saturating_sub(shared.config.tick_nanos) + 1;
    let now = shared.clock.now();
    if start > now {
        start
    } else if shared.clock.reads_real_time() {
        wake_at
    } else {
        wake_at.min(now + 1)
    }
}

impl Shared {
    /// A turn here, unless a driver is turning (false): on a manual or tokio
    /// clock, what is due at an instant has fired when a task looks at it.
    pub(crate) fn turn_here(self: &Arc<Self>) -> bool {
        self.try_drive(|| self.turn(self.clock.now(), &mut Vec::new()))
            .is_some()
    }
}

/// The driver's sleep's waker: it turns the wheel, then wakes the task polling the sleep.
struct TurnWaker {
    shared: Weak<Shared>,
    task: AtomicWaker,
}

impl Wake for TurnWaker {
    fn wake(self: Arc<Self>) {
        if let Some(shared) = self.shared.upgrade().filter(|s| !s.is_shutdown()) {
            shared.turn_here();
        }
        self.task.wake();
    }
}

/// Shuts the timer down if its runtime drops the driver task first, and drops what never ran
/// once the last handle is gone (a turn it ended in sets aside what no `stop()` will take).
struct ShutDownOnDrop(Arc<Shared>);

impl Drop for ShutDownOnDrop {
    fn drop(&mut self) {
        if !self.0.is_shutdown() || self.0.owner().is_none() {
            self.0.shut_down_dropping(false);
        }
    }
}
