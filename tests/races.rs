//! Invariant 2 with real threads: fire and cancel never both win.

use hashed_wheel_timer::HashedWheelTimer;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

const ITERATIONS: usize = 20_000;

/// A worker thread fires while another thread cancels. For each timeout
/// exactly one side wins, and after `stop()` joins the worker the callback
/// has run exactly for the timeouts whose cancel lost.
#[test]
fn cancel_against_the_worker_firing() {
    let timer = HashedWheelTimer::builder()
        .tick_duration(Duration::from_micros(100))
        .build()
        .unwrap();
    let ran: Arc<Vec<AtomicBool>> =
        Arc::new((0..ITERATIONS).map(|_| AtomicBool::new(false)).collect());
    let twice = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(ITERATIONS);
    for i in 0..ITERATIONS {
        let (ran, twice) = (ran.clone(), twice.clone());
        let t = timer
            .new_timeout(
                move |_| {
                    if ran[i].swap(true, Ordering::SeqCst) {
                        twice.fetch_add(1, Ordering::SeqCst);
                    }
                },
                Duration::from_micros((i % 7) as u64 * 50),
            )
            .unwrap();
        handles.push(t);
        // Cancel in bursts, racing the worker's expiry of the same tick.
        if i % 64 == 63 {
            let batch: Vec<_> = handles[i - 63..=i].to_vec();
            let cancelled: Vec<bool> = thread::scope(|s| {
                let spin = s.spawn(|| {
                    for _ in 0..(i * 7919 % 100_000) {
                        std::hint::spin_loop();
                    }
                    batch.iter().map(|t| t.cancel()).collect::<Vec<_>>()
                });
                spin.join().unwrap()
            });
            for (t, won) in batch.iter().zip(cancelled) {
                assert_eq!(won, t.is_cancelled());
            }
        }
    }
    // Let everything that was not cancelled fire, then join the worker.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while timer.pending_timeouts() > 0 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        timer.pending_timeouts(),
        0,
        "everything fired or was cancelled"
    );
    assert!(timer.stop().unwrap().is_empty());
    let (mut fired, mut cancelled) = (0, 0);
    for (i, t) in handles.iter().enumerate() {
        let did_run = ran[i].load(Ordering::SeqCst);
        assert_ne!(
            did_run,
            t.is_cancelled(),
            "timeout {i}: exactly one of fire and cancel wins"
        );
        assert_eq!(did_run, t.is_expired());
        if did_run {
            fired += 1
        } else {
            cancelled += 1
        }
    }
    assert_eq!(twice.load(Ordering::SeqCst), 0, "nothing fired twice");
    eprintln!("fired {fired}, cancelled {cancelled}");
}

