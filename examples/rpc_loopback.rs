//! A loopback TCP RPC application, run three ways: the same client and
//! server, their timers all from one library.
//!
//! - The server answers each request after the service time it asks for
//!   (1-10 ms; 1 % take 40 ms), behind a timeout layer of 50 ms.
//! - The client multiplexes 512 caller tasks over 4 connections; each
//!   caller loops: send a request, await its answer under a 20 ms deadline.
//!   So 99 % of deadlines are cancelled 1-10 ms after they were made, and
//!   1 % expire.
//!
//! The three ways:
//! - `tokio`: `tokio::time::timeout` in the callers, `tokio::time::sleep`
//!   and tower's `TimeoutLayer` in the server;
//! - `wheel timeout`: this crate's `timeout`, `sleep` and `TimeoutLayer`;
//! - `wheel DelayQueue`: the callers' deadlines in one shared `DelayQueue`
//!   (insert on send, remove on answer; a task fails what expires), the
//!   server as in `wheel timeout`.
//! - `wheel drop-in`: tokio's way with the imports changed, as a port
//!   reads: the free functions `timeout` and `sleep` and the `tower` module's
//!   drop-in `TimeoutLayer::new(d)`, all on `current_timer()`.
//!
//! Each round runs every way in turn (a fresh runtime of 2 workers, timer,
//! server and client), the order rotating: 300 ms of warm-up, then
//! `--round-ms` of load, measured as whole-process CPU (user + system,
//! `getrusage`) per answered-or-expired request, and requests a second.
//! The table gives the median and range over the rounds.
//!
//!     cargo run --release --example rpc_loopback --features tower
//!     cargo run --release --example rpc_loopback --features tower -- --rounds 10 --tokio-clock
//!
//! `--tokio-clock` builds the crate's timer with `tokio_clock()` inside the
//! runtime (its wheel turned by the runtime's own wake-ups) instead of on
//! the real clock with a thread of its own; the drop-in way gets it by
//! `set_global_default`, and otherwise uses the process-wide default timer. `--only WAY` runs the ways whose
//! name contains `WAY` and no other, so that a whole process (`perf stat`,
//! `taskset`) measures one way alone:
//!
//!     cargo run --release --example rpc_loopback --features tower -- --rounds 2 --only "timer timeout"

