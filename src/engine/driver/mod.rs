//! `Shared`, one per timer, held by every handle. One driver at a time turns
//! its wheel (`turn.rs`): the worker thread or a tokio task (`worker.rs`), or
//! `advance` (`manual.rs`). Tasks run in `dispatch.rs`; `stop.rs` ends it all.

pub(crate) mod counts;
pub(crate) mod dispatch;
pub(crate) mod held;
pub(crate) mod lateness;
pub(crate) mod manual;
pub(crate) mod stop;
pub(crate) mod turn;
pub(crate) mod waits;
pub(crate) mod worker;

use std::sync::{Arc, OnceLock, Weak};
use std::thread::{JoinHandle, Thread};
use std::{any::Any, cell::RefCell};

use slab::Slab;

use crate::engine::clock::{Clock, Nanos, Source};
use crate::engine::driver::counts::{Counts, Totals};
use crate::engine::entry::{
    arena::Slots, handle::Registered, key::Key, task::Handoff, task::Jobs, task::Notice, Entry,
};
use crate::engine::intake::{lane::urgent_nanos, Intake, MAX_LANES};
#[cfg(test)]
use crate::engine::sync::AtomicUsize;
use crate::engine::sync::{lock, AtomicBool, AtomicU64, Mutex, MutexGuard, Ordering, Queue};
use crate::engine::wheel::Wheel;

/// `planned_wake` while the driver is awake: no producer needs to wake it.
pub(crate) const BUSY: u64 = 0;
/// `planned_wake` while the driver sleeps with nothing to wait for.
pub(crate) const IDLE: u64 = u64::MAX;

/// `RUNNING`'s mark of a timer this thread drives under the driver lock, beside its id.
const DRIVING: u64 = 1 << 63;

crate::engine::sync::thread_local! {
    /// Ids of the timers this thread drives (with `DRIVING`) or runs a task of, innermost last (one
    /// may drive another), however deep.
    #[allow(clippy::missing_const_for_thread_local)] // loom's `thread_local!` takes no `const`
    static RUNNING: RefCell<Vec<u64>> = RefCell::new(Vec::new());
}

/// How producers wake a driver: the worker thread, or a tokio task.
pub(crate) enum Unpark {
    Thread(Thread),
    Task(Arc<tokio::sync::Notify>),
}

pub(crate) struct Config {
    pub(crate) executor: Option<Handoff>,
    pub(crate) tick_nanos: u64,
    pub(crate) ticks_per_wheel: usize,
    pub(crate) max_pending: Option<usize>,
    pub(crate) thread_name: String,
    #[cfg(feature = "metrics")]
    pub(crate) publish: Box<dyn Publish>,
}

/// Feature `metrics`: the face's publisher (`src/publish.rs`). The driver
/// tells it each turn's end (`next`: when it turns again; `None`: idle, or
/// stopped) and, per turn that fires, takes its lateness histogram.
#[cfg(feature = "metrics")]
pub(crate) trait Publish: Send + Sync {
    fn lateness(&self) -> metrics::Histogram;
    fn turned(&self, shared: &Shared, now: Nanos, next: Option<Nanos>);
}

/// What only the driver touches, and `stop()` once the driver is done.
pub(crate) struct Core {
    pub(crate) wheel: Wheel,
    pub(crate) last_housekeeping: Option<u64>,
    /// Due entries left unfired by a shutdown: stopped, uncounted, each with
    /// the timer's reference, for `stop()` to return.
    pub(crate) unfired: Vec<Key>,
    /// Due when filed, each with the timer's reference: the filing turn fires them.
    pub(crate) ready: Vec<Key>,
    /// Keys held in lanes, by the tick they are taken in (`held.rs`); `held_from`, the first
    /// tick not yet taken.
    pub(crate) held: Vec<std::collections::VecDeque<held::Held>>,
    pub(crate) held_from: u64,
    /// Each lane's cells before this were scanned (`Lane::scan`).
    pub(crate) scanned: Vec<u64>,
    /// A look at the lanes found cells withdrawn by cancels: producers cancel young.
    pub(crate) saw_withdrawn: bool,
}

