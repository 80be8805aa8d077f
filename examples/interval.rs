//! An `Interval` ticking every 100 ms, with one tick's work taking 250 ms,
//! under each `MissedTickBehavior`; then an interval as a `Stream`.
//!
//! `cargo run --example interval`

use futures::StreamExt;
use hashed_wheel_timer::MissedTickBehavior;
use std::time::Duration;

const PERIOD: Duration = Duration::from_millis(100);

async fn show(behavior: MissedTickBehavior) {
    let mut interval = hashed_wheel_timer::interval(PERIOD);
    interval.set_missed_tick_behavior(behavior);
    let start = interval.tick().await; // the first tick is immediate
    let mut line = format!("{:<6} due at (ms):    0", format!("{behavior:?}"));
    for n in 1..8 {
        let due = interval.tick().await;
        line += &format!(" {:>4}", (due - start).as_millis());
        if n == 1 {
            // This tick's work overruns: the ticks due at 200 and 300 ms
            // are missed.
            hashed_wheel_timer::sleep(Duration::from_millis(250)).await;
            line += "*";
        }
    }
    println!("{line}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!("period {PERIOD:?}; * = work took 250 ms after that tick");
    for behavior in [
        MissedTickBehavior::Burst,
        MissedTickBehavior::Delay,
        MissedTickBehavior::Skip,
    ] {
        show(behavior).await;
    }

    let start = hashed_wheel_timer::default_timer().now();
    let ticks: Vec<_> = hashed_wheel_timer::interval_at(start, Duration::from_millis(20))
        .take(5)
        .map(|due| (due - start).as_millis())
        .collect()
        .await;
    println!("as a Stream, every 20 ms: {ticks:?}");

    match hashed_wheel_timer::try_interval(Duration::ZERO) {
        Ok(_) => unreachable!(),
        Err(e) => println!("a zero period is an error: {e}"),
    }
}
