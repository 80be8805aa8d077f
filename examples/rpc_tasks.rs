//! The RPC pattern as tokio code writes it, through each timer in one
//! process: a multi-thread runtime (2 workers), thousands of connection
//! tasks, each in a loop: make a request (a `tokio::sync::oneshot`), hand
//! its sender to a responder that answers 1-60 ms later (1 % never), and
//! await the answer under a deadline of a few hundred ms.
//!
//!     benches/rpc_tasks.sh              # both builds; runs the one with tokio's alt timer
//!     cargo run --release --example rpc_tasks --features tower -- --quick
//!
//! Rows (each a fresh runtime, timer and set of tasks):
//! - baseline: `rx.await` with no timeout; its cost is subtracted from
//!   every other row, round by round;
//! - `tokio::time::timeout`, run twice (the noise control below);
//! - tokio's alternative timer (`enable_alt_timer()`), only in a build
//!   with `RUSTFLAGS="--cfg tokio_unstable"`;
//! - `pingora_timeout::timeout`;
//! - this crate's `timeout` on a real-clock timer, and on a
//!   `tokio_clock()` timer built inside the runtime;
//! - `DelayQueue`: insert on request, remove on answer, the expired stream
//!   drained by a task: this crate's (shared, no lock), tokio-util's behind
//!   a `Mutex`, and tokio-util's one per task (the task polls it). In the
//!   shared queues an item is the sender of a second oneshot, which the
//!   drain task drops to tell its connection that it timed out;
//! - a timeout layer around a service that awaits the answer: this
//!   crate's `TimeoutLayer` against tower's;
//! - an idle connection: one `Sleep` per task, pinned in the task's loop
//!   as users write it (`std::pin::pin!`, as `tokio::pin!`), reset after
//!   every answer (and after it fires), this crate's `Sleep::reset`
//!   against tokio's.
//!
//! The responder (`support/responder.rs`) is one plain std thread that
//! uses none of these timers, the same for every row. pingora's clock
//! thread (a 10 ms tick) is started before the first round and runs for
//! the whole process, so it weighs on every row alike.
//!
//! Each row is measured in short rounds (`--rounds`, `--round-ms`), all
//! rows taking turns within a round (the order rotates each round), so a
//! slow spell of the machine hits them alike. A round: spawn the tasks,
//! warm up (`--warmup-ms`), the load phase (`--round-ms`), then stop the
//! loops and drain: wait until every deadline made has passed. Whole-process
//! CPU (user + system, `getrusage`) and context switches
//! (`ru_nvcsw + ru_nivcsw`) are read at the phase boundaries and divided
//! by the requests answered or timed out: for the load phase (what a busy
//! service pays) and for the whole run from the end of the warm-up to the
//! end of the drain (adding what idle wake-ups cost).
//!
//! `tokio::time` runs twice; a run's figures are to be reported only when
//! the two agree within 0.8-1.25 (the verdict is printed last).
//!
//! `--alone NAME` runs the row of that exact name and nothing else (no
//! baseline, no table), to compare two whole processes with `perf stat`
//! or `/usr/bin/time -v` (or `benches/rpc_tasks_alone.sh`). It prints the
//! whole process's CPU and context switches, and the responder thread's
//! CPU (the same code in every row).

#[path = "support/proc.rs"]
mod proc;
#[path = "support/responder.rs"]
mod responder;
#[path = "support/task_report.rs"]
mod task_report;

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use futures::future::{select, Either};
use futures::StreamExt;
use hashed_wheel_timer::HashedWheelTimer;
use tokio::runtime::Runtime;
use tokio::sync::oneshot::Receiver;
use tokio::task::JoinHandle;
use tower::{service_fn, BoxError, Layer, Service, ServiceExt};

use proc::process_usage;
use responder::{Reply, Responder};
use task_report::{report, Phase, Sample};

/// What each row awaits its answers with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    Baseline,
    Tokio,
    TokioAgain,
    TokioAlt,
    Pingora,
    Wheel,
    WheelTokioClock,
    WheelQueue,
    UtilQueueMutex,
    UtilQueuePerTask,
    WheelLayer,
    TowerLayer,
    WheelSleepReset,
    TokioSleepReset,
}

