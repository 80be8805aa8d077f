//! loom models of the races that matter, on manual-clock timers: the
//! thread calling `advance` plays the worker.
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test --release --test loom
#![cfg(loom)]

use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError};
use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use loom::thread;
use std::sync::Arc;
use std::time::Duration;

const TICK: Duration = Duration::from_millis(1);

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// `loom::model`, with room for 4,000 branches on one path rather than
/// 1,000, for models with many fires or schedules in a row.
fn model_long(f: impl Fn() + Sync + Send + 'static) {
    let mut model = loom::model::Builder::new();
    model.max_branches = 4_000;
    model.check(f);
}

/// A timeout whose task counts its runs.
fn counted(timer: &HashedWheelTimer, delay: Duration) -> (Timeout, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let t = timer
        .new_timeout(
            move |_: &Timeout| {
                counter.fetch_add(1, SeqCst);
            },
            delay,
        )
        .unwrap();
    (t, runs)
}

/// Cancel on one thread while the driving thread expires the same tick:
/// exactly one wins, and the count drops once.
#[test]
fn cancel_against_expire() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK);
        timer.advance(Duration::ZERO); // filed into its bucket
        let handle = t.clone();
        let canceller = thread::spawn(move || handle.cancel());
        timer.advance(TICK);
        let cancelled = canceller.join().unwrap();
        assert_eq!(
            runs.load(SeqCst) + cancelled as usize,
            1,
            "exactly one side wins"
        );
        assert_eq!(t.is_cancelled(), cancelled);
        assert_eq!(t.is_expired(), !cancelled);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// Cancel while the driving thread moves the entry from the queue into a
/// bucket: a cancelled entry never fires, and nothing is counted twice.
#[test]
fn cancel_against_transfer() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK * 2);
        let handle = t.clone();
        let canceller = thread::spawn(move || handle.cancel());
        timer.advance(Duration::ZERO); // the transfer, racing the cancel
        assert!(canceller.join().unwrap(), "nothing else could win yet");
        assert_eq!(timer.pending_timeouts(), 0);
        timer.advance(TICK * 4);
        assert_eq!(runs.load(SeqCst), 0, "a cancelled timeout never fires");
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A producer thread schedules while the driving thread drains and fires:
/// the timeout fires exactly once, never early, and the count ends at 0.
#[test]
fn new_timeout_against_drain() {
    loom::model(|| {
        let timer = manual();
        let producer = {
            let timer = timer.clone();
            thread::spawn(move || counted(&timer, TICK))
        };
        timer.advance(TICK);
        let (t, runs) = producer.join().unwrap();
        timer.advance(TICK * 2);
        assert_eq!(runs.load(SeqCst), 1);
        assert!(t.is_expired());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// `stop()` against `new_timeout`: an accepted timeout is returned by stop;
/// a refused one is counted nowhere.
#[test]
fn stop_against_new_timeout() {
    loom::model(|| {
        let timer = manual();
        let producer = {
            let timer = timer.clone();
            thread::spawn(move || timer.new_timeout(|_| {}, TICK))
        };
        let stopped = timer.stop().unwrap();
        match producer.join().unwrap() {
            Ok(t) => {
                assert_eq!(stopped, vec![t.clone()], "accepted, so stop returned it");
                assert!(t.is_stopped());
            }
            Err(e) => {
                assert_eq!(e, TimerError::Shutdown);
                assert!(stopped.is_empty());
            }
        }
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// Two threads cancel the same timeout while it fires: at most one cancel
/// wins, and only if the task never ran.
#[test]
fn two_cancels_against_expire() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK);
        timer.advance(Duration::ZERO);
        let cancellers: Vec<_> = (0..2)
            .map(|_| {
                let t = t.clone();
                thread::spawn(move || t.cancel() as usize)
            })
            .collect();
        timer.advance(TICK);
        let wins: usize = cancellers.into_iter().map(|c| c.join().unwrap()).sum();
        assert!(wins <= 1);
        assert_eq!(runs.load(SeqCst) + wins, 1);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A waker that counts its wake-ups.
#[derive(Default)]
struct Wakes(std::sync::atomic::AtomicUsize);

impl futures::task::ArcWake for Wakes {
    fn wake_by_ref(this: &Arc<Self>) {
        this.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<Wakes>, std::task::Waker) {
    let wakes = Arc::new(Wakes::default());
    (wakes.clone(), futures::task::waker(wakes))
}

/// A boxed `Sleep` of `delay`, polled once with `waker`: registered, pending.
fn registered_sleep(
    timer: &HashedWheelTimer,
    delay: Duration,
    waker: &std::task::Waker,
) -> std::pin::Pin<Box<hashed_wheel_timer::Sleep>> {
    use std::future::Future;
    let mut sleep = Box::pin(timer.sleep(delay));
    let polled = sleep
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker));
    assert!(polled.is_pending());
    sleep
}

/// A `Sleep` re-polled from another task (a new waker) while the driving
/// thread fires it: either that poll sees it ready, or the new waker is
/// woken. No wake-up is lost, and the old waker is not the one woken.
#[test]
fn sleep_repoll_with_new_waker_against_fire() {
    use std::future::Future;
    use std::task::{Context, Poll};

    loom::model(|| {
        let timer = manual();
        let mut sleep = timer.sleep(TICK);
        let (old, old_waker) = counting_waker();
        let first = std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&old_waker));
        assert!(first.is_pending(), "registered, not yet due");
        timer.advance(Duration::ZERO); // filed into its bucket

        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK))
        };
        let (new, new_waker) = counting_waker();
        let second = std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&new_waker));
        driver.join().unwrap();

        let (old_wakes, new_wakes) = (
            old.0.load(std::sync::atomic::Ordering::SeqCst),
            new.0.load(std::sync::atomic::Ordering::SeqCst),
        );
        match second {
            // Ready; the new waker may also have been woken once (a
            // harmless spurious wake-up), never more.
            Poll::Ready(()) => assert!(new_wakes <= 1),
            Poll::Pending => {
                assert_eq!(new_wakes, 1, "the new waker is woken exactly once");
                assert_eq!(old_wakes, 0, "not the old one");
                let third =
                    std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&new_waker));
                assert!(third.is_ready());
            }
        }
        assert!(old_wakes <= 1);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A waker whose wake-up a loom thread can wait for, as a task's poll
