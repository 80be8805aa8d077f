//! Timeouts made from many threads at once, and from a thread on its way
//! out: each thread queues on a lane of its own, up to 256 live threads,
//! and on a shared queue past them or once its lane index is given back.
//! Whatever the way in, none is lost.

use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

#[test]
#[cfg_attr(miri, ignore = "260 threads: too slow under Miri")]
fn many_threads_at_once_lose_no_timeout() {
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let threads = 260; // past the 256 lanes
    let barrier = std::sync::Barrier::new(threads);
    let ts: Vec<Timeout> = std::thread::scope(|s| {
        let spawned: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let t = timer.new_timeout(|_| {}, MS);
                    barrier.wait(); // all alive at once
                    t.unwrap()
                })
            })
            .collect();
        spawned.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(timer.pending_timeouts(), threads);
    timer.advance(MS);
    assert!(ts.iter().all(Timeout::is_expired), "none lost");
}

#[cfg(target_os = "linux")] // thread-locals are destroyed last to first
#[test]
fn a_timeout_made_in_a_thread_local_destructor_fires() {
    use std::cell::RefCell;
    use std::sync::{Arc, Mutex};
    type Out = Arc<Mutex<Option<Timeout>>>;
    struct Late(HashedWheelTimer, Out);
    impl Drop for Late {
        fn drop(&mut self) {
            let t = self.0.new_timeout(|_| {}, Duration::from_secs(1));
            *self.1.lock().unwrap() = t.ok();
        }
    }
    thread_local! {
        static LATE: RefCell<Option<Late>> = const { RefCell::new(None) };
    }
    let timer = HashedWheelTimer::builder().manual_clock().build().unwrap();
    let out = Out::default();
    let (t, o) = (timer.clone(), out.clone());
    std::thread::spawn(move || {
        // Set first, so destroyed after the thread gave its lane back.
        LATE.with(|late| *late.borrow_mut() = Some(Late(t.clone(), o)));
        for _ in 0..2 {
            drop(t.new_timeout(|_| {}, Duration::from_secs(1)).unwrap());
        }
    })
    .join()
    .unwrap();
    let late = out.lock().unwrap().take().expect("made in the destructor");
    assert_eq!(timer.pending_timeouts(), 3, "two from the thread, one late");
    timer.advance(Duration::from_secs(1));
    assert!(late.is_expired());
    assert_eq!(timer.pending_timeouts(), 0);
}
