//! Timeouts with callbacks: cancels, stops, resets and periodic runs against the driving thread.

use super::*;

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
/// lock (`Shared::release_locked` asserts it under loom), and every task is
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