#[path = "support/proc.rs"]
mod proc;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hashed_wheel_timer::{DelayQueue, HashedWheelTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tower::{service_fn, Layer, Service, ServiceExt};

const CONNECTIONS: usize = 4;
const CALLERS: usize = 512;
const DEADLINE: Duration = Duration::from_millis(20);
const SERVER_TIMEOUT: Duration = Duration::from_millis(50);
const WARMUP: Duration = Duration::from_millis(300);

#[derive(Clone, Copy, PartialEq, Debug)]
enum Way {
    Tokio,
    WheelTimeout,
    WheelQueue,
    WheelDropIn,
}

const WAYS: [(Way, &str); 4] = [
    (
        Way::Tokio,
        "tokio::time (timeout, sleep, tower TimeoutLayer)",
    ),
    (Way::WheelTimeout, "hashed_wheel_timer timeout"),
    (Way::WheelQueue, "hashed_wheel_timer DelayQueue"),
    (
        Way::WheelDropIn,
        "hashed_wheel_timer drop-in (free functions)",
    ),
];

/// The service time a request asks for, by its id: 1-10 ms, 1 % 40 ms.
fn service_time(id: u64) -> Duration {
    let mut rng = fastrand::Rng::with_seed(id);
    if rng.u8(0..100) == 0 {
        Duration::from_millis(40)
    } else {
        Duration::from_micros(rng.u64(1_000..10_000))
    }
}

/// The timers one way uses.
#[derive(Clone)]
struct Timers {
    way: Way,
    wheel: HashedWheelTimer,
}

impl Timers {
    async fn sleep(&self, d: Duration) {
        match self.way {
            Way::Tokio => tokio::time::sleep(d).await,
            Way::WheelDropIn => hashed_wheel_timer::sleep(d).await,
            _ => self.wheel.sleep(d).await,
        }
    }
}

/// Writes the ids `ids` yields to `write`, a flush per batch waiting.
async fn write_ids(write: OwnedWriteHalf, mut ids: mpsc::UnboundedReceiver<u64>) {
    let mut write = BufWriter::new(write);
    while let Some(id) = ids.recv().await {
        let mut more = Some(id);
        while let Some(id) = more {
            if write.write_u64(id).await.is_err() {
                return;
            }
            more = ids.try_recv().ok();
        }
        if write.flush().await.is_err() {
            return;
        }
    }
}

/// Serves one connection: each request answered by a task of its own,
/// through the way's timeout layer; answers go back through one writer.
async fn serve(stream: TcpStream, timers: Timers) {
    let (read, write) = stream.into_split();
    let (answers, to_write) = mpsc::unbounded_channel::<u64>();
    tokio::spawn(write_ids(write, to_write));
    let mut read = BufReader::new(read);
    while let Ok(id) = read.read_u64().await {
        let (timers, answers) = (timers.clone(), answers.clone());
        tokio::spawn(async move {
            let handler = {
                let timers = timers.clone();
                service_fn(move |id: u64| {
                    let timers = timers.clone();
                    async move {
                        timers.sleep(service_time(id)).await;
                        Ok::<u64, Infallible>(id)
                    }
                })
            };
            let answered = match timers.way {
                Way::Tokio => {
                    call(
                        tower::timeout::TimeoutLayer::new(SERVER_TIMEOUT).layer(handler),
                        id,
                    )
                    .await
                }
                Way::WheelDropIn => {
                    let layer =
                        hashed_wheel_timer::tower::timeout::TimeoutLayer::new(SERVER_TIMEOUT);
                    call(layer.layer(handler), id).await
                }
                _ => {
                    let layer =
                        hashed_wheel_timer::TimeoutLayer::new(timers.wheel.clone(), SERVER_TIMEOUT);
                    call(layer.layer(handler), id).await
                }
            };
            if answered {
                let _ = answers.send(id);
            }
        });
    }
}

async fn call<S: Service<u64>>(service: S, id: u64) -> bool {
    service.oneshot(id).await.is_ok()
}

/// The callers waiting on one connection, by request id.
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<()>>>>;

/// One client connection: a writer fed by the callers, a reader that
/// completes their answers.
struct Connection {
    requests: mpsc::UnboundedSender<u64>,
    waiting: Waiting,
}

async fn connect(addr: SocketAddr) -> Connection {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (read, write) = stream.into_split();
    let (requests, to_send) = mpsc::unbounded_channel::<u64>();
    tokio::spawn(write_ids(write, to_send));
    let waiting: Waiting = Arc::default();
    let answered = waiting.clone();
    tokio::spawn(async move {
        let mut read = BufReader::new(read);
        while let Ok(id) = read.read_u64().await {
            let sender = answered.lock().unwrap().remove(&id);
            if let Some(sender) = sender {
                let _ = sender.send(());
            }
        }
    });
    Connection { requests, waiting }
}

/// What a caller loop shares.
struct Client {
    connections: Vec<Connection>,
    timers: Timers,
    queue: DelayQueue<(usize, u64)>,
    next_id: AtomicU64,
    done: AtomicU64,
    stop: AtomicBool,
}

impl Client {
    /// One request: send it, await the answer under the deadline.
    async fn request(&self) {
        let id = self.next_id.fetch_add(1, Relaxed);
        let on = (id as usize) % CONNECTIONS;
        let connection = &self.connections[on];
        let (tx, rx) = oneshot::channel();
        connection.waiting.lock().unwrap().insert(id, tx);
        let _ = connection.requests.send(id);
        let answered = match self.timers.way {
            Way::Tokio => tokio::time::timeout(DEADLINE, rx).await.is_ok(),
            Way::WheelTimeout => self.timers.wheel.timeout(DEADLINE, rx).await.is_ok(),
            Way::WheelDropIn => hashed_wheel_timer::timeout(DEADLINE, rx).await.is_ok(),
            Way::WheelQueue => {
                let key = self
                    .queue
                    .insert((on, id), DEADLINE)
                    .expect("a running timer");
                let answered = rx.await.is_ok();
                if answered {
                    self.queue.try_remove(&key);
                }
                answered
            }
        };
        if !answered {
            connection.waiting.lock().unwrap().remove(&id);
        }
        self.done.fetch_add(1, Relaxed);
    }

