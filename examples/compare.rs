//! Side by side, in one run: this crate against `tokio::time`, tokio-util's
//! `DelayQueue`, futures-timer and async-io's `Timer`.
//!
//!     cargo run --release --example compare --features tower
//!
//! The first row is the RPC pattern (`support/rpc.rs`): timeouts
//! cancelled 1-60 ms after they are made, as whole-process CPU per timeout
//! less a harness that makes none (the median of five runs). This crate's
//! `DelayQueue` is there shared by both threads, and tokio-util's one per
//! thread (its owner polls it) and behind a `Mutex`, as code that shares
//! one between threads must hold it. The back-to-back rows after it cancel
//! at once, before the worker sees the timeout; then come the delay
//! queues back to back (`support/queue.rs`) and the tower timeout layers
//! (`support/tower_overhead.rs`).
//!
//!     cargo run --release --example compare --features tower -- --rpc 'tokio::time'
//!
//! runs one peer's RPC row alone (add `--alone` to skip the harness's run,
//! for a whole-process timer). The second row is the idle-connection
//! pattern (`support/idle.rs`): a timeout reset on every message, as CPU
//! per message; `--idle PEER` runs one peer's alone.
//!
//! A peer's sleep counts as scheduled once it has been created and polled
//! once, since tokio and async-io register on first poll. Each scenario is
//! run five times and the best run is kept, to damp a noisy machine (the
//! median for the sleeps' lateness, which varies more between runs than
//! between timers); the peers take turns within each round, so a slow
//! spell hits them alike.
//! Memory is measured in a child process per peer, so one peer's freed
//! memory does not flatter the next.

#[path = "support/idle.rs"]
mod idle;
#[path = "support/proc.rs"]
mod proc;
#[path = "support/queue.rs"]
mod queue;
#[path = "support/rpc.rs"]
mod rpc;
#[path = "support/tower_overhead.rs"]
mod tower_overhead;

use futures::FutureExt;
use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::hint::black_box;
use std::time::{Duration, Instant};

