//! The driver as a task on a tokio runtime, for `Builder::tokio_clock`.
//!
//! It runs the worker thread's rounds (`worker::round`), and between them
//! waits with `tokio::time::sleep_until`, or for a producer's `Notify`. So
//! a paused runtime moves the timer as it moves its own timers: `advance`
//! fires what comes due, and auto-advance jumps to the timer's next wake-up.
//!
//! A round holds the driver lock, as `advance` does, so `stop()` waits for
//! one in progress; never across an `await`. When the runtime shuts down,
//! the task is dropped and the timer shuts down with it.

use std::sync::Arc;

use futures::future::select;
use tokio::sync::Notify;

use crate::engine::shared::Shared;
use crate::engine::worker::{round, Round};

/// Spawns `shared`'s driver on `runtime`, and makes `notify` the way
/// producers wake it.
pub(crate) fn spawn(shared: &Arc<Shared>, runtime: &tokio::runtime::Handle) {
    let notify = Arc::new(Notify::new());
    shared.set_driver_notify(notify.clone());
    // The guard is the future's from the start: a task dropped before its
    // first poll drops it too.
    runtime.spawn(drive(ShutDownOnDrop(shared.clone()), notify));
}

async fn drive(guard: ShutDownOnDrop, notify: Arc<Notify>) {
    let shared = &guard.0;
    let mut due = Vec::new();
    loop {
        let planned = {
            let _driving = shared.driver.lock().unwrap_or_else(|p| p.into_inner());
            shared.as_driver(|| round(shared, &mut due))
        };
        match planned {
            Round::Exit => return,
            Round::Again => tokio::task::yield_now().await,
            Round::Sleep(None) => {
                notify.notified().await;
                shared.counts.note_wakeup();
            }
            Round::Sleep(Some(wake_at)) => {
                let Some(at) = shared.clock.tokio_instant(wake_at) else {
                    return; // not a tokio clock: never spawned for one
                };
                let woken = std::pin::pin!(notify.notified());
                let slept = std::pin::pin!(tokio::time::sleep_until(at));
                select(woken, slept).await;
                shared.counts.note_wakeup();
            }
        }
    }
}

/// Shuts the timer down if the driver task is dropped before it: its
/// runtime shut down. What never ran is dropped, as when the last handle
/// goes.
struct ShutDownOnDrop(Arc<Shared>);

impl Drop for ShutDownOnDrop {
    fn drop(&mut self) {
        if self.0.is_shutdown() {
            return;
        }
        for key in self.0.shut_down(false) {
            drop(self.0.entry(key).take_task());
            self.0.slots.release(key);
        }
    }
}
