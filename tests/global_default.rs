//! `set_global_default`: the timer the free functions use on every thread
//! without a `set_default` of its own. The global is the process's, so
//! these tests have a binary of their own and take turns (`TURN`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use hashed_wheel_timer::{
    current_timer, default_timer, set_default, set_global_default, HashedWheelTimer, Timeout,
};

static TURN: Mutex<()> = Mutex::new(());

fn turn() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn manual() -> HashedWheelTimer {
    HashedWheelTimer::builder().manual_clock().build().unwrap()
}

/// `current_timer()` as another thread sees it.
fn current_elsewhere() -> HashedWheelTimer {
    thread::spawn(current_timer).join().unwrap()
}

#[test]
fn every_thread_without_its_own_default_uses_the_global_one() {
    let _turn = turn();
    let global = manual();
    drop(set_global_default(global.clone()));
    assert!(current_timer().is_same(&global));
    assert!(current_elsewhere().is_same(&global));

    // The free functions schedule on it, from any thread.
    let fired = Arc::new(Mutex::new(false));
    let flag = fired.clone();
    thread::spawn(move || {
        hashed_wheel_timer::new_timeout(
            move |_: &Timeout| *flag.lock().unwrap() = true,
            Duration::from_millis(5),
        )
        .unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(global.pending_timeouts(), 1);
    global.advance(Duration::from_millis(4));
    assert!(!*fired.lock().unwrap(), "never early");
    global.advance(Duration::from_millis(2));
    assert!(*fired.lock().unwrap());

    // A thread's own default comes first.
    let own = manual();
    let _guard = set_default(own.clone());
    assert!(current_timer().is_same(&own));
    assert!(current_elsewhere().is_same(&global));
    drop(global.stop());
}

#[test]
fn a_new_global_default_replaces_the_old_on_threads_that_used_it() {
    let _turn = turn();
    let first = manual();
    drop(set_global_default(first.clone()));
    assert!(
        current_timer().is_same(&first),
        "this thread has seen the first"
    );
    let second = manual();
    let replaced = set_global_default(second.clone()).expect("the first was set");
    assert!(replaced.is_same(&first));
    assert!(current_timer().is_same(&second));
    assert!(current_elsewhere().is_same(&second));
    drop(first.stop());
    drop(second.stop());
}

#[test]
fn a_stopped_global_default_gives_way_to_the_process_wide_timer() {
    let _turn = turn();
    let global = manual();
    drop(set_global_default(global.clone()));
    assert!(current_timer().is_same(&global));
    assert!(global.stop().unwrap().is_empty());
    assert!(current_timer().is_same(default_timer()));
    assert!(current_elsewhere().is_same(default_timer()));
    // And a sleep made now is not cut short by the stopped timer.
    let start = Instant::now();
    futures::executor::block_on(hashed_wheel_timer::sleep(Duration::from_millis(20)));
    assert!(start.elapsed() >= Duration::from_millis(20));
}

#[test]
fn a_tokio_clock_global_default_serves_a_multi_thread_runtime_until_it_ends() {
    let _turn = turn();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = runtime.block_on(async {
        let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
        drop(set_global_default(timer.clone()));
        timer
    });
    let answered = runtime.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                tokio::spawn(async move {
                    assert!(current_timer().is_same(&current_timer()));
                    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                    if i % 2 == 0 {
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            let _ = tx.send(());
                        });
                    } else {
                        std::mem::forget(tx); // never answered: times out
                    }
                    // The answered calls have a minute: with 50 ms, an answer held off the CPU
                    // that long came after the deadline fired (counted fired, though `Ok`).
                    let deadline = Duration::from_millis(if i % 2 == 0 { 60_000 } else { 50 });
                    hashed_wheel_timer::timeout(deadline, rx).await.is_ok()
                })
            })
            .collect();
        let mut answered = 0;
        for task in tasks {
            answered += usize::from(task.await.unwrap());
        }
        answered
    });
    assert_eq!(answered, 4);
    let stats = timer.stats();
    assert_eq!(
        (stats.scheduled, stats.fired),
        (8, 4),
        "all on the global timer"
    );
    drop(runtime); // shuts the timer down
    assert!(timer.is_shutdown());
    assert!(current_timer().is_same(default_timer()));
}
