//! A cache whose entries live for a time to live after their last use, on
//! a `DelayMap`: four tasks use entries, each use replacing the entry and
//! pushing its deadline back, and one task evicts what expires.
//!
//!     cargo run --release --example delay_map
//!
//! Compare `examples/delay_queue.rs`, the same cache on a `DelayQueue`
//! with a `HashMap` of keys beside it, kept in step by hand: here the map
//! is the cache, and a value read or replaced at the last moment is never
//! evicted.

use futures::StreamExt;
use hashed_wheel_timer::{DelayMap, HashedWheelTimer};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_millis(50);

/// An entry: its value, and when it was last used.
#[derive(Clone)]
struct Entry {
    value: u64,
    last_used: Instant,
}

#[tokio::main]
async fn main() {
    let timer = HashedWheelTimer::new();
    let cache: DelayMap<u64, Entry> = timer.delay_map();

    let mut expired = cache.clone();
    let evictor = tokio::spawn(async move {
        let (mut evicted, mut shortest) = (0u64, Duration::MAX);
        while let Some((_id, entry)) = expired.next().await {
            shortest = shortest.min(entry.last_used.elapsed());
            evicted += 1;
        }
        (evicted, shortest)
    });

    // Four tasks, each with 40 ids of its own, for one second.
    let readers: Vec<_> = (0..4u64)
        .map(|task| {
            let cache = cache.clone();
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(task);
                let (mut hits, mut misses) = (0u64, 0u64);
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(1) {
                    let id = task * 1_000 + rng.u64(0..40);
                    let fresh = Entry {
                        value: id * 10,
                        last_used: Instant::now(),
                    };
                    // A hit replaces the entry, and its time to live starts
                    // again; a miss puts a new one.
                    match cache.insert(id, fresh, TTL).expect("the timer is running") {
                        Some(_) => hits += 1,
                        None => misses += 1,
                    }
                    hashed_wheel_timer::sleep(Duration::from_micros(rng.u64(100..400))).await;
                }
                (hits, misses)
            })
        })
        .collect();
    let (mut hits, mut misses) = (0, 0);
    for reader in readers {
        let (h, m) = reader.await.unwrap();
        hits += h;
        misses += m;
    }
    let live = cache.len();
    if let Some(entry) = cache.get(&0) {
        println!("entry 0 holds {}", entry.value);
    }
    cache.close(); // the evictor ends once every entry has expired
    let (evicted, shortest) = evictor.await.unwrap();
    let s = timer.stats();
    println!(
        "uses: {hits} hits, {misses} misses; {live} entries live at the end; \
         {evicted} evicted, the most recently used {shortest:?} before (time to live {TTL:?}); \
         {} deadlines scheduled, {} fired",
        s.scheduled, s.fired
    );
    // Each miss put an entry, evicted once, a time to live after its last use.
    assert!(shortest >= TTL && evicted == misses);
}
