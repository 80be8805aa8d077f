//! `Sleep`s: polls, resets and drops against the driving thread.

use super::*;

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

/// A `Sleep` polled by its own task (the waker its entry holds, so a poll may skip the entry)
/// while the driving thread fires the entry: whichever comes first, the task is woken once, never
/// early, and then ready.
#[test]
fn a_registered_sleeps_poll_against_its_fire() {
    use std::future::Future;
    use std::task::Context;

    loom::model(|| {
        let timer = manual();
        let mut sleep = timer.sleep(TICK * 2);
        let deadline = timer.now() + TICK * 2;
        let wakes = Arc::new(LoomWakes(AtomicUsize::new(0)));
        let waker = futures::task::waker(wakes.clone());
        let mut poll = || std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
        assert!(poll().is_pending() && poll().is_pending(), "registered");
        timer.advance(Duration::ZERO); // filed into its bucket
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK * 2))
        };
        if poll().is_ready() {
            assert!(timer.now() >= deadline, "never early");
        }
        driver.join().unwrap();
        assert_eq!(wakes.0.load(SeqCst), 1, "woken once, by the fire");
        assert!(poll().is_ready());
    });
}

/// A `Sleep` reset a little later (the reset moves its entry, as tokio's) while the driving thread
/// reaches the old deadline: the reset moves the entry first, or the fire wakes the task and the
/// poll after files a new entry. Either way it is ready at the new deadline, never before.
#[test]
fn a_sleeps_later_reset_against_the_fire_at_its_old_deadline() {
    use std::future::Future;
    use std::task::Context;

    loom::model(|| {
        let timer = manual();
        let mut sleep = timer.sleep(TICK * 2);
        let wakes = Arc::new(LoomWakes(AtomicUsize::new(0)));
        let waker = futures::task::waker(wakes.clone());
        let mut poll = || std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
        assert!(poll().is_pending() && poll().is_pending(), "registered");
        timer.advance(Duration::ZERO); // filed into its bucket
        let deadline = timer.now() + TICK * 2 + TICK / 2;
        let driver = {
            let timer = timer.clone();
            thread::spawn(move || timer.advance(TICK * 2))
        };
        sleep.reset(deadline);
        let mut poll = || std::pin::Pin::new(&mut sleep).poll(&mut Context::from_waker(&waker));
        assert!(poll().is_pending(), "its deadline is ahead");
        driver.join().unwrap();
        assert!(poll().is_pending(), "still ahead");
        timer.advance(TICK);
        assert!(
            (1..=2).contains(&wakes.0.load(SeqCst)),
            "woken at the new deadline"
        );
        assert!(poll().is_ready());
        assert_eq!(timer.pending_timeouts(), 0);
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

/// At the limit (2), a dropped `Sleep`'s cancel waits in its thread's batch while another thread
/// drops one and registers another: a callback scheduled after the first drop returned is never
/// refused, as the threads hold one `Sleep` at most then, though the place the first batch freed
/// may go to the other thread's new `Sleep` before the refused call tries again.
#[test]
fn a_callback_after_a_dropped_sleep_at_the_limit_is_not_refused_under_churn() {
    model_long(|| {
        let timer = HashedWheelTimer::builder()
            .manual_clock()
            .max_pending_timeouts(2)
            .build()
            .unwrap();
        let waker = futures::task::noop_waker();
        let dropper = {
            let (timer, waker) = (timer.clone(), waker.clone());
            thread::spawn(move || drop(registered_sleep(&timer, TICK, &waker)))
        };
        let churner = {
            let (timer, waker) = (timer.clone(), waker.clone());
            thread::spawn(move || {
                drop(registered_sleep(&timer, TICK, &waker));
                drop(registered_sleep(&timer, TICK, &waker));
            })
        };
        dropper.join().unwrap();
        let made = timer.new_timeout(|_| {}, TICK);
        assert!(made.is_ok(), "{made:?}");
        churner.join().unwrap();
    });
}