pub(crate) struct Shared {
    /// Its id, for its `Timeout` handles (`handle.rs`) and the threads' marks (`RUNNING`).
    pub(crate) id: Registered,
    pub(crate) urgent_nanos: u64,
    /// Ticks per bucket of held keys (`held.rs`).
    pub(crate) held_width: u64,
    pub(crate) config: Config,
    pub(crate) clock: Clock,
    pub(crate) slots: Slots,
    pub(crate) counts: Counts,
    shutdown: AtomicBool,
    /// Set by `shut_down_dropping`: what never ran was dropped, and can never run.
    pub(crate) tasks_dropped: AtomicBool,
    /// New and re-armed entries, each with the timer's reference.
    pub(crate) intake: Intake,
    /// Entries cancelled after the driver took them (to take out of the wheel)
    /// or moved earlier by a reset (to file again), each with a reference.
    pub(crate) mailbox: Queue<Key>,
    pub(crate) housekeeping_requested: AtomicBool,
    pub(crate) planned_wake: AtomicU64,
    /// The latest `now` entries were fired by, stored before `fire` fires them.
    fired_by: AtomicU64,
    #[cfg(test)]
    pub(crate) unparks: AtomicUsize,
    core: Mutex<Core>,
    /// Jobs in the executor's hands (see `dispatch.rs`).
    pub(crate) jobs: Mutex<Jobs>,
    /// Held while turning by any driver but the worker thread.
    pub(crate) driver: Mutex<()>,
    /// Set while an `advance` turns (`is_nested`).
    pub(crate) advancing: AtomicBool,
    pub(crate) worker: Mutex<Option<JoinHandle<()>>>,
    wake: OnceLock<Unpark>,
    /// The face's handle, weakly, for `Timeout::timer()`, kept unnamed.
    pub(crate) owner: OnceLock<Weak<dyn Any + Send + Sync>>,
    /// Who hears notices (`Notice`) and the shutdown, by the id a notice names.
    pub(crate) listeners: Mutex<Slab<Arc<dyn Listener>>>,
}

impl Shared {
    pub(crate) fn new(config: Config, source: Source) -> Arc<Shared> {
        Arc::new_cyclic(|shared| Shared {
            id: Registered::new(shared.as_ptr()),
            urgent_nanos: urgent_nanos(config.tick_nanos),
            held_width: (urgent_nanos(config.tick_nanos) / config.tick_nanos)
                .div_ceil(held::HELD_TICKS - 2)
                .max(1),
            clock: Clock::of(config.tick_nanos, source),
            core: Mutex::new(Core {
                wheel: Wheel::new(config.ticks_per_wheel),
                last_housekeeping: None,
                unfired: Vec::new(),
                ready: Vec::new(),
                held: (0..held::HELD_TICKS).map(|_| Default::default()).collect(),
                held_from: 0,
                scanned: vec![0; MAX_LANES],
                saw_withdrawn: false,
            }),
            slots: Slots::new(),
            counts: Counts::new(config.max_pending),
            config,
            shutdown: AtomicBool::new(false),
            tasks_dropped: AtomicBool::new(false),
            intake: Intake::new(),
            mailbox: Queue::new(),
            housekeeping_requested: AtomicBool::new(false),
            planned_wake: AtomicU64::new(BUSY),
            fired_by: AtomicU64::new(0),
            #[cfg(test)]
            unparks: AtomicUsize::new(0),
            jobs: Mutex::new(Jobs::new()),
            driver: Mutex::new(()),
            advancing: AtomicBool::new(false),
            worker: Mutex::new(None),
            wake: OnceLock::new(),
            owner: OnceLock::new(),
            listeners: Mutex::new(Slab::new()),
        })
    }

    pub(crate) fn owner(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        self.owner.get()?.upgrade()
    }

    /// The counts, once the batched cancels are done.
    pub(crate) fn totals(&self) -> Totals {
        self.cancel_batched();
        self.counts.totals()
    }

    #[inline(always)]
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// True if an entry due at `deadline` has not fired nor been stopped, so a
    /// task whose waker it holds will be woken: a poll need not look at it.
    #[inline(always)]
    pub(crate) fn surely_pending(&self, deadline: Nanos) -> bool {
        deadline > self.fired_by.load(Ordering::Acquire) && !self.is_shutdown()
    }