const OPS: usize = 1_000_000;
const PENDING: usize = 1_000_000;
const FAR: Duration = Duration::from_secs(60);
const RUNS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(peer) = args
        .iter()
        .position(|a| a == "--memory-of")
        .map(|i| &args[i + 1])
    {
        println!("{}", bytes_per_pending(peer));
        return;
    }
    // One peer's RPC or idle row alone, e.g. under `perf`: a run each of
    // the harness and the peer, CPU ns per timeout (or message). With
    // `--alone`, the peer's run only, for a whole-process timer to measure.
    let alone = args.iter().any(|a| a == "--alone");
    let rows: [SoloRow; 2] = [
        (
            "--rpc",
            rpc::harness_cpu,
            rpc::cpu_ns_per_timeout,
            "timeout",
        ),
        (
            "--idle",
            idle::harness_cpu,
            idle::cpu_ns_per_message,
            "message",
        ),
    ];
    for (flag, harness_cpu, ns_per, unit) in rows {
        if let Some(peer) = args.iter().position(|a| a == flag).map(|i| &args[i + 1]) {
            let harness = if alone { 0.0 } else { harness_cpu() };
            let ns = ns_per(peer, harness);
            println!("{ns:.0} ns per {unit} (harness {harness:.3} s CPU)");
            return;
        }
    }
    let mut table = Table::default();

    let rpc = "RPC pattern, 2 threads x 125k/s, 99 % cancelled 1-60 ms later: CPU per timeout (ns, whole process less harness, median of 5)";
    let rpc_peers = [
        "tokio::time",
        "hashed-wheel-timer",
        "hashed-wheel-timer Sleep",
        rpc::QUEUE,
        rpc::OWNED,
        rpc::SHARED,
        "futures-timer",
        "async-io Timer",
    ];
    let mut rpc_runs: Vec<Vec<f64>> = vec![Vec::new(); rpc_peers.len()];
    for _ in 0..RUNS {
        let harness = rpc::harness_cpu();
        for (peer, runs) in rpc_peers.iter().zip(&mut rpc_runs) {
            runs.push(rpc::cpu_ns_per_timeout(peer, harness));
        }
    }
    for (peer, mut runs) in rpc_peers.into_iter().zip(rpc_runs) {
        runs.sort_by(f64::total_cmp);
        table.add(rpc, peer, runs[runs.len() / 2]);
    }

    let resets = "idle connections, 2 threads x 125k messages/s, each resets its 200 ms timeout: CPU per message (ns, whole process less harness, median of 5)";
    let mut idle_runs: Vec<Vec<f64>> = vec![Vec::new(); idle::PEERS.len()];
    for _ in 0..RUNS {
        let harness = idle::harness_cpu();
        for (peer, runs) in idle::PEERS.iter().zip(&mut idle_runs) {
            runs.push(idle::cpu_ns_per_message(peer, harness));
        }
    }
    for (peer, mut runs) in idle::PEERS.into_iter().zip(idle_runs) {
        runs.sort_by(f64::total_cmp);
        table.add(resets, peer, runs[runs.len() / 2]);
    }

    for (title, threads, reset) in [
        ("DelayQueue insert + remove, 1 thread, one owner: CPU per item (ns, whole process, median of 5)", 1, false),
        ("DelayQueue insert + remove, 2 threads, one shared queue (tokio-util's in a Mutex): CPU per item (ns, whole process, median of 5)", 2, false),
        ("DelayQueue insert + reset + remove, 1 thread, one owner: CPU per item (ns, whole process, median of 5)", 1, true),
        ("DelayQueue insert + reset + remove, 2 threads, one shared queue: CPU per item (ns, whole process, median of 5)", 2, true),
    ] {
        for (peer, ns) in median_interleaved(&queue::PEERS, |peer| {
            Some(queue::cpu_ns_per_item(peer, threads, reset))
        }) {
            table.add(title, peer, ns);
        }
    }
    for (title, yields) in [
        ("timeout layer around a service that answers at once: CPU per call over the bare service (ns, whole process, median of 5)", false),
        ("timeout layer around a service that answers after a yield: CPU per call over the bare service (ns, whole process, median of 5)", true),
    ] {
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); tower_overhead::PEERS.len()];
        for _ in 0..RUNS {
            let bare = tower_overhead::cpu_ns_per_call("bare", yields);
            for (peer, runs) in tower_overhead::PEERS.iter().zip(&mut runs) {
                runs.push(tower_overhead::cpu_ns_per_call(peer, yields) - bare);
            }
        }
        for (peer, mut runs) in tower_overhead::PEERS.into_iter().zip(runs) {
            runs.sort_by(f64::total_cmp);
            table.add(title, peer, runs[runs.len() / 2]);
        }
    }

    let one = "schedule+cancel, 1 thread (ns/op)";
    for (peer, ns) in best_interleaved(&PEERS, |peer| schedule_cancel(peer, 1)) {
        table.add(one, peer, ns);
    }
    let two = "schedule+cancel, 2 threads (ns/op, wall)";
    for (peer, ns) in best_interleaved(&PEERS, |peer| schedule_cancel(peer, 2)) {
        table.add(two, peer, ns);
    }
    let mem = "bytes per pending timeout (1M pending, handles kept)";
    for peer in PEERS.iter().chain([&rpc::QUEUE, &HOURS_AWAY]) {
        if let Some(bytes) = memory_in_child(peer) {
            table.add(mem, peer, bytes);
        }
    }
    let ready = "timeout around a ready future (ns/op)";
    let both = ["tokio::time", "hashed-wheel-timer"];
    for (peer, ns) in best_interleaved(&both, |peer| Some(timeout_ready(peer))) {
        table.add(ready, peer, ns);
    }
    let burst = "100k callbacks due within 50 ms: p99 lateness (ms)";
    if let Some(ms) = best_of(|| Some(callback_burst_p99_ms())) {
        table.add(burst, "hashed-wheel-timer", ms);
    }
    let sleeps = "100k tasks sleep 50 ms, 2-worker runtime: p99 lateness (ms, median of 5)";
    for (peer, ms) in median_interleaved(&both, |peer| Some(sleep_lateness_p99_ms(peer))) {
        table.add(sleeps, peer, ms);
    }

    table.print();
}

/// A row `--rpc` or `--idle` runs alone: its flag, the harness's CPU, the
/// peer's CPU per operation given the harness's, and what an operation is.
type SoloRow = (
    &'static str,
    fn() -> f64,
    fn(&str, f64) -> f64,
    &'static str,
);

/// This crate's `new_timeout` 10 hours away, past the 24 bits of ticks an entry keeps (memory only).
const HOURS_AWAY: &str = "hashed-wheel-timer, 10 h away";

const PEERS: [&str; 6] = [
    "tokio::time",
    "hashed-wheel-timer",
    "hashed-wheel-timer Sleep",
    "tokio-util DelayQueue",
    "futures-timer",
    "async-io Timer",
];

fn best_of(mut f: impl FnMut() -> Option<f64>) -> Option<f64> {
    (0..RUNS).filter_map(|_| f()).reduce(f64::min)
}