/// Every row, in the order the table prints them.
const PEERS: [(Peer, &str); 14] = [
    (Peer::Baseline, "baseline: rx.await, no timeout"),
    (Peer::Tokio, "tokio::time::timeout"),
    (Peer::TokioAgain, "tokio::time::timeout (again)"),
    (Peer::TokioAlt, "tokio::time::timeout, alt timer"),
    (Peer::Pingora, "pingora_timeout::timeout"),
    (Peer::Wheel, "hashed_wheel_timer timeout"),
    (
        Peer::WheelTokioClock,
        "hashed_wheel_timer timeout, tokio_clock",
    ),
    (Peer::WheelQueue, "hashed_wheel_timer DelayQueue (shared)"),
    (Peer::UtilQueueMutex, "tokio-util DelayQueue (Mutex)"),
    (
        Peer::UtilQueuePerTask,
        "tokio-util DelayQueue (one per task)",
    ),
    (Peer::WheelLayer, "hashed_wheel_timer TimeoutLayer"),
    (Peer::TowerLayer, "tower TimeoutLayer"),
    (Peer::WheelSleepReset, "hashed_wheel_timer Sleep::reset"),
    (Peer::TokioSleepReset, "tokio::time Sleep::reset"),
];

/// Sender-side shards of the request count, so the tasks do not all
/// write one cache line.
const SHARDS: usize = 16;
/// How long after its deadline an unanswered request's sender is
/// dropped: late enough for every timer here to fire first.
const GIVE_UP_AFTER_DEADLINE: Duration = Duration::from_millis(50);

struct Config {
    tasks: usize,
    workers: usize,
    deadline: Duration,
    /// Requests the responder never answers, in percent.
    unanswered: u8,
    rounds: usize,
    load: Duration,
    warmup: Duration,
    only: Vec<String>,
    /// `--alone NAME`: that row only, with no baseline or control, for a
    /// whole-process comparison of two runs (`perf stat`, `/usr/bin/time -v`).
    alone: Option<String>,
    quick: bool,
    /// `--tokio-clock`: every row of this crate on a `tokio_clock()` timer.
    tokio_clock: bool,
    /// `--baseline-spin-ns N`: the baseline spins this long after each
    /// answer, to see whether CPU spent in a task adds up.
    baseline_spin: Duration,
}

impl Config {
    fn from_args() -> Config {
        let mut config = Config {
            tasks: 4096,
            workers: 2,
            deadline: Duration::from_millis(300),
            unanswered: 1,
            rounds: 40,
            load: Duration::from_millis(500),
            warmup: Duration::from_millis(300),
            only: Vec::new(),
            alone: None,
            quick: false,
            tokio_clock: false,
            baseline_spin: Duration::ZERO,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            if flag == "--quick" {
                config.quick = true;
                config.rounds = 2;
                config.load = Duration::from_millis(100);
                config.warmup = Duration::from_millis(50);
                config.deadline = Duration::from_millis(100);
                continue;
            }
            if flag == "--tokio-clock" {
                config.tokio_clock = true;
                continue;
            }
            let value = args.next().unwrap_or_else(|| usage(&flag));
            let number = || value.parse::<u64>().unwrap_or_else(|_| usage(&flag));
            match flag.as_str() {
                "--tasks" => config.tasks = number() as usize,
                "--workers" => config.workers = number() as usize,
                "--deadline-ms" => config.deadline = Duration::from_millis(number()),
                "--unanswered-percent" => config.unanswered = number().min(100) as u8,
                "--rounds" => config.rounds = number() as usize,
                "--round-ms" => config.load = Duration::from_millis(number()),
                "--warmup-ms" => config.warmup = Duration::from_millis(number()),
                "--only" => config.only = value.split(',').map(str::to_owned).collect(),
                "--alone" => config.alone = Some(value),
                "--baseline-spin-ns" => config.baseline_spin = Duration::from_nanos(number()),
                _ => usage(&flag),
            }
        }
        config
    }

    /// Every deadline made before the loops stopped has passed, and so
    /// has every unanswered request's give-up.
    fn drain(&self) -> Duration {
        self.deadline + GIVE_UP_AFTER_DEADLINE * 2
    }

    /// Whether `--only` keeps the row `name`; the baseline and both
    /// `tokio::time` runs always stay.
    fn keeps(&self, peer: Peer, name: &str) -> bool {
        if let Some(alone) = &self.alone {
            return name == alone;
        }
        matches!(peer, Peer::Baseline | Peer::Tokio | Peer::TokioAgain)
            || self.only.is_empty()
            || self.only.iter().any(|o| name.contains(o.as_str()))
    }
}