    /// Registers `listener` for the notices that name the id returned, below `limit` (the bits a
    /// notice has for it), and for the shutdown (one made after it has nobody waiting to tell).
    /// `None` if `limit` ids are taken.
    pub(crate) fn listen(&self, listener: Arc<dyn Listener>, limit: usize) -> Option<u32> {
        let mut listeners = lock(&self.listeners);
        let id = listeners.vacant_key();
        (id < limit).then(|| listeners.insert(listener))?;
        Some(id as u32)
    }

    /// Forgets the listener `listen` gave `id`: notices naming it are heard by nobody.
    pub(crate) fn unlisten(&self, id: u32) {
        let gone = lock(&self.listeners).try_remove(id as usize);
        drop(gone); // after the lock: its drop may drop wakers, user code
    }

    /// Hands `notice` to its listener, outside the registry's lock (it wakes tasks).
    pub(crate) fn deliver(&self, notice: Notice) {
        let (id, token) = notice.parts();
        let listener = lock(&self.listeners).get(id).cloned();
        if let Some(listener) = listener {
            listener.hear(token);
        }
    }

    pub(crate) fn lock_core(&self) -> MutexGuard<'_, Core> {
        // No user code runs under this lock (see `Shared::release_locked`).
        lock(&self.core)
    }

    pub(crate) fn unpark_worker(&self) {
        #[cfg(test)]
        self.unparks.fetch_add(1, Ordering::Relaxed);
        match self.wake.get() {
            Some(Unpark::Thread(thread)) => thread.unpark(),
            Some(Unpark::Task(notify)) => notify.notify_one(),
            None => {}
        }
    }

    /// True in a task of this timer, or where it is driven (a task's drop), however deeply nested.
    pub(crate) fn in_own_task(&self) -> bool {
        Shared::running_here().contains(&self.id.get())
    }

    /// The timers this thread runs a task of or drives: their drivers may wait for it.
    pub(crate) fn running_here() -> Vec<u64> {
        let ids = RUNNING.try_with(|ids| ids.borrow().iter().map(|id| id & !DRIVING).collect());
        ids.unwrap_or_default() // none, once the thread's locals are gone
    }

    /// True where this timer's driver turns, on this thread, or in a task of it while an `advance`
    /// runs (on this thread, or on one that may wait for this task: an executor's job). Not for a
    /// brief turn elsewhere (a delay queue's poll): that one is waited for.
    pub(crate) fn is_nested(&self) -> bool {
        let driving = RUNNING.try_with(|ids| ids.borrow().contains(&(self.id.get() | DRIVING)));
        driving.unwrap_or(false) || self.in_own_task() && self.advancing.load(Ordering::SeqCst)
    }

    /// Runs `f` as this timer's driver, under the driver lock (the worker thread drives without).
    pub(crate) fn drive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _driving = lock(&self.driver);
        self.mark_as(self.id.get() | DRIVING, f)
    }

    pub(crate) fn try_drive<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _driving = self.driver.try_lock().ok()?;
        Some(self.mark_as(self.id.get() | DRIVING, f))
    }

    /// Runs `f` marked as a task of this timer, or as its driver (`in_own_task`), the mark taken
    /// off after, even on a panic.
    #[inline]
    pub(crate) fn mark<R>(&self, f: impl FnOnce() -> R) -> R {
        self.mark_as(self.id.get(), f)
    }

    #[inline]
    fn mark_as<R>(&self, mark: u64, f: impl FnOnce() -> R) -> R {
        struct Unmark;
        impl Drop for Unmark {
            fn drop(&mut self) {
                let _ = RUNNING.try_with(|ids| ids.borrow_mut().pop());
            }
        }
        let _unmark = RUNNING
            .try_with(|ids| ids.borrow_mut().push(mark))
            .map(|()| Unmark);
        f()
    }

    #[inline]
    pub(crate) fn entry(&self, key: Key) -> &Entry {
        self.slots.get(key)
    }

    /// Entries in use: neither free in the arena nor on a lane.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        let in_lanes: usize = self.intake.lanes().map(|lane| lane.free_len()).sum();
        self.slots.live() - in_lanes
    }
}

/// Hears the notices of its timeouts (a delay queue's items), on the driver.
pub(crate) trait Listener: Send + Sync {
    /// A timeout whose notice carries `token` fired.
    fn hear(&self, token: u64);
    /// Told once, after `stop()` has stopped every entry.
    fn shut_down(&self);
}