/// follows its wake-up (the model sees the order).
struct LoomWakes(AtomicUsize);

impl futures::task::ArcWake for LoomWakes {
    fn wake_by_ref(this: &Arc<Self>) {
        this.0.fetch_add(1, SeqCst);
    }
}

/// A `Sleep` reset a little later, which leaves its entry at the old
/// deadline, polled by its own task (the waker its entry holds, so a poll
/// may skip the entry) while the driving thread fires that entry: the poll
/// after the wake-up files a new entry, which wakes the task at the deadline.
#[test]
fn a_registered_sleeps_poll_against_an_early_fire() {
    use std::future::Future;
    use std::task::Context;

    loom::model(|| {
        let timer = manual();
        let mut sleep = timer.sleep(TICK * 2);
        let wakes = Arc::new(LoomWakes(AtomicUsize::new(0)));
        let waker = futures::task::waker(wakes.clone());
        let mut poll = || std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
        assert!(poll().is_pending() && poll().is_pending(), "registered");
        let entry_deadline = timer.now() + TICK * 2;
        sleep.reset(entry_deadline + TICK / 2); // within the entry's slack
        timer.advance(Duration::ZERO); // filed into its bucket

        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK * 2))
        };
        let mut poll = || std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
        assert!(poll().is_pending(), "its own deadline is ahead");
        while wakes.0.load(SeqCst) == 0 {
            thread::yield_now();
        }
        assert!(poll().is_pending());
        assert_eq!(
            timer.pending_timeouts(),
            1,
            "a new entry, filed by that poll"
        );
        driver.join().unwrap();
        timer.advance(TICK);
        assert_eq!(wakes.0.load(SeqCst), 2);
        assert!(poll().is_ready());
    });
}