/// Several threads race to cancel the same timeouts while the worker fires
/// them: at most one `cancel()` returns true, and only if it never ran.
#[test]
fn many_cancellers_at_most_one_wins() {
    let timer = HashedWheelTimer::builder()
        .tick_duration(Duration::from_micros(100))
        .build()
        .unwrap();
    let rounds = 2_000;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut wins_total = 0;
    for round in 0..rounds {
        let counter = runs.clone();
        let t = timer
            .new_timeout(
                move |_| {
                    counter.fetch_add(1, Ordering::SeqCst);
                },
                Duration::from_micros((round % 3) as u64 * 100),
            )
            .unwrap();
        let barrier = Arc::new(Barrier::new(3));
        let wins: usize = thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|_| {
                    let (t, barrier) = (t.clone(), barrier.clone());
                    s.spawn(move || {
                        barrier.wait();
                        t.cancel() as usize
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert!(wins <= 1, "round {round}: {wins} cancels won");
        wins_total += wins;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while timer.pending_timeouts() > 0 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    timer.stop().unwrap();
    assert_eq!(
        runs.load(Ordering::SeqCst) + wins_total,
        rounds,
        "each timeout ended exactly one way"
    );
}

/// Producers on several threads while the worker runs: nothing lost, and
/// the count ends at zero.
#[test]
fn producers_from_many_threads_lose_nothing() {
    let timer = HashedWheelTimer::new();
    let fired = Arc::new(AtomicUsize::new(0));
    let per_thread = 20_000;
    thread::scope(|s| {
        for _ in 0..4 {
            let (timer, fired) = (timer.clone(), fired.clone());
            s.spawn(move || {
                for i in 0..per_thread {
                    let fired = fired.clone();
                    timer
                        .new_timeout(
                            move |_| {
                                fired.fetch_add(1, Ordering::Relaxed);
                            },
                            Duration::from_millis(i as u64 % 20),
                        )
                        .unwrap();
                }
            });
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while fired.load(Ordering::SeqCst) < 4 * per_thread && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(fired.load(Ordering::SeqCst), 4 * per_thread);
    assert_eq!(timer.pending_timeouts(), 0);
}

/// `stop()` racing producers: every accepted timeout either fires or is
/// returned by stop; every refused one is counted nowhere.
#[test]
fn stop_against_new_timeout_loses_nothing() {
    for _ in 0..50 {
        let timer = HashedWheelTimer::new();
        let fired = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let stopped = thread::scope(|s| {
            for _ in 0..2 {
                let (timer, fired, accepted) = (timer.clone(), fired.clone(), accepted.clone());
                s.spawn(move || {
                    for i in 0..2_000u64 {
                        let fired = fired.clone();
                        let r = timer.new_timeout(
                            move |_| {
                                fired.fetch_add(1, Ordering::SeqCst);
                            },
                            Duration::from_micros(i % 3 * 500),
                        );
                        match r {
                            Ok(_) => accepted.fetch_add(1, Ordering::SeqCst),
                            Err(e) => {
                                assert!(e.is_shutdown());
                                break;
                            }
                        };
                    }
                });
            }
            thread::sleep(Duration::from_micros(300));
            timer.stop().unwrap()
        });
        assert!(stopped.iter().all(|t| t.is_stopped()));
        assert_eq!(
            fired.load(Ordering::SeqCst) + stopped.len(),
            accepted.load(Ordering::SeqCst),
            "every accepted timeout fired or came back from stop"
        );
        assert_eq!(timer.pending_timeouts(), 0);
    }
}

/// A thread resets timeouts, later and earlier, while the worker fires
/// them. Each fires exactly once, and the worker keeps running: a batch it
/// fires is sorted by deadlines that the resets move meanwhile, and a sort
/// whose keys moved under it once panicked the worker (about one run in
/// two caught it; hence several).
#[test]
fn resets_against_the_worker_firing() {
    for seed in 0..8 {
        resets_against_firing(seed);
    }
}

fn resets_against_firing(seed: u64) {
    const TIMEOUTS: usize = 2_000;
    let timer = HashedWheelTimer::builder()
        .tick_duration(Duration::from_micros(100))
        .build()
        .unwrap();
    let runs: Arc<Vec<AtomicUsize>> =
        Arc::new((0..TIMEOUTS).map(|_| AtomicUsize::new(0)).collect());
    let handles: Vec<_> = (0..TIMEOUTS)
        .map(|i| {
            let runs = runs.clone();
            let delay = Duration::from_micros(200 + (i % 50) as u64 * 20);
            timer
                .new_timeout(
                    move |_| {
                        runs[i].fetch_add(1, Ordering::SeqCst);
                    },
                    delay,
                )
                .unwrap()
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    for _ in 0..20_000 {
        let t = &handles[rng.usize(0..TIMEOUTS)];
        t.reset(Duration::from_micros(rng.u64(0..1_500)));
    }
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    timer
        .new_timeout(
            move |_| flag.store(true, Ordering::SeqCst),
            Duration::from_millis(5),
        )
        .unwrap();
    for _ in 0..300 {
        if done.load(Ordering::SeqCst) && timer.pending_timeouts() == 0 {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    assert!(
        done.load(Ordering::SeqCst),
        "the worker stopped firing (seed {seed})"
    );
    for (i, runs) in runs.iter().enumerate() {
        assert_eq!(runs.load(Ordering::SeqCst), 1, "timeout {i} (seed {seed})");
    }
    let s = timer.stats();
    let all = TIMEOUTS as u64 + 1;
    assert_eq!((s.scheduled, s.fired, s.pending), (all, all, 0));
}
