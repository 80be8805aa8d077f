//! Soak: millions of timeouts on the real clock from 2 threads, random
//! delays 0-2 s, 90 % cancelled at random moments (some racing expiry).
//! Checks that nothing fires early or twice and that every timeout ends
//! exactly one way; prints RSS every 10 s (it must stay flat).
//!
//!     cargo run --release --example soak                         # 10M, ~4 min
//!     cargo run --release --example soak -- --timeouts 200000 --rate 100000
//!
//! Exits non-zero if any check fails.

#[path = "support/proc.rs"]
mod proc;

use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const THREADS: usize = 2;
const MAX_DELAY_MS: u64 = 2_000;
const CANCEL_SHARE: f64 = 0.9;

struct Args {
    timeouts: usize,
    rate: f64,
    report_every: Duration,
}

fn parse_args() -> Args {
    let mut args = Args {
        timeouts: 10_000_000,
        rate: 40_000.0,
        report_every: Duration::from_secs(10),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        match pair[0].as_str() {
            "--timeouts" => args.timeouts = value.parse().expect("--timeouts N"),
            "--rate" => args.rate = value.parse().expect("--rate PER_SECOND"),
            "--report-secs" => {
                args.report_every = Duration::from_secs(value.parse().expect("--report-secs N"))
            }
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

struct Ledger {
    /// Per timeout: how many times its task ran.
    runs: Vec<AtomicU8>,
    early: AtomicUsize,
    cancelled: AtomicUsize,
    scheduled: AtomicUsize,
}

fn main() {
    let args = parse_args();
    let timer = HashedWheelTimer::builder()
        .thread_name("soak-timer")
        .build()
        .unwrap();
    let ledger = Arc::new(Ledger {
        runs: (0..args.timeouts).map(|_| AtomicU8::new(0)).collect(),
        early: AtomicUsize::new(0),
        cancelled: AtomicUsize::new(0),
        scheduled: AtomicUsize::new(0),
    });
    // Touch every page of the ledger now, so the RSS curve shows the timer.
    ledger
        .runs
        .iter()
        .for_each(|r| r.store(0, Ordering::Relaxed));
    println!(
        "soak: {} timeouts from {THREADS} threads at {} /s, delays 0-{MAX_DELAY_MS} ms, {:.0}% cancelled",
        args.timeouts,
        args.rate,
        CANCEL_SHARE * 100.0
    );
    let start = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (timer, ledger, done) = (timer.clone(), ledger.clone(), done.clone());
        let every = args.report_every;
        thread::spawn(move || {
            let mut next = start + every;
            let mut rss = vec![];
            while !done.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(50));
                if Instant::now() >= next {
                    next += every;
                    let mib = proc::rss_bytes() as f64 / (1 << 20) as f64;
                    rss.push(mib);
                    println!(
                        "  [{:>6.1}s] RSS {mib:>7.1} MiB  scheduled {:>9}  cancelled {:>9}  pending {:>7}",
                        start.elapsed().as_secs_f64(),
                        ledger.scheduled.load(Ordering::Relaxed),
                        ledger.cancelled.load(Ordering::Relaxed),
                        timer.pending_timeouts()
                    );
                }
            }
            rss
        })
    };

    let per_thread = args.timeouts / THREADS;
    let producers: Vec<_> = (0..THREADS)
        .map(|i| {
            let (timer, ledger) = (timer.clone(), ledger.clone());
            let rate = args.rate / THREADS as f64;
            let first = i * per_thread;
            let count = if i + 1 == THREADS {
                args.timeouts - first
            } else {
                per_thread
            };
            thread::spawn(move || produce(&timer, &ledger, first, count, rate, i as u64))
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    // Stop while the last ones are still pending, so `stop()` is exercised.
    let stopped = timer.stop().unwrap();
    done.store(true, Ordering::SeqCst);
    let rss = monitor.join().unwrap();

    let fired_once = ledger
        .runs
        .iter()
        .filter(|r| r.load(Ordering::SeqCst) == 1)
        .count();
    let fired_twice = ledger
        .runs
        .iter()
        .filter(|r| r.load(Ordering::SeqCst) > 1)
        .count();
    let scheduled = ledger.scheduled.load(Ordering::SeqCst);
    let cancelled = ledger.cancelled.load(Ordering::SeqCst);
    let early = ledger.early.load(Ordering::SeqCst);
    let accounted = fired_once + fired_twice + cancelled + stopped.len();
    println!("results after {:.1} s:", start.elapsed().as_secs_f64());
    println!("  scheduled                 {scheduled}");
    println!("  fired                     {}", fired_once + fired_twice);
    println!("  cancelled (cancel won)    {cancelled}");
    println!("  returned by stop          {}", stopped.len());
    println!("  fired + cancelled + stop  {accounted}");
    println!("  fired early               {early}");
    println!("  fired twice               {fired_twice}");
    if let (Some(lo), Some(hi)) = (
        rss.iter().skip(1).cloned().reduce(f64::min),
        rss.iter().skip(1).cloned().reduce(f64::max),
    ) {
        println!("  RSS after warm-up         {lo:.1} - {hi:.1} MiB");
    }
    let ok = early == 0 && fired_twice == 0 && accounted == scheduled && scheduled == args.timeouts;
    println!("{}", if ok { "soak: OK" } else { "soak: FAILED" });
    if !ok {
        std::process::exit(1);
    }
}

fn produce(
    timer: &HashedWheelTimer,
    ledger: &Arc<Ledger>,
    first: usize,
    count: usize,
    rate: f64,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let start = Instant::now();
    let mut cancels: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut handles: std::collections::HashMap<usize, Timeout> = Default::default();
    let run_cancels =
        |cancels: &mut BinaryHeap<Reverse<(Instant, usize)>>,
         handles: &mut std::collections::HashMap<usize, Timeout>| {
            let now = Instant::now();
            while let Some(&Reverse((at, id))) = cancels.peek() {
                if at > now {
                    break;
                }
                cancels.pop();
                if let Some(t) = handles.remove(&id) {
                    if t.cancel() {
                        ledger.cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        };
    for n in 0..count {
        let due = start + Duration::from_secs_f64(n as f64 / rate);
        while Instant::now() < due {
            run_cancels(&mut cancels, &mut handles);
            thread::sleep(Duration::from_micros(500));
        }
        let id = first + n;
        let delay = Duration::from_micros(rng.u64(0..=MAX_DELAY_MS * 1000));
        let task = {
            let ledger = ledger.clone();
            move |t: &Timeout| {
                if Instant::now() < t.deadline() {
                    ledger.early.fetch_add(1, Ordering::Relaxed);
                }
                ledger.runs[id].fetch_add(1, Ordering::SeqCst);
            }
        };
        let t = timer.new_timeout(task, delay).unwrap();
        ledger.scheduled.fetch_add(1, Ordering::Relaxed);
        if rng.f64() < CANCEL_SHARE {
            // Anywhere from now to a bit past the deadline: some cancels
            // race the expiry and lose.
            let at = Instant::now() + delay.mul_f64(rng.f64() * 1.1);
            cancels.push(Reverse((at, id)));
            handles.insert(id, t);
        }
    }
    while !cancels.is_empty() {
        run_cancels(&mut cancels, &mut handles);
        thread::sleep(Duration::from_millis(1));
    }
}
