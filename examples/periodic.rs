//! Periodic tasks: fixed rate against fixed delay, cancel, a panicking
//! task, and an executor that keeps a slow callback off the ticks.
//!
//! ```text
//! cargo run --example periodic
//! ```

use hashed_wheel_timer::{HashedWheelTimer, Timeout, TimerError, TokioExecutor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

fn main() -> Result<(), TimerError> {
    // The timer logs a panicking task through `tracing`; show that, and
    // keep the default panic hook's backtrace out of the way.
    tracing_subscriber::fmt().with_target(false).init();
    std::panic::set_hook(Box::new(|_| {}));
    fixed_rate_against_fixed_delay()?;
    cancel_and_panic()?;
    slow_callbacks_on_an_executor()
}

/// The java.util.Timer documentation's case: a task that takes 3 s, every
/// 2 s. On a manual clock, so it runs in no time; the task "takes" 3 s by
/// advancing the clock from inside its run.
fn fixed_rate_against_fixed_delay() -> Result<(), TimerError> {
    for fixed_rate in [true, false] {
        let timer = HashedWheelTimer::builder().manual_clock().build()?;
        let start = timer.now();
        let clock = timer.clone();
        let mut runs = 0;
        let task = move |t: &Timeout| {
            let secs = |at: Instant| (at - start).as_secs();
            let (due, started) = (secs(t.scheduled_execution_time()), secs(clock.now()));
            clock.advance(Duration::from_secs(3));
            println!(
                "  due {due:>2} s, started {started:>2} s, ended {:>2} s",
                secs(clock.now())
            );
            runs += 1;
            if runs == 4 {
                t.cancel();
            }
        };
        let (zero, two) = (Duration::ZERO, Duration::from_secs(2));
        if fixed_rate {
            println!("fixed rate, 2 s period: due 0, 2, 4, 6; late runs come back to back");
            timer.schedule_at_fixed_rate(task, zero, two)?;
        } else {
            println!("fixed delay, 2 s after each run ends: due 0, 5, 10, 15");
            timer.schedule_with_fixed_delay(task, zero, two)?;
        }
        timer.advance(Duration::from_secs(60));
    }
    Ok(())
}

/// Cancel stops later runs; a panic is caught, logged, and stops later
/// runs of that task only.
fn cancel_and_panic() -> Result<(), TimerError> {
    let timer = HashedWheelTimer::builder().manual_clock().build()?;
    let ms = Duration::from_millis;
    let polls = Arc::new(AtomicUsize::new(0));
    let count = polls.clone();
    let poller = timer.schedule_with_fixed_delay(
        move |_| {
            count.fetch_add(1, Ordering::Relaxed);
        },
        ms(0),
        ms(100),
    )?;
    let mut beats = 0;
    let flaky = timer.schedule_at_fixed_rate(
        move |_| {
            beats += 1;
            if beats == 3 {
                panic!("heartbeat failed"); // caught; later runs suppressed
            }
        },
        ms(100),
        ms(100),
    )?;
    timer.advance(ms(1000));
    println!(
        "\nafter 1 s: poller ran {} times and is pending {}; flaky panicked {}; pending timeouts {}",
        polls.load(Ordering::Relaxed),
        poller.is_pending(),
        flaky.is_panicked(),
        timer.pending_timeouts()
    );
    println!("cancel the poller: {}", poller.cancel());
    println!("pending timeouts: {}", timer.pending_timeouts());
    Ok(())
}

/// On the worker, a callback that blocks for 300 ms makes a timeout due
/// 50 ms later wait for it. On tokio's blocking pool it does not.
fn slow_callbacks_on_an_executor() -> Result<(), TimerError> {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    for on_executor in [false, true] {
        let mut builder = HashedWheelTimer::builder();
        if on_executor {
            builder = builder.executor(TokioExecutor::spawn_blocking(runtime.handle().clone()));
        }
        let timer = builder.build()?;
        timer.new_timeout(
            |_| std::thread::sleep(Duration::from_millis(300)),
            Duration::ZERO,
        )?;
        let (tx, rx) = mpsc::channel();
        let clock = timer.clone();
        timer.new_timeout(
            move |t: &Timeout| tx.send(clock.now() - t.deadline()).unwrap(),
            Duration::from_millis(50),
        )?;
        let late = rx.recv().expect("the timeout fired");
        let place = if on_executor {
            "on an executor"
        } else {
            "on the worker"
        };
        println!("\nslow callback {place}: a later timeout fired {late:?} late");
    }
    Ok(())
}