fn usage(flag: &str) -> ! {
    eprintln!(
        "unknown or incomplete flag {flag}\n\
         flags: --tasks N (4096) --workers N (2) --deadline-ms N (300) --rounds N (40)\n\
         \x20      --unanswered-percent N (1)\n\
         \x20      --round-ms N (500) --warmup-ms N (300) --only NAME,NAME --alone NAME --quick\n\
         \x20      --tokio-clock (every row of this crate on a tokio_clock() timer)\n\
         \x20      --baseline-spin-ns N (0: the baseline spins N ns after each answer)"
    );
    std::process::exit(2)
}

/// What one run of the connection tasks shares.
struct Ctx {
    responder: Responder,
    deadline: Duration,
    baseline_spin: Duration,
    stop: AtomicBool,
    done: [CachePadded<AtomicU64>; SHARDS],
}

impl Ctx {
    /// Requests answered or timed out so far.
    fn done(&self) -> u64 {
        self.done.iter().map(|d| d.load(Relaxed)).sum()
    }
}

/// One connection: requests one at a time until told to stop. `wait`
/// awaits one request's answer (or its deadline) as the row does, given
/// the task's state, and hands the state back.
async fn connection<S, F, Fut>(ctx: Arc<Ctx>, id: usize, mut state: S, wait: F)
where
    F: Fn(S, Receiver<()>) -> Fut,
    Fut: Future<Output = S>,
{
    let done = &ctx.done[id % SHARDS];
    while !ctx.stop.load(Relaxed) {
        state = wait(state, ctx.responder.request()).await;
        done.fetch_add(1, Relaxed);
    }
}

/// An idle connection's loop: its `sleep` stays pinned where it is, and
/// `reset` moves it on after every answer, or after it fired.
async fn idle_connection<S: Future>(
    ctx: Arc<Ctx>,
    id: usize,
    sleep: S,
    reset: impl Fn(Pin<&mut S>),
) {
    let done = &ctx.done[id % SHARDS];
    let mut sleep = pin!(sleep);
    while !ctx.stop.load(Relaxed) {
        let _ = select(ctx.responder.request(), sleep.as_mut()).await;
        reset(sleep.as_mut());
        done.fetch_add(1, Relaxed);
    }
}

