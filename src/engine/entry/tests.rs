//! Unit tests of the entry state machine and its task slot.

use super::*;
use crate::engine::entry::task::{Every, Notice};
use std::any::Any;
use std::sync::Arc;

fn new_entry(deadline: Nanos, task: Task) -> Entry {
    let entry = Entry::vacant();
    entry.occupy(deadline, task, 1);
    entry
}

fn entry() -> Entry {
    new_entry(0, Task::callback(|_: &crate::Timeout| {}))
}

fn periodic() -> Entry {
    new_entry(0, Task::periodic(|_: &dyn Any| {}, Every::Rate(10)))
}

/// A waker's task of its own type (so its waker's vtable), counting its wakes: `N + 1` each.
struct Count<const N: usize>(std::sync::atomic::AtomicUsize);

impl<const N: usize> std::task::Wake for Count<N> {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(N + 1, Ordering::SeqCst);
    }
}

/// A periodic entry in the middle of a run.
fn running() -> Entry {
    let e = periodic();
    assert_eq!(e.fire_due(u64::MAX), Fire::Won);
    e
}

#[test]
fn one_shot_fire_cancel_stop_and_reset_exclude_each_other() {
    let e = entry();
    assert_eq!(e.fire_due(u64::MAX), Fire::Won);
    assert!(e.is_expired() && !e.is_pending());
    assert_eq!(e.try_cancel(), None);
    assert_eq!(e.fire_due(u64::MAX), Fire::Lost);

    let e = entry();
    assert_eq!(e.try_cancel(), Some(CancelOutcome::Waiting));
    assert_eq!(e.fire_due(u64::MAX), Fire::Lost);
    assert_eq!(e.try_cancel(), None);

    let e = entry();
    assert!(e.try_stop());
    assert_eq!(e.fire_due(u64::MAX), Fire::Lost);
    assert_eq!(e.try_cancel(), Some(CancelOutcome::Stopped));
    assert_eq!(e.try_cancel(), None);

    // A reset moves the deadline in force, and races the fire.
    let e = new_entry(100, Task::Wake(None));
    assert_eq!(e.try_reset(300), Some(100));
    assert_eq!(e.deadline(), 300);
    assert_eq!(e.fire_due(200), Fire::Later, "due where it is filed only");
    assert_eq!(e.fire_due(300), Fire::Won);
    assert_eq!(e.try_reset(400), None, "spent");
    assert_eq!(e.deadline(), 300, "kept once expired");

    let e = new_entry(100, Task::Wake(None));
    assert_eq!(e.try_reset(500), Some(100));
    assert_eq!(e.fire_due(150), Fire::Later, "the reset won");
    assert!(e.try_cancel().is_some());
    assert_eq!(e.fire_due(u64::MAX), Fire::Lost);
    assert_eq!(e.deadline(), 500, "a cancel keeps the deadline");

    let e = new_entry(u64::MAX - 1, Task::Wake(None));
    assert_eq!(e.deadline(), NEVER);
    assert_eq!(e.fire_due(NEVER - 1), Fire::Later);
    let e = new_entry(NEVER - 1, Task::Wake(None));
    assert_eq!(e.deadline(), NEVER - 1, "the latest kept as it is");
}

#[test]
fn a_periodic_entry_runs_and_rearms_until_cancelled() {
    let e = periodic();
    assert!(e.is_periodic());
    for _ in 0..3 {
        assert_eq!(e.fire_due(u64::MAX), Fire::Won);
        assert!(!e.is_waiting() && e.is_pending() && !e.is_expired());
        assert_eq!(e.fire_due(u64::MAX), Fire::Lost, "never two runs at once");
        assert!(!e.try_stop(), "stop() does not collect a running entry");
        assert!(e.try_rearm(10));
        assert!(e.is_waiting());
    }
    assert!(!e.try_rearm(10), "only a running entry re-arms");
    // The next run's time saturates: a period too large to add never fires again.
    assert_eq!(Every::Rate(u64::MAX).next_due(1, 1), u64::MAX);
    assert_eq!(Every::Delay(2).next_due(0, u64::MAX - 1), u64::MAX);
}

#[test]
fn a_run_or_a_fired_entry_ends_once_cancelled_panicking_or_stopped() {
    let e = running();
    assert_eq!(e.try_cancel(), Some(CancelOutcome::Running));
    assert_eq!(e.try_cancel(), None);
    assert!(!e.try_rearm(10));
    assert!(e.is_cancelled() && !e.is_pending());
    assert_eq!(e.fire_due(u64::MAX), Fire::Lost);
    assert_eq!(e.try_stop_fired(), None, "cancel won");
    // Cancelled during the run that then panicked: stays cancelled.
    assert!(!e.try_end_panicked());
    assert!(e.is_cancelled() && e.is_panicked());

    let e = running();
    assert!(e.try_end_panicked());
    assert!(e.is_expired() && e.is_panicked() && !e.is_pending());
    assert_eq!(e.try_cancel(), None, "nothing left to cancel");
    assert_eq!(e.fire_due(u64::MAX), Fire::Lost);
    assert!(!e.try_rearm(10) && !e.try_stop());

    // Stopped after it fired: once.
    let e = running();
    assert_eq!(e.try_stop_fired(), Some(true), "running: uncount");
    assert!(e.is_stopped());
    assert_eq!(e.try_stop_fired(), None);

    // A one-shot that fired (and panicked) stays expired until stopped.
    let e = entry();
    assert_eq!(e.fire_due(u64::MAX), Fire::Won);
    e.mark_panicked();
    assert!(e.is_expired() && e.is_panicked());
    assert_eq!(e.try_stop_fired(), Some(false), "expired: uncounted");
    assert!(e.is_stopped());
}