    /// Fails each request whose deadline came out of the queue.
    async fn expire(self: Arc<Self>) {
        let mut expired = self.queue.clone();
        while let Some(item) = expired.next().await {
            let (on, id) = item.into_inner();
            self.connections[on].waiting.lock().unwrap().remove(&id);
        }
    }
}

/// One way, once: CPU per request and requests a second under load.
fn run(way: Way, load: Duration, tokio_clock: bool) -> (f64, f64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let wheel = if tokio_clock {
        let _entered = rt.enter();
        HashedWheelTimer::builder()
            .tokio_clock()
            .build()
            .expect("inside the runtime")
    } else {
        HashedWheelTimer::new()
    };
    if way == Way::WheelDropIn && tokio_clock {
        drop(hashed_wheel_timer::set_global_default(wheel.clone()));
    }
    let timers = Timers {
        way,
        wheel: wheel.clone(),
    };
    let client = rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("an address");
        let serving = timers.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                stream.set_nodelay(true).expect("nodelay");
                tokio::spawn(serve(stream, serving.clone()));
            }
        });
        let mut connections = Vec::new();
        for _ in 0..CONNECTIONS {
            connections.push(connect(addr).await);
        }
        Arc::new(Client {
            connections,
            timers,
            queue: wheel.delay_queue(),
            next_id: AtomicU64::new(0),
            done: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        })
    });
    if way == Way::WheelQueue {
        rt.spawn(client.clone().expire());
    }
    for _ in 0..CALLERS {
        let client = client.clone();
        rt.spawn(async move {
            while !client.stop.load(Relaxed) {
                client.request().await;
            }
        });
    }
    std::thread::sleep(WARMUP);
    let (cpu, done, at) = (
        proc::process_cpu(),
        client.done.load(Relaxed),
        Instant::now(),
    );
    std::thread::sleep(load);
    let requests = (client.done.load(Relaxed) - done).max(1) as f64;
    let cpu_us = (proc::process_cpu() - cpu) * 1e6 / requests;
    let per_sec = requests / at.elapsed().as_secs_f64();
    client.stop.store(true, Relaxed);
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(wheel);
    (cpu_us, per_sec)
}

fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (
        (values[(n - 1) / 2] + values[n / 2]) / 2.0,
        values[0],
        values[n - 1],
    )
}

fn main() {
    let mut rounds = 6;
    let mut load = Duration::from_millis(1500);
    let mut tokio_clock = false;
    let mut only = String::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut number = || -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&flag))
        };
        match flag.as_str() {
            "--rounds" => rounds = number().max(1) as usize,
            "--round-ms" => load = Duration::from_millis(number()),
            "--tokio-clock" => tokio_clock = true,
            "--only" => only = args.next().unwrap_or_else(|| usage(&flag)),
            "--quick" => (rounds, load) = (1, Duration::from_millis(200)),
            _ => usage(&flag),
        }
    }
    println!(
        "rpc_loopback: {CALLERS} callers over {CONNECTIONS} TCP connections, deadline {} ms, \
         service 1-10 ms (1 % 40 ms), server timeout {} ms, {rounds} rounds of {} ms{}",
        DEADLINE.as_millis(),
        SERVER_TIMEOUT.as_millis(),
        load.as_millis(),
        if tokio_clock {
            ", the crate's timer on tokio_clock()"
        } else {
            ""
        },
    );
    let mut samples = vec![Vec::new(); WAYS.len()];
    for round in 0..rounds {
        for i in (0..WAYS.len()).map(|i| (i + round) % WAYS.len()) {
            if !WAYS[i].1.contains(only.as_str()) {
                continue;
            }
            samples[i].push(run(WAYS[i].0, load, tokio_clock));
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }
    // Without tokio's way (`--only`), the last column compares nothing.
    let tokio_cpu = if samples[0].is_empty() {
        f64::NAN
    } else {
        spread(samples[0].iter().map(|s| s.0).collect()).0
    };
    println!("| way | CPU µs per request, median | range | requests/s, median | CPU vs tokio |");
    println!("|---|---:|---:|---:|---:|");
    for ((_, name), runs) in WAYS.iter().zip(&samples).filter(|(_, r)| !r.is_empty()) {
        let (cpu, low, high) = spread(runs.iter().map(|s| s.0).collect());
        let (rate, _, _) = spread(runs.iter().map(|s| s.1).collect());
        let versus = tokio_cpu / cpu;
        let versus = if versus.is_nan() {
            "-".to_owned()
        } else {
            format!("{versus:.2}x")
        };
        println!("| {name} | {cpu:.2} | {low:.2} to {high:.2} | {rate:.0} | {versus} |");
    }
    println!(
        "(CPU vs tokio: tokio's CPU per request over this row's; over 1, this row is cheaper)"
    );
}

fn usage(flag: &str) -> ! {
    eprintln!(
        "unknown or incomplete flag {flag}\n\
         flags: --rounds N (6) --round-ms N (1500) --tokio-clock --only WAY --quick"
    );
    std::process::exit(2)
}