/// The best of `RUNS` runs per peer, the peers taking turns within each
/// round, so that a slow spell of the machine falls on all of them alike
/// rather than on whichever peer it happened to catch.
fn best_interleaved(
    peers: &[&'static str],
    f: impl FnMut(&str) -> Option<f64>,
) -> Vec<(&'static str, f64)> {
    let runs = interleaved(peers, f);
    let best = |values: Vec<f64>| values.into_iter().reduce(f64::min);
    runs.into_iter()
        .filter_map(|(peer, values)| Some((peer, best(values)?)))
        .collect()
}

/// As `best_interleaved`, keeping the median run: for a lateness that
/// varies from run to run far more than between the peers.
fn median_interleaved(
    peers: &[&'static str],
    f: impl FnMut(&str) -> Option<f64>,
) -> Vec<(&'static str, f64)> {
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let runs = interleaved(peers, f);
    runs.into_iter()
        .filter_map(|(peer, values)| Some((peer, median(values)?)))
        .collect()
}

/// `RUNS` rounds, each running every peer once, in turn.
fn interleaved(
    peers: &[&'static str],
    mut f: impl FnMut(&str) -> Option<f64>,
) -> Vec<(&'static str, Vec<f64>)> {
    let mut runs: Vec<(&'static str, Vec<f64>)> = peers.iter().map(|&p| (p, Vec::new())).collect();
    for _ in 0..RUNS {
        for (peer, values) in &mut runs {
            values.extend(f(peer));
        }
    }
    runs
}

/// Wall-clock nanoseconds per schedule+cancel, `threads` producers.
fn schedule_cancel(peer: &str, threads: usize) -> Option<f64> {
    let per_thread = OPS / threads;
    let timer = HashedWheelTimer::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_time()
        .build()
        .unwrap();
    if peer == "tokio-util DelayQueue" && threads > 1 {
        return None; // a DelayQueue has one owner
    }
    let run = |_: usize| {
        let _rt = rt.enter();
        match peer {
            "hashed-wheel-timer" => {
                for _ in 0..per_thread {
                    let t = timer.new_timeout(|_: &Timeout| {}, FAR).unwrap();
                    black_box(t.cancel());
                }
            }
            "hashed-wheel-timer Sleep" => {
                for _ in 0..per_thread {
                    black_box(timer.sleep(FAR).now_or_never());
                }
            }
            "tokio::time" => {
                for _ in 0..per_thread {
                    black_box(tokio::time::sleep(FAR).now_or_never());
                }
            }
            "tokio-util DelayQueue" => {
                let mut queue = tokio_util::time::DelayQueue::new();
                for _ in 0..per_thread {
                    let key = queue.insert((), FAR);
                    black_box(queue.remove(&key));
                }
            }
            "futures-timer" => {
                for _ in 0..per_thread {
                    black_box(futures_timer::Delay::new(FAR).now_or_never());
                }
            }
            "async-io Timer" => {
                for _ in 0..per_thread {
                    black_box(async_io::Timer::after(FAR).now_or_never());
                }
            }
            _ => unreachable!(),
        }
    };
    let start = Instant::now();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|i| s.spawn(move || run(i))).collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
    Some(start.elapsed().as_nanos() as f64 / (per_thread * threads) as f64)
}

/// Nanoseconds per `timeout` around a future that is ready at once.
fn timeout_ready(peer: &str) -> f64 {
    let rt = current_thread_runtime();
    let _rt = rt.enter();
    let timer = HashedWheelTimer::new();
    let start = Instant::now();
    for i in 0..OPS {
        let ready = std::future::ready(i);
        match peer {
            "tokio::time" => black_box(tokio::time::timeout(FAR, ready).now_or_never()).is_some(),
            _ => black_box(timer.timeout(FAR, ready).now_or_never()).is_some(),
        };
    }
    start.elapsed().as_nanos() as f64 / OPS as f64
}

/// 100k tasks on a 2-worker runtime each sleep 50 ms; p99 of how late each
/// resumed after its deadline.
fn sleep_lateness_p99_ms(peer: &str) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let timer = HashedWheelTimer::new();
    let tasks: Vec<_> = (0..100_000)
        .map(|_| {
            let timer = timer.clone();
            let tokio_style = peer == "tokio::time";
            rt.spawn(async move {
                let deadline = Instant::now() + Duration::from_millis(50);
                if tokio_style {
                    tokio::time::sleep_until(deadline.into()).await;
                } else {
                    timer.sleep_until(deadline).await;
                }
                Instant::now().saturating_duration_since(deadline)
            })
        })
        .collect();
    let mut late: Vec<Duration> = rt.block_on(async {
        let mut late = Vec::with_capacity(tasks.len());
        for t in tasks {
            late.push(t.await.unwrap());
        }
        late
    });
    late.sort();
    late[late.len() * 99 / 100].as_secs_f64() * 1e3
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn memory_in_child(peer: &str) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new(exe)
        .args(["--memory-of", peer])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// `PENDING` futures, each polled once so that it registers, kept pending.
fn polled_once<F: std::future::Future + Unpin>(make: impl Fn() -> F) -> Vec<F> {
    (0..PENDING)
        .map(|_| {
            let mut future = make();
            black_box((&mut future).now_or_never());
            future
        })
        .collect()
}

/// RSS growth per pending timeout, with what a user keeps to cancel it.
fn bytes_per_pending(peer: &str) -> f64 {
    let rt = current_thread_runtime();
    let _rt = rt.enter();
    let timer = HashedWheelTimer::new();
    timer.new_timeout(|_| {}, Duration::ZERO).unwrap(); // start the worker
    std::thread::sleep(Duration::from_millis(50));
    let before = proc::rss_bytes();
    let kept: Box<dyn std::any::Any> = match peer {
        "hashed-wheel-timer" | HOURS_AWAY => {
            let far = if peer == HOURS_AWAY { FAR * 600 } else { FAR };
            let v: Vec<Timeout> = (0..PENDING)
                .map(|_| timer.new_timeout(|_| {}, far).unwrap())
                .collect();
            std::thread::sleep(Duration::from_millis(500)); // filed into buckets
            Box::new(v)
        }
        "hashed-wheel-timer Sleep" => {
            let v = polled_once(|| timer.sleep(FAR));
            std::thread::sleep(Duration::from_millis(500)); // filed into buckets
            Box::new(v)
        }
        "tokio::time" => Box::new(polled_once(|| Box::pin(tokio::time::sleep(FAR)))),
        "tokio-util DelayQueue" => {
            let mut queue = tokio_util::time::DelayQueue::new();
            let keys: Vec<_> = (0..PENDING).map(|_| queue.insert((), FAR)).collect();
            Box::new((queue, keys))
        }
        rpc::QUEUE => {
            let queue = timer.delay_queue();
            let keys: Vec<_> = (0..PENDING)
                .map(|_| queue.insert((), FAR).unwrap())
                .collect();
            std::thread::sleep(Duration::from_millis(500)); // filed into buckets
            Box::new((queue, keys))
        }
        "futures-timer" => Box::new(polled_once(|| futures_timer::Delay::new(FAR))),
        "async-io Timer" => Box::new(polled_once(|| async_io::Timer::after(FAR))),
        _ => unreachable!(),
    };
    let grown = proc::rss_bytes().saturating_sub(before);
    drop(kept);
    grown as f64 / PENDING as f64
}

/// 100k callbacks with deadlines spread over 50 ms, scheduled at once;
/// p99 of how late each ran.
fn callback_burst_p99_ms() -> f64 {
    let timer = HashedWheelTimer::new();
    let n = 100_000;
    let (tx, rx) = std::sync::mpsc::channel::<Duration>();
    let start = Instant::now() + Duration::from_millis(100);
    for i in 0..n {
        let tx = tx.clone();
        let at = start + Duration::from_micros(50_000 * i as u64 / n as u64);
        timer
            .new_timeout(
                move |t: &Timeout| {
                    let _ = tx.send(Instant::now().saturating_duration_since(t.deadline()));
                },
                at - Instant::now(),
            )
            .unwrap();
    }
    drop(tx);
    let mut late: Vec<Duration> = rx.iter().collect();
    late.sort();
    late[late.len() * 99 / 100].as_secs_f64() * 1e3
}

#[derive(Default)]
struct Table {
    rows: Vec<(&'static str, &'static str, f64)>,
}

impl Table {
    fn add(&mut self, scenario: &'static str, peer: &'static str, value: f64) {
        self.rows.push((scenario, peer, value));
    }

    fn print(&self) {
        println!("| scenario | timer | value | vs tokio::time |");
        println!("|---|---|---:|---:|");
        for &(scenario, peer, value) in &self.rows {
            let tokio = self
                .rows
                .iter()
                .find(|r| r.0 == scenario && r.1 == "tokio::time")
                .map(|r| r.2);
            // Every value here is lower-is-better: the ratio is how many
            // times better than tokio (>1 is better).
            let ratio = tokio.map_or("".to_owned(), |t| format!("{:.2}x", t / value));
            println!("| {scenario} | {peer} | {value:.1} | {ratio} |");
        }
    }
}
