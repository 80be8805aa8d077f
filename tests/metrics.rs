//! The `metrics` feature: the timer's driver publishes its figures through
//! the `metrics` facade, read here with `metrics-util`'s debugging recorder.
#![cfg(feature = "metrics")]

use hashed_wheel_timer::HashedWheelTimer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use std::collections::HashMap;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

const GAUGES: [&str; 7] = [
    "hashed_wheel_timer_pending",
    "hashed_wheel_timer_scheduled",
    "hashed_wheel_timer_fired",
    "hashed_wheel_timer_cancelled",
    "hashed_wheel_timer_stopped",
    "hashed_wheel_timer_driver_wakeups",
    "hashed_wheel_timer_driver_busy_seconds",
];
const LATENESS: &str = "hashed_wheel_timer_lateness_seconds";

/// What a timer labelled `thread` published: gauges by name, and the
/// lateness histogram's values (which a snapshot drains) added to `lateness`.
fn read(snapshotter: &Snapshotter, thread: &str, lateness: &mut Vec<f64>) -> HashMap<String, f64> {
    let mut gauges = HashMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let labels: Vec<_> = key.labels().map(|l| (l.key(), l.value())).collect();
        if labels != [("thread", thread)] {
            continue;
        }
        let name = key.name().to_owned();
        assert!(name.starts_with("hashed_wheel_timer_"), "{name}");
        match (kind, value) {
            (MetricKind::Gauge, DebugValue::Gauge(v)) => {
                assert!(GAUGES.contains(&name.as_str()), "{name} undocumented");
                gauges.insert(name, v.into_inner());
            }
            (MetricKind::Histogram, DebugValue::Histogram(values)) => {
                assert_eq!(name, LATENESS);
                lateness.extend(values.into_iter().map(|v| v.into_inner()));
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    gauges
}

/// On the manual clock, where `advance` is the driver, the figures appear in
/// a recorder local to the thread that advances, and match `stats()`.
#[test]
fn the_driver_publishes_gauges_and_each_fires_lateness() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let mut lateness = Vec::new();
    let timer = HashedWheelTimer::builder()
        .manual_clock()
        .thread_name("metrics-manual")
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        let clock = timer.clone();
        timer
            .new_timeout(move |_| clock.advance(MS * 30), MS * 10)
            .unwrap();
        timer.new_timeout(|_| {}, MS * 20).unwrap(); // 20 ms late
        timer.new_timeout(|_| {}, MS * 50).unwrap().cancel();
        timer.new_timeout(|_| {}, MS * 500).unwrap();
        timer.advance(MS * 200);
    });
    let gauges = read(&snapshotter, "metrics-manual", &mut lateness);
    let s = timer.stats();
    let expected = [
        ("hashed_wheel_timer_pending", 1.0),
        ("hashed_wheel_timer_scheduled", 4.0),
        ("hashed_wheel_timer_fired", 2.0),
        ("hashed_wheel_timer_cancelled", 1.0),
        ("hashed_wheel_timer_stopped", 0.0),
        ("hashed_wheel_timer_driver_wakeups", 0.0),
    ];
    for (name, value) in expected {
        assert_eq!(gauges.get(name), Some(&value), "{name}: {gauges:?}");
    }
    let busy = gauges["hashed_wheel_timer_driver_busy_seconds"];
    assert!(busy > 0.0 && busy <= s.driver_busy.as_secs_f64(), "{busy}");
    lateness.sort_by(f64::total_cmp);
    assert_eq!(lateness, [0.0, 0.02], "each fire's lateness, in seconds");

    // `stop()` publishes what it stopped.
    metrics::with_local_recorder(&recorder, || drop(timer.stop().unwrap()));
    let gauges = read(&snapshotter, "metrics-manual", &mut lateness);
    assert_eq!(gauges["hashed_wheel_timer_stopped"], 1.0, "{gauges:?}");
    assert_eq!(gauges["hashed_wheel_timer_pending"], 0.0, "{gauges:?}");
}

/// A timer on the real clock publishes from its own thread into the global
/// recorder, as a Prometheus exporter installs it: no user code.
#[test]
fn a_worker_thread_publishes_to_the_global_recorder() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let timer = HashedWheelTimer::builder()
        .thread_name("metrics-worker")
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Far enough off that the driver sleeps before it fires them: a driver thread held off the
    // CPU past a 10 ms deadline fired all three in its first turn and woke up never (a CI run).
    for _ in 0..3 {
        let tx = tx.clone();
        timer
            .new_timeout(move |_| tx.send(()).unwrap(), MS * 500)
            .unwrap();
    }
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(60)).expect("fired");
    }
    let mut lateness = Vec::new();
    let mut gauges = HashMap::new();
    for _ in 0..6000 {
        gauges.extend(read(&snapshotter, "metrics-worker", &mut lateness));
        if gauges.get("hashed_wheel_timer_fired") == Some(&3.0) && lateness.len() == 3 {
            break;
        }
        std::thread::sleep(MS * 10);
    }
    assert_eq!(
        gauges.get("hashed_wheel_timer_fired"),
        Some(&3.0),
        "{gauges:?}"
    );
    assert_eq!(gauges.get("hashed_wheel_timer_pending"), Some(&0.0));
    assert!(
        gauges["hashed_wheel_timer_driver_wakeups"] >= 1.0,
        "{gauges:?}"
    );
    assert!(gauges["hashed_wheel_timer_driver_busy_seconds"] > 0.0);
    assert_eq!(lateness.len(), 3, "{lateness:?}");
    assert!(
        lateness.iter().all(|&l| (0.0..60.0).contains(&l)),
        "{lateness:?}"
    );
}