#[test]
fn the_task_slot_holds_each_kind_frees_it_and_survives_a_panic() {
    let e = entry();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        e.with_task(|slot| {
            assert!(slot.is_some());
            panic!("inside the lock")
        })
    }));
    assert!(caught.is_err());
    assert!(
        matches!(e.take_task(), Some(Task::Callback(_))),
        "the task is back, and the lock was released"
    );
    assert!(e.take_task().is_none());

    let e = new_entry(0, Task::Wake(None));
    assert!(matches!(e.take_task(), Some(Task::Wake(None))));
    e.put_task(Task::periodic(|_: &dyn Any| {}, Every::Rate(10)));
    assert!(matches!(e.vacate(), Some(Task::Periodic(_))));
    assert!(e.vacate().is_none());

    // A notice and a waker come back whole; a waker goes with a dropped entry.
    let noop = Arc::new(Count::<0>(Default::default()));
    e.put_task(Task::Notice(Notice::new(3, 7)));
    assert!(matches!(e.take_task(), Some(Task::Notice(n)) if n.parts() == (3, 7)));
    e.put_task(Task::Wake(Some(Waker::from(noop.clone()))));
    assert!(e.with_task(|slot| matches!(slot, Some(Task::Wake(Some(_))))));
    drop(e);
    assert_eq!(Arc::strong_count(&noop), 1, "not leaked");
}

/// At its limit a reference count aborts, as `Arc`'s does, rather than wrap: in a child process.
#[test]
#[cfg(unix)]
#[cfg_attr(miri, ignore = "Miri runs no child process")]
fn retain_past_the_limit_aborts_rather_than_wraps() {
    if std::env::var_os("HWT_RETAIN_PAST_THE_LIMIT").is_some() {
        let e = entry();
        e.refs.store(MAX_REFS, Ordering::Relaxed);
        e.retain();
        unreachable!("retained past the limit");
    }
    let name = "engine::entry::tests::retain_past_the_limit_aborts_rather_than_wraps";
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    let status = child
        .args(["--exact", name])
        .env("HWT_RETAIN_PAST_THE_LIMIT", "1")
        .output();
    use std::os::unix::process::ExitStatusExt;
    let signal = status.unwrap().status.signal();
    assert_eq!(signal, Some(6), "the child did not die of SIGABRT");
}

/// The lock, the task's kind, the flags and the filed tick share `word`: each writer's
/// read-modify-write leaves the others' bits as they were.
#[test]
fn the_words_parts_are_written_apart() {
    const AT: u64 = 3 << 24; // a current tick whose low 24 bits are 0
    let e = periodic();
    e.set_filed(AT + 5);
    assert_eq!(e.filed_tick(AT), AT + 5, "from current on");
    assert_eq!(e.filed_tick(AT + 5), AT + 5, "current itself");
    assert_eq!(
        e.filed_tick(AT + 6),
        AT + 5 + (1 << 24),
        "TICKS_AHEAD past it"
    );
    assert!(e.in_wheel() && e.is_periodic());
    let task = e.with_task(|slot| {
        assert!(e.word.load(Ordering::Relaxed) & TASK_LOCKED != 0);
        e.mark_panicked(); // another writer, under the lock
        slot.take()
    });
    assert!(matches!(task, Some(Task::Periodic(_))));
    assert_eq!(kind_in(e.word.load(Ordering::Relaxed)), NONE);
    e.put_task(Task::Wake(None));
    assert!(matches!(e.take_task(), Some(Task::Wake(None))));
    let flags_kept = e.is_panicked() && e.is_periodic() && e.in_wheel();
    assert!(
        flags_kept && e.filed_tick(AT) == AT + 5,
        "flags and tick kept"
    );
    e.set_out_of_wheel();
    assert!(!e.in_wheel() && e.is_panicked() && e.filed_tick(AT) == AT + 5);
    assert_eq!(e.word.load(Ordering::Relaxed) & TASK_LOCKED, 0);
}

/// A waker comes back whole from the slot, its vtable kept by its place in a table or, once the
/// table is full, with it in a box: wakers of 12 vtables (more than the table holds), stored from
/// 12 threads at once, each wake their own task, and each clone is dropped once.
#[test]
fn wakers_of_many_vtables_come_back_whole() {
    fn check<const N: usize>() {
        let count = Arc::new(Count::<N>(Default::default()));
        let waker = Waker::from(count.clone());
        let e = new_entry(0, Task::Wake(None));
        for _ in 0..2 {
            assert!(e.wait_with(&waker));
            assert_eq!(Arc::strong_count(&count), 3, "stored once: will_wake");
        }
        let Some(Task::Wake(Some(stored))) = e.take_task() else {
            panic!("the waker comes back")
        };
        stored.wake();
        assert_eq!(count.0.load(Ordering::SeqCst), N + 1, "its own task woken");
        drop((e, waker));
        assert_eq!(Arc::strong_count(&count), 1, "each clone dropped once");
    }
    #[rustfmt::skip]
    let checks: [fn(); 12] = [check::<0>, check::<1>, check::<2>, check::<3>, check::<4>,
        check::<5>, check::<6>, check::<7>, check::<8>, check::<9>, check::<10>, check::<11>];
    std::thread::scope(|s| {
        checks
            .map(|check| s.spawn(check))
            .map(|t| t.join().unwrap())
    });
}
