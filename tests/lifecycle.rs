//! Invariant 6 and the worker's life: started lazily, asleep when idle,
//! joined and emptied when the last handle drops.
#![cfg(target_os = "linux")]

use hashed_wheel_timer::HashedWheelTimer;
use std::sync::Arc;
use std::time::Duration;

/// Thread ids in this process whose name is `name`.
fn threads_named(name: &str) -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            found.push(task.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

/// Voluntary context switches of thread `tid`: one per wake-up from park.
fn wakeups(tid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits (up to a minute) until `n` threads carry `name`: a new thread sets
/// its own name, and a joined one leaves /proc a moment after `join`.
fn wait_for_threads(name: &str, n: usize) -> bool {
    for _ in 0..6000 {
        if threads_named(name).len() == n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Waits until thread `tid` is blocked (state `S`), i.e. parked.
fn wait_parked(tid: &str) {
    for _ in 0..6000 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        if state == "S" {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the worker never parked");
}

/// Once thread `tid` has parked, checks that it stays asleep for 300 ms;
/// returns its wake-up count.
fn assert_no_wakeups_for_a_while(tid: &str, when: &str) -> u64 {
    wait_parked(tid);
    let before = wakeups(tid);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(wakeups(tid), before, "no wake-ups {when}");
    before
}

fn timer_named(name: &str) -> HashedWheelTimer {
    HashedWheelTimer::builder()
        .thread_name(name)
        .build()
        .unwrap()
}

#[test]
fn the_worker_starts_with_the_first_timeout_and_ends_with_the_last_handle() {
    let name = "hwt-lazy";
    let timer = timer_named(name);
    let clone = timer.clone();
    assert!(
        threads_named(name).is_empty(),
        "an unused timer has no thread"
    );
    timer
        .new_timeout(|_| {}, Duration::from_secs(3600))
        .unwrap();
    assert!(
        wait_for_threads(name, 1),
        "the first timeout started the worker"
    );
    drop(timer);
    assert_eq!(threads_named(name).len(), 1, "a clone still holds it");
    drop(clone);
    assert!(
        wait_for_threads(name, 0),
        "dropping the last handle ended the worker"
    );
}

#[test]
fn dropping_the_last_handle_frees_every_pending_task() {
    let timer = timer_named("hwt-free");
    let guard = Arc::new(());
    let handles: Vec<_> = (0..1000)
        .map(|i| {
            let g = guard.clone();
            timer
                .new_timeout(move |_| drop(g), Duration::from_secs(60 + i))
                .unwrap()
        })
        .collect();
    assert_eq!(Arc::strong_count(&guard), 1001);
    drop(timer);
    assert_eq!(
        Arc::strong_count(&guard),
        1,
        "every task was dropped with the timer"
    );
    assert!(handles
        .iter()
        .all(|t| t.is_stopped() && t.take_task().is_none()));
}

#[test]
fn dropping_the_last_handle_inside_its_own_task_does_not_deadlock() {
    let name = "hwt-selfdrop";
    let timer = timer_named(name);
    let (tx, rx) = std::sync::mpsc::channel();
    let last = timer.clone();
    timer
        .new_timeout(
            move |_| {
                drop(last); // the last handle, dropped on the worker thread
                tx.send(()).unwrap();
            },
            Duration::from_millis(1),
        )
        .unwrap();
    drop(timer);
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the task ran and returned");
    assert!(
        wait_for_threads(name, 0),
        "the worker exits once the task returns"
    );
}

#[test]
fn an_idle_worker_makes_no_wakeups() {
    let name = "hwt-idle";
    let timer = timer_named(name);
    let (tx, rx) = std::sync::mpsc::channel();
    timer
        .new_timeout(move |_| tx.send(()).unwrap(), Duration::ZERO)
        .unwrap();
    rx.recv().unwrap();
    assert!(wait_for_threads(name, 1));
    let tid = threads_named(name).pop().unwrap();

    // Nothing pending: parked for good.
    assert_no_wakeups_for_a_while(&tid, "while nothing is pending");

    // A timeout far away: one sleep to it, no ticking in between, once
    // the worker filed it (it waits in its lane until it is 64-96 ms old).
    let t = timer.new_timeout(|_| {}, Duration::from_secs(600)).unwrap();
    std::thread::sleep(Duration::from_secs(1)); // 10x the hold
    let before = assert_no_wakeups_for_a_while(&tid, "while waiting 600 s away");

    // A later timeout costs no unpark either.
    timer.new_timeout(|_| {}, Duration::from_secs(900)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        wakeups(&tid),
        before,
        "a later deadline does not wake the worker"
    );
    assert!(t.cancel());
}

#[test]
fn a_cancelled_timeout_is_removed_while_the_worker_sleeps() {
    let timer = timer_named("hwt-cancel");
    let guard = Arc::new(());
    let far = timer.new_timeout(|_| {}, Duration::from_secs(600)).unwrap();
    let g = guard.clone();
    let t = timer
        .new_timeout(move |_| drop(g), Duration::from_secs(300))
        .unwrap();
    // The task is freed by the cancelling thread at once.
    assert!(t.cancel());
    assert_eq!(Arc::strong_count(&guard), 1);
    assert_eq!(timer.pending_timeouts(), 1);
    assert!(far.cancel());
}

/// A producer that cancels every timeout young keeps the worker nearly
/// asleep: a wake-up for the first, then one per hold (64 ms) to look at
/// what its lane holds. A slower run is allowed more.
#[test]
fn a_producer_cancelling_young_timeouts_rarely_wakes_the_worker() {
    let timer = HashedWheelTimer::new();
    let ops = 500_000;
    let start = std::time::Instant::now();
    for _ in 0..ops {
        let t = timer.new_timeout(|_| {}, Duration::from_secs(60)).unwrap();
        t.cancel();
    }
    let holds = start.elapsed().as_millis() / 64;
    let wakeups = timer.stats().worker_wakeups;
    assert!(
        u128::from(wakeups) < 2 * holds + 20,
        "{wakeups} wake-ups for {ops} timeouts in {holds} holds"
    );
}
