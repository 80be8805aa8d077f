//! Sleeping on the wheel: the default timer, your own timer, no runtime at
//! all, and a deadline pushed back (an idle timeout).
//!
//! `cargo run --example sleep`

use hashed_wheel_timer::HashedWheelTimer;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    // The process-wide default timer: no setup.
    let start = Instant::now();
    hashed_wheel_timer::sleep(Duration::from_millis(100)).await;
    println!("default timer: slept 100 ms, took {:?}", start.elapsed());

    // Your own timer, say with Netty's coarse 10 ms ticks.
    let timer = HashedWheelTimer::builder()
        .tick_duration(Duration::from_millis(10))
        .thread_name("example-timer")
        .build()
        .expect("valid settings");
    let start = Instant::now();
    timer.sleep_until(start + Duration::from_millis(55)).await;
    println!(
        "10 ms ticks:   slept until +55 ms, took {:?} (the end of its tick)",
        start.elapsed()
    );

    // Many sleeps at once share the one timer thread.
    let start = Instant::now();
    let sleeps: Vec<_> = (1..=1000u64)
        .map(|i| tokio::spawn(hashed_wheel_timer::sleep(Duration::from_micros(i * 100))))
        .collect();
    for sleep in sleeps {
        sleep.await.expect("task");
    }
    println!(
        "1000 sleeps of 0.1..100 ms: all done after {:?}",
        start.elapsed()
    );

    // An idle timeout: each "packet" pushes the deadline back; reset keeps
    // the wheel entry, so pushing costs nothing.
    let start = Instant::now();
    let mut idle = hashed_wheel_timer::sleep(Duration::from_millis(50));
    for packet in 1..=5 {
        tokio::select! {
            _ = &mut idle => unreachable!("a packet comes every 20 ms"),
            _ = hashed_wheel_timer::sleep(Duration::from_millis(20)) => {
                idle.reset(Instant::now() + Duration::from_millis(50));
                println!("packet {packet} at {:?}: idle deadline pushed back", start.elapsed());
            }
        }
    }
    idle.await;
    println!("no packet for 50 ms: idle timeout at {:?}", start.elapsed());

    // No runtime at all: the timer thread wakes the blocked thread.
    let start = Instant::now();
    std::thread::spawn(|| {
        futures::executor::block_on(hashed_wheel_timer::sleep(Duration::from_millis(30)))
    })
    .join()
    .expect("thread");
    println!(
        "block_on, no runtime: slept 30 ms, took {:?}",
        start.elapsed()
    );
}
