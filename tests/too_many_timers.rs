//! More than `TOO_MANY_TIMERS` live timers logs one error, as Netty does.
//! Its own test binary: the live-timer count is process-wide.

use hashed_wheel_timer::{HashedWheelTimer, TOO_MANY_TIMERS};
use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn errors(&self) -> usize {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|l| l.contains("ERROR") && l.contains("too many HashedWheelTimer"))
            .count()
    }
}

#[test]
fn one_error_when_more_than_64_timers_are_live() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let manual = || HashedWheelTimer::builder().manual_clock().build().unwrap();
    let mut timers: Vec<_> = (0..TOO_MANY_TIMERS).map(|_| manual()).collect();
    assert_eq!(captured.errors(), 0, "64 timers are fine");
    // Clones are the same timer and do not count.
    let clones: Vec<_> = timers.iter().map(HashedWheelTimer::clone).collect();
    assert_eq!(captured.errors(), 0);
    timers.push(manual());
    assert_eq!(captured.errors(), 1, "the 65th logs an error");
    timers.push(manual());
    assert_eq!(captured.errors(), 1, "only once");
    drop(clones);
}