/// A `Sleep` dropped on one thread while the driving thread drains its
/// lane, and a third stops the timer: the drop withdraws the entry from the
/// lane with no swap on the entry only if neither took it. Whoever ends it,
/// it is uncounted once and its waker dropped once, and the slot is
/// reused cleanly by the next sleep.
#[test]
fn a_dropped_sleep_against_drain_and_stop() {
    loom::model(|| {
        let timer = manual();
        let (wakes, waker) = counting_waker();
        let sleep = registered_sleep(&timer, TICK * 5, &waker);
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(Duration::ZERO))
        };
        let stopper = {
            let timer = timer.clone();
            thread::spawn(move || drop(timer.stop()))
        };
        drop(sleep);
        driver.join().unwrap();
        stopper.join().unwrap();
        assert_eq!(timer.pending_timeouts(), 0);
        drop(waker);
        assert_eq!(Arc::strong_count(&wakes), 1, "the stored waker was dropped");
    });
}

/// Dropped `Sleep`s wait in their thread's batch (two cells under loom): the
/// drop that fills it cancels both, while the driving thread's turn takes the
/// batches before it fires (as a count's reader does). Each entry ends once,
/// fired or cancelled; the count comes to 0; every stored waker is dropped.
#[test]
fn batched_cancels_against_a_turn() {
    loom::model(|| {
        let timer = manual();
        let (wakes, waker) = counting_waker();
        let mut sleeps: Vec<_> = (0..2)
            .map(|_| registered_sleep(&timer, TICK, &waker))
            .collect();
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK))
        };
        drop(sleeps.remove(0)); // waits in the batch
        drop(sleeps); // fills it
        driver.join().unwrap();
        let stats = timer.stats();
        assert_eq!((stats.fired + stats.cancelled, stats.pending), (2, 0));
        drop(waker);
        assert_eq!(
            Arc::strong_count(&wakes),
            1,
            "the stored wakers were dropped"
        );
    });
}