/// Spawns `tasks` connections, each with its own `state()`.
fn spawn_connections<S, F, Fut>(
    rt: &Runtime,
    ctx: &Arc<Ctx>,
    tasks: usize,
    mut state: impl FnMut() -> S,
    wait: F,
) -> Vec<JoinHandle<()>>
where
    S: Send + 'static,
    F: Fn(S, Receiver<()>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = S> + Send + 'static,
{
    (0..tasks)
        .map(|id| rt.spawn(connection(ctx.clone(), id, state(), wait.clone())))
        .collect()
}

/// One request tracked in a shared delay queue: its item is the sender of
/// a second oneshot, which the queue's drain task drops when the item
/// expires. An answer first removes the item.
async fn queued<K>(rx: Receiver<()>, insert: impl FnOnce(Reply) -> K, remove: impl FnOnce(K)) {
    let (expire, expired) = tokio::sync::oneshot::channel();
    let key = insert(expire);
    if let Either::Left(_) = select(rx, expired).await {
        remove(key);
    }
}

type UtilQueue = Arc<Mutex<tokio_util::time::DelayQueue<Reply>>>;

/// Takes what expires from tokio-util's shared queue. A sentinel an hour
/// away keeps the queue from emptying, so its stream never ends and the
/// task is woken only when an item expires.
async fn drain_util_queue(queue: UtilQueue) {
    let (sentinel, _kept) = tokio::sync::oneshot::channel();
    queue
        .lock()
        .unwrap()
        .insert(sentinel, Duration::from_secs(3600));
    while let Some(expired) = poll_fn(|cx| queue.lock().unwrap().poll_expired(cx)).await {
        drop(expired);
    }
}

/// The service behind the timeout layers: awaits the answer.
async fn answer(rx: Receiver<()>) -> Result<(), BoxError> {
    let _ = rx.await;
    Ok(())
}

/// One call through a layered service.
async fn call<S: Service<Receiver<()>>>(mut svc: S, rx: Receiver<()>) -> S {
    if let Ok(ready) = svc.ready().await {
        let _ = ready.call(rx).await;
    }
    svc
}

/// Spawns `peer`'s connection tasks, and the task that drains its queue
/// if it has one.
fn spawn(
    peer: Peer,
    rt: &Runtime,
    ctx: &Arc<Ctx>,
    tasks: usize,
    timer: &HashedWheelTimer,
) -> Vec<JoinHandle<()>> {
    let _rt = rt.enter();
    let d = ctx.deadline;
    let no_state = || ();
    match peer {
        Peer::Baseline => {
            let spin = ctx.baseline_spin;
            spawn_connections(rt, ctx, tasks, no_state, move |(), rx| async move {
                let _ = rx.await;
                if !spin.is_zero() {
                    let started = Instant::now();
                    while started.elapsed() < spin {}
                }
            })
        }
        Peer::Tokio | Peer::TokioAgain | Peer::TokioAlt => {
            spawn_connections(rt, ctx, tasks, no_state, move |(), rx| async move {
                let _ = tokio::time::timeout(d, rx).await;
            })
        }
        Peer::Pingora => spawn_connections(rt, ctx, tasks, no_state, move |(), rx| async move {
            let _ = pingora_timeout::timeout(d, rx).await;
        }),
        Peer::Wheel | Peer::WheelTokioClock => spawn_connections(
            rt,
            ctx,
            tasks,
            || timer.clone(),
            move |timer: HashedWheelTimer, rx| async move {
                let _ = timer.timeout(d, rx).await;
                timer
            },
        ),
        Peer::WheelQueue => {
            let queue = timer.delay_queue::<Reply>();
            let mut expiring = queue.clone();
            let drain = rt.spawn(async move { while expiring.next().await.is_some() {} });
            let mut handles = spawn_connections(
                rt,
                ctx,
                tasks,
                || queue.clone(),
                move |q: hashed_wheel_timer::DelayQueue<Reply>, rx| async move {
                    let insert = |e| q.insert(e, d).expect("the timer runs");
                    queued(rx, insert, |key| drop(q.remove(&key))).await;
                    q
                },
            );
            handles.push(drain);
            handles
        }
        Peer::UtilQueueMutex => {
            let queue = UtilQueue::default();
            let drain = rt.spawn(drain_util_queue(queue.clone()));
            let mut handles = spawn_connections(
                rt,
                ctx,
                tasks,
                || queue.clone(),
                move |q: UtilQueue, rx| async move {
                    let insert = |e| q.lock().unwrap().insert(e, d);
                    queued(rx, insert, |key| drop(q.lock().unwrap().try_remove(&key))).await;
                    q
                },
            );
            handles.push(drain);
            handles
        }
        Peer::UtilQueuePerTask => spawn_connections(
            rt,
            ctx,
            tasks,
            || tokio_util::time::DelayQueue::with_capacity(1),
            move |mut q, rx| async move {
                let key = q.insert((), d);
                let answered = matches!(select(rx, q.next()).await, Either::Left(_));
                if answered {
                    q.try_remove(&key);
                }
                q
            },
        ),
        Peer::WheelLayer => {
            let layer = hashed_wheel_timer::TimeoutLayer::new(timer.clone(), d);
            spawn_connections(rt, ctx, tasks, || layer.layer(service_fn(answer)), call)
        }
        Peer::TowerLayer => {
            let layer = tower::timeout::TimeoutLayer::new(d);
            spawn_connections(rt, ctx, tasks, || layer.layer(service_fn(answer)), call)
        }
        Peer::WheelSleepReset => (0..tasks)
            .map(|id| {
                let timer = timer.clone();
                let sleep = timer.sleep(d);
                let reset = move |s: Pin<&mut hashed_wheel_timer::Sleep>| {
                    s.get_mut().reset(timer.now() + d)
                };
                rt.spawn(idle_connection(ctx.clone(), id, sleep, reset))
            })
            .collect(),
        Peer::TokioSleepReset => (0..tasks)
            .map(|id| {
                let reset =
                    move |s: Pin<&mut tokio::time::Sleep>| s.reset(tokio::time::Instant::now() + d);
                rt.spawn(idle_connection(
                    ctx.clone(),
                    id,
                    tokio::time::sleep(d),
                    reset,
                ))
            })
            .collect(),
    }
}

/// Runs `peer` once: a fresh runtime, timer and tasks.
fn run(peer: Peer, config: &Config, responder: &Responder) -> Sample {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(config.workers).enable_time();
    #[cfg(tokio_unstable)]
    if peer == Peer::TokioAlt {
        builder.enable_alt_timer();
    }
    let rt = builder.build().expect("a runtime");
    let timer = if peer == Peer::WheelTokioClock || config.tokio_clock {
        let _rt = rt.enter();
        HashedWheelTimer::builder()
            .tokio_clock()
            .build()
            .expect("inside the runtime")
    } else {
        HashedWheelTimer::new() // its thread starts with the first timeout
    };
    let ctx = Arc::new(Ctx {
        responder: responder.clone(),
        deadline: config.deadline,
        baseline_spin: config.baseline_spin,
        stop: AtomicBool::new(false),
        done: Default::default(),
    });
    let handles = spawn(peer, &rt, &ctx, config.tasks, &timer);
    let mark = || (process_usage(), ctx.done(), Instant::now());
    std::thread::sleep(config.warmup);
    let warm = mark();
    std::thread::sleep(config.load);
    let loaded = mark();
    ctx.stop.store(true, Relaxed);
    std::thread::sleep(config.drain());
    let drained = mark();
    let connections = &handles[..config.tasks];
    let running = connections.iter().filter(|h| !h.is_finished()).count();
    if running > 0 {
        eprintln!("{peer:?}: {running} connection tasks still running after the drain");
    }
    handles.iter().for_each(JoinHandle::abort);
    drop(timer);
    rt.shutdown_timeout(Duration::from_secs(1));
    Sample {
        load: Phase::between(warm, loaded),
        whole: Phase::between(warm, drained),
    }
}

fn main() {
    let config = Config::from_args();
    let rows: Vec<(Peer, &str)> = PEERS
        .into_iter()
        .filter(|&(peer, name)| config.keeps(peer, name))
        .filter(|&(peer, _)| cfg!(tokio_unstable) || peer != Peer::TokioAlt)
        .collect();
    let responder = Responder::start(config.deadline + GIVE_UP_AFTER_DEADLINE, config.unanswered);
    // pingora's clock thread, from now on, for every row alike.
    drop(pingora_timeout::timeout(
        config.deadline,
        std::future::ready(()),
    ));

    println!(
        "rpc_tasks: {} connection tasks, {} workers, deadline {} ms, answers 1-60 ms ({} % never), \
         {} rounds of {} ms load after {} ms warm-up, drain {} ms; tokio_unstable: {}",
        config.tasks,
        config.workers,
        config.deadline.as_millis(),
        config.unanswered,
        config.rounds,
        config.load.as_millis(),
        config.warmup.as_millis(),
        config.drain().as_millis(),
        cfg!(tokio_unstable),
    );
    if config.tokio_clock {
        println!("(--tokio-clock: every row of this crate on a tokio_clock() timer)");
    }
    if !cfg!(tokio_unstable) {
        println!(
            "(tokio's alt timer row skipped: build with RUSTFLAGS=\"--cfg tokio_unstable\", \
             as benches/rpc_tasks.sh does)"
        );
    }
    if config.quick {
        println!("(--quick: a smoke run, too short for figures to report)");
    }
    if rows.is_empty() {
        eprintln!("no row by that name: --alone takes a row's whole name, as the table prints it");
        std::process::exit(2);
    }
    let started = Instant::now();
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); rows.len()];
    for round in 0..config.rounds {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.rotate_left(round % rows.len());
        for i in order {
            samples[i].push(run(rows[i].0, &config, &responder));
        }
        eprintln!(
            "round {}/{} done, {:.0} s",
            round + 1,
            config.rounds,
            started.elapsed().as_secs_f64()
        );
    }
    if config.alone.is_some() {
        // No baseline to subtract: the whole process is the figure.
        let usage = process_usage();
        // The responder runs the same code in every row: what it costs more
        // in one row than in another, that row's timer made it cost.
        let responder_cpu = proc::thread_id("responder").and_then(|t| proc::thread_cpu(&t));
        println!(
            "{} rounds of the row alone: whole process {:.3} CPU s, {} context switches; the responder thread {:.3} CPU s",
            config.rounds,
            usage.cpu,
            usage.switches,
            responder_cpu.map_or(0.0, |cpu| cpu.as_secs_f64()),
        );
        return;
    }
    report(&rows, &samples, config.rounds);
}
