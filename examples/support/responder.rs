//! The far end of the RPC pattern, for `rpc_tasks`: one plain std thread,
//! the same for every row, that answers each request 1-60 ms after it
//! arrives, and 1 % never (or the share `start` is given). It uses none of the timers under test: pending
//! answers wait in its own ring of buckets, one a millisecond, and it
//! sleeps 1 ms between sweeps.
//!
//! A request left unanswered has its sender dropped `give_up` after it
//! arrived, so a loop that awaits its answer with no timeout (the
//! baseline) still moves on, and one with a shorter timeout times out
//! first.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Where a request's answer goes.
pub type Reply = oneshot::Sender<()>;

/// A handle on the responder thread; clones share it.
#[derive(Clone)]
pub struct Responder {
    requests: mpsc::Sender<Reply>,
}

impl Responder {
    /// Starts the thread, which leaves `unanswered_percent` of requests
    /// unanswered. It runs as long as the process.
    pub fn start(give_up: Duration, unanswered_percent: u8) -> Responder {
        let (requests, incoming) = mpsc::channel();
        std::thread::Builder::new()
            .name("responder".into())
            .spawn(move || answer(incoming, give_up, unanswered_percent))
            .expect("spawn the responder thread");
        Responder { requests }
    }

    /// Makes a request: its answer comes on the returned receiver.
    pub fn request(&self) -> oneshot::Receiver<()> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(reply)
            .expect("the responder runs as long as the process");
        answer
    }
}

/// The thread: each millisecond, answers what is due, then files what
/// arrived.
fn answer(incoming: mpsc::Receiver<Reply>, give_up: Duration, unanswered_percent: u8) {
    let give_up_ms = give_up.as_millis() as u64;
    // More buckets than the furthest a request is filed ahead.
    let len = (give_up_ms as usize + 2).next_power_of_two().max(64);
    let mut ring: Vec<Vec<(Reply, bool)>> = (0..len).map(|_| Vec::new()).collect();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let start = Instant::now();
    let mut swept = 0u64;
    loop {
        std::thread::sleep(Duration::from_millis(1));
        let now = start.elapsed().as_millis() as u64;
        while swept < now {
            swept += 1;
            for (reply, answered) in ring[swept as usize & (len - 1)].drain(..) {
                if answered {
                    let _ = reply.send(()); // its receiver may have timed out
                }
            }
        }
        loop {
            let reply = match incoming.try_recv() {
                Ok(reply) => reply,
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            };
            let answered = rng.u8(0..100) >= unanswered_percent;
            let after = if answered {
                rng.u64(1..=60)
            } else {
                give_up_ms
            };
            ring[(now + after) as usize & (len - 1)].push((reply, answered));
        }
    }
}