/// A periodic run ends while another thread cancels it: the runner puts the
/// task back as the canceller wins, and loom checks that the two never touch
/// the entry's task slot at once. The task never runs again.
#[test]
fn cancel_during_a_periodic_run_against_its_rearm() {
    loom::model(|| {
        let timer = manual();
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let t = timer
            .schedule_at_fixed_rate(
                move |_: &Timeout| {
                    counter.fetch_add(1, SeqCst);
                },
                TICK,
                TICK,
            )
            .unwrap();
        let handle = t.clone();
        let canceller = thread::spawn(move || handle.cancel());
        timer.advance(TICK);
        assert!(
            canceller.join().unwrap(),
            "a periodic task can always be cancelled"
        );
        let before = runs.load(SeqCst);
        timer.advance(TICK * 2);
        assert_eq!(runs.load(SeqCst), before, "no run after the cancel");
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A cancelled timeout's slot is freed while another timeout is scheduled:
/// the new one may reuse the slot, and must still fire exactly once while
/// the old one never does.
#[test]
fn slot_reuse_against_cancel_and_release() {
    loom::model(|| {
        let timer = manual();
        let (old, old_runs) = counted(&timer, TICK);
        let canceller = thread::spawn(move || {
            assert!(old.cancel());
        });
        timer.advance(Duration::ZERO); // frees the old slot if cancelled by now
        let (new, new_runs) = counted(&timer, TICK);
        canceller.join().unwrap();
        timer.advance(TICK);
        assert_eq!(old_runs.load(SeqCst), 0);
        assert_eq!(new_runs.load(SeqCst), 1);
        assert!(new.is_expired());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A cancel withdraws a timeout from its lane while the driving thread
/// drains that lane: exactly one of them takes the key, so the slot is
/// freed once. A second free would hand the slot to the next timeout while
/// the old handle still names it.
#[test]
fn withdraw_against_drain_frees_the_slot_once() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK);
        let handle = t.clone();
        let canceller = thread::spawn(move || handle.cancel());
        timer.advance(Duration::ZERO); // drains the lane, racing the withdrawal
        assert!(canceller.join().unwrap(), "nothing else could win yet");
        timer.advance(TICK); // frees it, if the drain took it first
        let (new, new_runs) = counted(&timer, TICK);
        timer.advance(TICK * 2);
        assert_eq!(new_runs.load(SeqCst), 1);
        assert!(new.is_expired());
        assert!(
            t.is_cancelled() && !t.is_expired(),
            "the old handle's entry"
        );
        assert_eq!(runs.load(SeqCst), 0);
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A lane's owner, making room in its ring, moves the ring's head past the
/// cells it finds empty while the worker drains the same ring. Every key
/// still queued is filed exactly once, the withdrawn one never, and the
/// ring keeps working after it wraps round.
#[test]
fn reclaim_against_drain_files_every_key_once() {
    loom::model(|| {
        let timer = manual();
        let (a, a_runs) = counted(&timer, TICK);
        assert!(a.cancel(), "withdrawn: its cell is empty");
        let worker = timer.clone();
        let drainer = thread::spawn(move || worker.advance(Duration::ZERO));
        // Half the ring: the owner reclaims the withdrawn cell.
        let (b, b_runs) = counted(&timer, TICK);
        let (c, c_runs) = counted(&timer, TICK);
        drainer.join().unwrap();
        let wrapped: Vec<_> = (0..3).map(|_| counted(&timer, TICK)).collect();
        timer.advance(TICK * 2);
        assert_eq!(a_runs.load(SeqCst), 0);
        for (t, runs) in [(b, b_runs), (c, c_runs)].into_iter().chain(wrapped) {
            assert_eq!(runs.load(SeqCst), 1);
            assert!(t.is_expired());
        }
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// Counts its drops: a task's payload.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A schedule racing `stop()` while the driving thread files the queue: a
/// timeout the shutdown takes back from its producer has its task dropped
/// there, never left in the slot for the driver to drop under the core
/// lock (`Slots::release_locked` asserts it under loom), and every task is
/// dropped exactly once.
#[test]
fn schedule_against_stop_and_filing_drops_no_task_under_the_core_lock() {
    loom::model(|| {
        let timer = manual();
        let drops = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (timer, payload) = (timer.clone(), DropCounter(drops.clone()));
            thread::spawn(move || timer.new_timeout(move |_| drop(payload), TICK).ok())
        };
        let stopper = {
            let timer = timer.clone();
            thread::spawn(move || timer.stop().unwrap())
        };
        timer.advance(Duration::ZERO); // files what is queued, if not stopped
        let accepted = producer.join().unwrap();
        let stopped = stopper.join().unwrap();
        assert_eq!(
            accepted.is_some(),
            stopped.len() == 1,
            "stop returned what was accepted"
        );
        assert_eq!(timer.pending_timeouts(), 0);
        drop((accepted, stopped, timer));
        assert_eq!(drops.load(SeqCst), 1, "the task was dropped once");
    });
}

/// `stop()` on one thread while another's `advance` fires a tick holding
/// two timeouts: a task that starts runs to its end, and every other one
/// is either run before the stop or returned by it, never both, never
/// neither; the count is 0 once `stop()` returns.
#[test]
fn stop_against_an_advance_firing_a_batch() {
    loom::model(|| {
        let timer = manual();
        let (a, a_runs) = counted(&timer, TICK);
        let (b, b_runs) = counted(&timer, TICK);
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK))
        };
        let stopped = timer.stop().unwrap();
        assert_eq!(timer.pending_timeouts(), 0, "counted when stop() returned");
        driver.join().unwrap();
        for (t, runs) in [(&a, &a_runs), (&b, &b_runs)] {
            let ran = runs.load(SeqCst);
            let returned = stopped.contains(t);
            assert_eq!(
                ran + usize::from(returned),
                1,
                "ran {ran}, returned {returned}"
            );
        }
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A periodic run handed to an executor, started (or not) and ending while
/// `stop()` runs: when `stop()` returns the task counts as pending no
/// more, and it ends stopped. Its first run either ran (at most once:
/// nothing is re-armed past the stop, though `stop()` returns the next
/// run if the first ended before it) or was taken back unstarted and
/// returned; never neither.
#[test]
fn a_periodic_run_on_an_executor_against_stop() {
    use hashed_wheel_timer::Job;
    loom::model(|| {
        let jobs = Arc::new(loom::sync::Mutex::new(Vec::<Job>::new()));
        let queue = jobs.clone();
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .executor(move |job: Job| queue.lock().unwrap().push(job))
            .build()
            .unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = runs.clone();
        let t = timer
            .schedule_at_fixed_rate(
                move |_: &Timeout| {
                    counter.fetch_add(1, SeqCst);
                },
                TICK,
                TICK,
            )
            .unwrap();
        timer.advance(TICK);
        let job = jobs
            .lock()
            .unwrap()
            .pop()
            .expect("the first run was handed off");
        let runner = thread::spawn(job);
        let stopped = timer.stop().unwrap();
        assert_eq!(timer.pending_timeouts(), 0, "counted when stop() returned");
        runner.join().unwrap();
        let (ran, returned) = (runs.load(SeqCst), stopped.len());
        assert!(ran <= 1 && returned <= 1, "ran {ran}, returned {returned}");
        assert!(ran == 1 || returned == 1, "neither ran nor returned");
        assert!(t.is_stopped());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A producer fills its ring (4 cells under loom), so files its own lane
/// under the driver's lock, frees a cell with a cancel and schedules once
/// more, while the driving thread drains the lane: equal deadlines still
/// fire in submission order, and none is lost.
#[test]
fn a_full_ring_keeps_submission_order_against_drain() {
    // Seven timeouts and their fires take more than loom's default 1,000
    // branches on one path (each fire also counts and notes its lateness).
    model_long(|| {
        let timer = manual();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let producer = {
            let (timer, order) = (timer.clone(), order.clone());
            thread::spawn(move || {
                let schedule = |n: usize| {
                    let order = order.clone();
                    let record = move |_: &Timeout| order.lock().unwrap().push(n);
                    timer.new_timeout(record, TICK).unwrap()
                };
                let first = schedule(0);
                (1..6).for_each(|n| drop(schedule(n)));
                assert!(first.cancel(), "not yet due");
                schedule(6)
            })
        };
        timer.advance(Duration::ZERO); // drains, racing the producer
        let last = producer.join().unwrap();
        timer.advance(TICK);
        assert!(last.is_expired());
        assert_eq!(*order.lock().unwrap(), (1..7).collect::<Vec<_>>());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A reset to a later deadline on one thread while the driving thread
/// expires the old deadline's tick: exactly one wins. If the reset won, the
/// timeout does not fire at the old tick but once at the new one; if it
/// lost, it fired at the old tick and the reset changed nothing.
#[test]
fn reset_later_against_expire() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK);
        timer.advance(Duration::ZERO); // filed into its bucket
        let handle = t.clone();
        let resetter = thread::spawn(move || handle.reset(TICK * 3));
        timer.advance(TICK);
        let at_old_tick = runs.load(SeqCst);
        let moved = resetter.join().unwrap();
        if moved {
            // It may have moved only after the tick fired: then it lost.
            assert_eq!(at_old_tick, 0, "a reset that won fired at the old tick");
        } else {
            assert_eq!(at_old_tick, 1, "a reset that lost left it to fire");
        }
        timer.advance(TICK * 5);
        assert_eq!(runs.load(SeqCst), 1, "exactly once");
        assert!(t.is_expired());
        assert_eq!(timer.pending_timeouts(), 0);
        let s = timer.stats();
        assert_eq!((s.scheduled, s.fired, s.pending), (1, 1, 0));
    });
}

/// A reset to an earlier deadline (queued for the driver to file again)
/// against a cancel on another thread, while the driving thread files:
/// the cancel wins (nothing else can), the timeout never fires, and it is
/// counted once.
#[test]
fn reset_earlier_against_cancel() {
    loom::model(|| {
        let timer = manual();
        let (t, runs) = counted(&timer, TICK * 100);
        timer.advance(TICK * 70); // filed: old enough
        let handle = t.clone();
        let resetter = thread::spawn(move || handle.reset(TICK));
        let canceller = {
            let handle = t.clone();
            thread::spawn(move || handle.cancel())
        };
        timer.advance(Duration::ZERO); // files what the reset moved
        resetter.join().unwrap();
        assert!(canceller.join().unwrap(), "nothing else could win");
        timer.advance(TICK * 200);
        assert_eq!(runs.load(SeqCst), 0, "a cancelled timeout never fires");
        assert!(t.is_cancelled());
        let s = timer.stats();
        assert_eq!((s.scheduled, s.cancelled, s.pending), (1, 1, 0));
    });
}

/// A `Sleep` reset earlier while its entry still waits in its lane, then
/// dropped while another thread drives the wheel and refiles what the
/// reset moved. The reset lends the driver a reference, so the drop must
/// not take the lane's shortcut (a withdraw that assumes only the `Sleep`
/// and the lane name the entry): every reference comes back once, and the
/// next sleep, which reuses the slot, fires once, on time.
#[test]
fn a_sleep_reset_earlier_then_dropped_against_its_refiling() {
    use std::future::Future;
    use std::task::Context;
    loom::model(|| {
        let timer = manual();
        let (_wakes, waker) = counting_waker();
        let mut sleep = Box::pin(timer.sleep(TICK * 500)); // held in its lane
        assert!(sleep
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        sleep.as_mut().reset(timer.now() + TICK * 2);
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(Duration::ZERO))
        };
        drop(sleep);
        let mut next = Box::pin(timer.sleep(TICK));
        assert!(next
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        driver.join().unwrap();
        timer.advance(TICK);
        assert!(next
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready());
        drop(next);
        timer.advance(TICK * 3);
        assert_eq!(timer.pending_timeouts(), 0);
        let s = timer.stats();
        assert_eq!((s.scheduled, s.cancelled, s.fired), (2, 1, 1));
    });
}

/// The driving thread drops the handle it ran a fired task with while
/// the user drops theirs, and the user's thread, whose drop freed the
/// slot, reuses it at once for a timeout it cancels before the driver
/// drains it. The driver's release, which was not the last, must not
/// free the reused slot: its reference is gone, and so is its say about
/// the slot. Freed twice, the slot would be handed to two timeouts.
#[test]
fn loom_models_a_release_that_was_not_the_last_never_frees_the_slot_reused_after_it() {
    // An advance that fires, two schedules, a cancel, and five
    // schedules after: more than loom's default 1,000 branches.
    model_long(|| {
        let timer = manual();
        let (first, runs) = counted(&timer, TICK);
        timer.advance(Duration::ZERO); // filed into its bucket
        let worker = timer.clone();
        let driver = thread::spawn(move || worker.advance(TICK));
        drop(first); // the last reference, if the driver dropped its own
        let second = timer.new_timeout(|_| {}, TICK * 10).unwrap();
        assert!(second.cancel(), "nothing else could win it");
        drop(second);
        driver.join().unwrap();
        assert_eq!(runs.load(SeqCst), 1);
        // This thread keeps a line's spare slots (4 under loom): a
        // fifth schedule refills from the shared list, where a slot
        // freed twice would be again.
        let later: Vec<Timeout> = (0..5)
            .map(|_| timer.new_timeout(|_| {}, TICK).unwrap())
            .collect();
        for (i, a) in later.iter().enumerate() {
            for b in &later[i + 1..] {
                assert!(a != b, "two pending timeouts share one slot");
            }
        }
    });
}

/// A delay queue's consumer turning the wheel at its poll (a manual or
/// tokio clock's, so that what is due comes out at that poll) against a
/// producer inserting an item already due and an `advance`: the item comes
/// out exactly once, at that poll or the next.
#[test]
fn a_consumer_turning_at_its_poll_against_a_producer_and_advance() {
    model_long(|| {
        let timer = manual();
        // The arena's first chunk made here, before the race.
        assert!(timer.new_timeout(|_| {}, TICK).unwrap().cancel());
        let queue = timer.delay_queue::<u8>();
        let poll_once = |queue: &hashed_wheel_timer::DelayQueue<u8>| {
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            match queue.poll_expired(&mut cx) {
                std::task::Poll::Ready(Some(e)) => Some(e.into_inner()),
                _ => None,
            }
        };
        let producer = {
            let queue = queue.clone();
            thread::spawn(move || queue.insert(7, Duration::ZERO).unwrap())
        };
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || poll_once(&queue))
        };
        timer.advance(Duration::ZERO);
        producer.join().unwrap();
        let first = consumer.join().unwrap();
        let second = poll_once(&queue);
        let out: Vec<u8> = first.into_iter().chain(second).collect();
        assert_eq!(out, [7], "exactly once, by the poll after the insert");
        assert!(queue.is_empty());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A delay queue's removals wait in their thread's batch (two cells under
/// loom), the second filling it and cancelling both, while the driving
/// thread's turn takes the batches before it fires. Each item comes back
/// from its `remove` and never out of the stream; each timeout ends once,
/// its reference handed from the removed slot to the batch, freed once.
#[test]
fn delay_queue_removals_batched_against_a_turn() {
    model_long(|| {
        let timer = manual();
        let queue = timer.delay_queue::<u8>();
        let keys = [
            queue.insert(1, TICK).unwrap(),
            queue.insert(2, TICK).unwrap(),
        ];
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK))
        };
        let removed: Vec<_> = keys.iter().map(|key| queue.remove(key)).collect();
        driver.join().unwrap();
        assert_eq!(removed, [Some(1), Some(2)]);
        let waker = futures::task::noop_waker();
        let polled = queue.poll_expired(&mut std::task::Context::from_waker(&waker));
        assert!(polled.is_pending(), "a removed item came out");
        let stats = timer.stats();
        assert_eq!((stats.fired + stats.cancelled, stats.pending), (2, 0));
    });
}

/// A `DelayMap`'s one key, due now, against a replacing `insert` on one
/// thread and a consumer's poll on another while this thread turns the
/// wheel. The map's shard lock decides: the old value comes back to the
/// inserter or out of the stream, never both, and the new value comes
/// out once, after its own deadline, never lost.
#[test]
fn a_delay_map_insert_replacing_a_key_against_its_expiry() {
    model_long(|| {
        let timer = manual();
        let map = timer.delay_map::<u8, u8>();
        map.insert(0, 1, TICK).unwrap();
        timer.advance(Duration::ZERO); // filed into its bucket
        let inserter = {
            let map = map.clone();
            thread::spawn(move || map.insert(0, 2, TICK * 3).unwrap())
        };
        let consumer = {
            let map = map.clone();
            thread::spawn(move || poll_map(&map))
        };
        timer.advance(TICK);
        let replaced = inserter.join().unwrap();
        let mut out: Vec<u8> = consumer.join().unwrap().into_iter().collect();
        out.extend(poll_map(&map));
        assert_eq!(replaced.is_some(), !out.contains(&1), "1 comes back once");
        assert!(!out.contains(&2), "2 is not due");
        timer.advance(TICK * 3);
        out.extend(poll_map(&map));
        out.extend(replaced);
        out.sort_unstable();
        assert_eq!(out, [1, 2], "each value once");
        assert!(map.is_empty());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// A `DelayMap`'s key, due now, removed on one thread while a consumer
/// polls on another and this thread turns the wheel: exactly one of them
/// gets the value.
#[test]
fn a_delay_map_remove_against_expiry() {
    model_long(|| {
        let timer = manual();
        let map = timer.delay_map::<u8, u8>();
        map.insert(0, 1, TICK).unwrap();
        timer.advance(Duration::ZERO);
        let remover = {
            let map = map.clone();
            thread::spawn(move || map.remove(&0))
        };
        let consumer = {
            let map = map.clone();
            thread::spawn(move || poll_map(&map))
        };
        timer.advance(TICK);
        let removed = remover.join().unwrap();
        let yielded = consumer.join().unwrap().or_else(|| poll_map(&map));
        assert_eq!(
            removed.is_some() as u8 + yielded.is_some() as u8,
            1,
            "exactly one gets it"
        );
        assert!(map.is_empty());
        assert_eq!(timer.pending_timeouts(), 0);
    });
}

/// One poll of a `DelayMap`'s stream: the value it yields, if any.
fn poll_map(map: &hashed_wheel_timer::DelayMap<u8, u8>) -> Option<u8> {
    let mut cx = std::task::Context::from_waker(futures::task::noop_waker_ref());
    match map.poll_expired(&mut cx) {
        std::task::Poll::Ready(Some((_, value))) => Some(value),
        _ => None,
    }
}
