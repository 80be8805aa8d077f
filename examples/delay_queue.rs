//! A cache whose entries live for a time to live after their last use, on
//! a shared `DelayQueue`: producers on several tasks insert and read, each
//! read resets the entry's deadline, and one task evicts what expires.
//!
//!     cargo run --release --example delay_queue
//!
//! The queue is shared by handles, with no `Mutex` around it (tokio-util's
//! takes `&mut self`). The map of entries has its own lock; the evictor
//! checks that the key it got is still the entry's, so an entry read at
//! the last moment is not evicted.

use futures::StreamExt;
use hashed_wheel_timer::{DelayKey, DelayQueue, HashedWheelTimer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(50);

struct Entry {
    value: u64,
    key: DelayKey,
    last_used: Instant,
}

#[derive(Clone)]
struct Cache {
    entries: Arc<Mutex<HashMap<u64, Entry>>>,
    expiry: DelayQueue<u64>,
}

impl Cache {
    fn new(timer: &HashedWheelTimer) -> Cache {
        Cache {
            entries: Arc::default(),
            expiry: timer.delay_queue(),
        }
    }

    fn put(&self, id: u64, value: u64) {
        let last_used = Instant::now();
        let mut entries = self.entries.lock().unwrap();
        let key = match entries.get(&id) {
            Some(old) if self.expiry.reset(&old.key, TTL) => old.key,
            // New, or its deadline fired a moment ago: a fresh deadline.
            _ => self.expiry.insert(id, TTL).expect("the timer is running"),
        };
        entries.insert(
            id,
            Entry {
                value,
                key,
                last_used,
            },
        );
    }

    /// A read: a hit pushes the entry's deadline back by the time to live.
    fn get(&self, id: u64) -> Option<u64> {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap();
        let entry = entries.get_mut(&id)?;
        if !self.expiry.reset(&entry.key, TTL) {
            entry.key = self.expiry.insert(id, TTL).expect("the timer is running");
        }
        entry.last_used = now;
        Some(entry.value)
    }

    /// Evicts what expires, until the queue ends. Returns how many it
    /// evicted, and the shortest time any of them had been unused.
    async fn evict(mut self) -> (u64, Duration) {
        let (mut evicted, mut shortest) = (0, Duration::MAX);
        while let Some(expired) = self.expiry.next().await {
            let mut entries = self.entries.lock().unwrap();
            let id = *expired.get_ref();
            // Only if the entry still has this key: a later put replaced it.
            if entries.get(&id).is_some_and(|e| e.key == expired.key()) {
                let entry = entries.remove(&id).unwrap();
                shortest = shortest.min(entry.last_used.elapsed());
                evicted += 1;
            }
        }
        (evicted, shortest)
    }
}

#[tokio::main]
async fn main() {
    let timer = HashedWheelTimer::new();
    let cache = Cache::new(&timer);
    let evictor = tokio::spawn(cache.clone().evict());

    // Four producers, each with 40 keys of its own, for one second.
    let producers: Vec<_> = (0..4u64)
        .map(|p| {
            let cache = cache.clone();
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(p);
                let (mut hits, mut misses) = (0u64, 0u64);
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(1) {
                    let id = p * 1_000 + rng.u64(0..40);
                    match cache.get(id) {
                        Some(_) => hits += 1,
                        None => {
                            misses += 1;
                            cache.put(id, id * 10);
                        }
                    }
                    hashed_wheel_timer::sleep(Duration::from_micros(rng.u64(100..400))).await;
                }
                (hits, misses)
            })
        })
        .collect();
    let (mut hits, mut misses) = (0, 0);
    for producer in producers {
        let (h, m) = producer.await.unwrap();
        hits += h;
        misses += m;
    }
    let live = cache.entries.lock().unwrap().len();
    // Let every entry expire, then stop the timer: the stream ends once the
    // queue is empty.
    while !cache.expiry.is_empty() {
        tokio::time::sleep(TTL).await;
    }
    timer.stop().unwrap();
    let (evicted, shortest) = evictor.await.unwrap();
    println!("reads: {hits} hits, {misses} misses; {live} entries live at the end");
    println!(
        "evicted {evicted} entries, none used within the last {shortest:?} (time to live {TTL:?})"
    );
    let s = timer.stats();
    println!(
        "timer: {} deadlines scheduled, {} fired, {} cancelled, {} pending",
        s.scheduled, s.fired, s.cancelled, s.pending
    );
    assert!(
        shortest >= TTL,
        "an entry was evicted before its time to live"
    );
    assert_eq!(
        evicted, misses,
        "every entry put was evicted once, after its last use"
    );
}
