//! A realistic RPC-client load: 1,000,000 request timeouts scheduled from 2
//! threads, 99 % cancelled when their (simulated) response arrives, the
//! rest left to fire. Prints counts, lateness percentiles, throughput and
//! peak pending.
//!
//!     cargo run --release --example demo            # paced, 250k requests/s
//!     cargo run --release --example demo -- --burst # as fast as 2 threads go
//!
//! Paced is the realistic case: an RPC client's threads spend their time on
//! I/O, not on the timer. `--burst` pins both cores with producers, so on a
//! 2-core machine the worker competes with them for CPU and lateness shows
//! that, not the wheel.

#[path = "support/proc.rs"]
mod proc;

use hashed_wheel_timer::{HashedWheelTimer, Timeout};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const REQUESTS: usize = 1_000_000;
const THREADS: usize = 2;
/// Share of requests whose response arrives before the timeout.
const ANSWERED: f64 = 0.99;
/// Request timeouts are spread over this range.
const TIMEOUT_MS: std::ops::Range<u64> = 200..1_000;
/// Responses arrive this long after the request.
const RESPONSE_MS: std::ops::Range<u64> = 1..60;
/// Requests per second over all threads, unless `--burst`.
const PACED_RATE: f64 = 250_000.0;

#[derive(Default)]
struct Stats {
    scheduled: AtomicUsize,
    cancelled: AtomicUsize,
    fired: AtomicUsize,
    early: AtomicUsize,
    lateness_us: Mutex<Vec<u64>>,
}

fn main() {
    let timer = HashedWheelTimer::builder()
        .thread_name("demo-timer")
        .build()
        .expect("valid settings");
    let stats = Arc::new(Stats::default());
    let rate = if std::env::args().any(|a| a == "--burst") {
        None
    } else {
        Some(PACED_RATE / THREADS as f64)
    };
    println!(
        "demo: {REQUESTS} RPC timeouts from {THREADS} threads ({}), {:.0}% answered in \
         {RESPONSE_MS:?} ms, timeouts {TIMEOUT_MS:?} ms, tick {:?}",
        rate.map_or("burst: as fast as they go".to_owned(), |_| format!(
            "{PACED_RATE} requests/s"
        )),
        ANSWERED * 100.0,
        timer.tick_duration()
    );

    let start = Instant::now();
    let sending = Arc::new(AtomicBool::new(true));
    let monitor = spawn_monitor(timer.clone(), stats.clone(), sending.clone(), start);
    let producers: Vec<_> = (0..THREADS)
        .map(|i| {
            let (timer, stats) = (timer.clone(), stats.clone());
            thread::spawn(move || simulate_client(i as u64, rate, &timer, &stats))
        })
        .collect();
    for p in producers {
        p.join().expect("producer");
    }
    let send_elapsed = start.elapsed();
    sending.store(false, Ordering::SeqCst);

    // Wait for the unanswered requests to time out.
    while stats.fired.load(Ordering::SeqCst) + stats.cancelled.load(Ordering::SeqCst) < REQUESTS {
        thread::sleep(Duration::from_millis(100));
        if start.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let peak = monitor.join().expect("monitor");
    report(&timer, &stats, send_elapsed, start.elapsed(), peak);
    if let Some(tid) = proc::thread_id("demo-timer") {
        if let Some(cpu) = proc::thread_cpu(&tid) {
            println!(
                "  worker CPU time     {:.3} s ({:.0} ns per timeout)",
                cpu.as_secs_f64(),
                cpu.as_nanos() as f64 / REQUESTS as f64
            );
        }
        if let Some(wakeups) = proc::thread_wakeups(&tid) {
            println!("  worker wake-ups     {wakeups}");
        }
    }
    // The timer's own counters: they must agree with the demo's.
    let s = timer.stats();
    println!("timer.stats():");
    println!(
        "  scheduled {}  fired {}  cancelled {}  stopped {}  pending {}",
        s.scheduled, s.fired, s.cancelled, s.stopped, s.pending
    );
    println!(
        "  worker wake-ups {}  worst lateness {:.3} ms  queued for filing {}",
        s.worker_wakeups,
        s.max_lateness.as_secs_f64() * 1e3,
        s.queued
    );
    let adds_up = s.scheduled == s.fired + s.cancelled + s.stopped + s.pending as u64;
    println!("  scheduled = fired + cancelled + stopped + pending: {adds_up}");
}

/// One client thread: sends its share of requests at `rate` per second (or
/// as fast as it can); each gets a timeout, and a response (which cancels
/// it) for 99 % of them.
fn simulate_client(seed: u64, rate: Option<f64>, timer: &HashedWheelTimer, stats: &Arc<Stats>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let start = Instant::now();
    let mut responses: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
    let mut in_flight: Vec<Option<Timeout>> = Vec::with_capacity(REQUESTS / THREADS);
    for i in 0..REQUESTS / THREADS {
        if let Some(rate) = rate {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            while Instant::now() < due {
                deliver_responses(&mut responses, &mut in_flight, stats, Instant::now());
                thread::sleep(Duration::from_micros(200));
            }
        }
        let delay = Duration::from_millis(rng.u64(TIMEOUT_MS));
        let on_timeout = {
            let stats = stats.clone();
            move |t: &Timeout| {
                let now = Instant::now();
                if now < t.deadline() {
                    stats.early.fetch_add(1, Ordering::Relaxed);
                }
                let late = now.saturating_duration_since(t.deadline());
                stats
                    .lateness_us
                    .lock()
                    .unwrap()
                    .push(late.as_micros() as u64);
                stats.fired.fetch_add(1, Ordering::Relaxed);
            }
        };
        let t = timer.new_timeout(on_timeout, delay).expect("scheduled");
        stats.scheduled.fetch_add(1, Ordering::Relaxed);
        in_flight.push(Some(t));
        if rng.f64() < ANSWERED {
            let at = Instant::now() + Duration::from_millis(rng.u64(RESPONSE_MS));
            responses.push(Reverse((at, i)));
        }
        if i % 64 == 0 {
            deliver_responses(&mut responses, &mut in_flight, stats, Instant::now());
        }
    }
    while !responses.is_empty() {
        deliver_responses(&mut responses, &mut in_flight, stats, Instant::now());
        thread::sleep(Duration::from_millis(1));
    }
}

fn deliver_responses(
    responses: &mut BinaryHeap<Reverse<(Instant, usize)>>,
    in_flight: &mut [Option<Timeout>],
    stats: &Stats,
    now: Instant,
) {
    while let Some(&Reverse((at, i))) = responses.peek() {
        if at > now {
            break;
        }
        responses.pop();
        if let Some(t) = in_flight[i].take() {
            if t.cancel() {
                stats.cancelled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Prints a progress line every 500 ms and tracks peak pending.
fn spawn_monitor(
    timer: HashedWheelTimer,
    stats: Arc<Stats>,
    sending: Arc<AtomicBool>,
    start: Instant,
) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let mut peak = 0;
        let mut last_print = Instant::now();
        loop {
            peak = peak.max(timer.pending_timeouts());
            let done = stats.fired.load(Ordering::SeqCst) + stats.cancelled.load(Ordering::SeqCst);
            if last_print.elapsed() >= Duration::from_millis(500) {
                last_print = Instant::now();
                let phase = if sending.load(Ordering::SeqCst) {
                    "sending"
                } else {
                    "draining"
                };
                println!(
                    "  [{:>5.1}s] {phase:<8} scheduled {:>9}  cancelled {:>9}  fired {:>6}  pending {:>7}",
                    start.elapsed().as_secs_f64(),
                    stats.scheduled.load(Ordering::Relaxed),
                    stats.cancelled.load(Ordering::Relaxed),
                    stats.fired.load(Ordering::Relaxed),
                    timer.pending_timeouts(),
                );
            }
            if done >= REQUESTS || start.elapsed() > Duration::from_secs(60) {
                return peak;
            }
            thread::sleep(Duration::from_millis(1));
        }
    })
}

fn report(timer: &HashedWheelTimer, stats: &Stats, send: Duration, total: Duration, peak: usize) {
    let mut late = stats.lateness_us.lock().unwrap().clone();
    late.sort_unstable();
    let pct = |p: f64| {
        late.get(((late.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    let scheduled = stats.scheduled.load(Ordering::SeqCst);
    let cancelled = stats.cancelled.load(Ordering::SeqCst);
    let fired = stats.fired.load(Ordering::SeqCst);
    println!("results:");
    println!("  scheduled           {scheduled}");
    println!("  cancelled           {cancelled}");
    println!("  fired               {fired}");
    println!("  lost                {}", scheduled - cancelled - fired);
    println!(
        "  fired early         {}",
        stats.early.load(Ordering::SeqCst)
    );
    println!(
        "  lateness            p50 {:.3} ms   p99 {:.3} ms   max {:.3} ms",
        pct(0.50) as f64 / 1000.0,
        pct(0.99) as f64 / 1000.0,
        late.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    println!(
        "  throughput          {:.2} M schedule+cancel ops/s while sending ({:.2} s)",
        (scheduled + cancelled) as f64 / send.as_secs_f64() / 1e6,
        send.as_secs_f64()
    );
    println!("  peak pending        {peak}");
    println!("  pending at the end  {}", timer.pending_timeouts());
    println!("  total time          {:.2} s", total.as_secs_f64());
}
