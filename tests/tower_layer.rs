//! `TimeoutLayer` (feature `tower`): slow, fast and failing inner
//! services, readiness, and the error types, on the manual clock and on a
//! paused tokio clock.
#![cfg(feature = "tower")]

mod common;

use common::manual;
use hashed_wheel_timer::tower::TimeoutService;
use hashed_wheel_timer::{HashedWheelTimer, TimeoutLayer};
use std::convert::Infallible;
use std::future::{pending, ready, Ready};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio_test::{assert_pending, assert_ready, task};
use tower::timeout::error::Elapsed;
use tower::{service_fn, BoxError, Layer, Service, ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);

#[derive(Debug, PartialEq)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Refused {}

#[test]
fn a_slow_call_fails_with_elapsed_at_the_deadline_and_not_before() {
    let timer = manual(MS);
    let mut svc = TimeoutLayer::new(timer.clone(), 10 * MS)
        .layer(service_fn(|_: ()| pending::<Result<(), Infallible>>()));
    let mut call = task::spawn(svc.call(()));
    assert_pending!(call.poll());
    timer.advance(9 * MS);
    assert_pending!(call.poll(), "early");
    timer.advance(MS);
    assert!(call.is_woken());
    let err = assert_ready!(call.poll()).unwrap_err();
    assert!(
        err.is::<Elapsed>(),
        "a BoxError holding tower's Elapsed: {err}"
    );
    assert_eq!(err.to_string(), "request timed out", "tower's message");
    assert_eq!(timer.stats().fired, 1);
}

#[test]
fn a_fast_call_passes_its_response_and_leaves_no_deadline_behind() {
    let timer = manual(MS);
    let mut svc = TimeoutLayer::new(timer.clone(), 10 * MS)
        .layer(service_fn(|n: u32| ready(Ok::<_, Infallible>(n * 2))));
    let mut call = task::spawn(svc.call(21));
    assert_eq!(assert_ready!(call.poll()).unwrap(), 42);
    assert_eq!(
        timer.stats().scheduled,
        0,
        "ready at once: the wheel was not touched"
    );
}

#[test]
fn a_call_answered_before_the_deadline_cancels_it() {
    let timer = manual(MS);
    let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
    let mut rx = Some(rx);
    let mut svc = TimeoutLayer::new(timer.clone(), 10 * MS).layer(service_fn(move |_: ()| {
        let rx = rx.take().unwrap();
        async move { Ok::<_, Infallible>(rx.await.unwrap()) }
    }));
    let mut call = task::spawn(svc.call(()));
    assert_pending!(call.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    timer.advance(5 * MS);
    tx.send(7).unwrap();
    assert_eq!(assert_ready!(call.poll()).unwrap(), 7);
    drop(call);
    assert_eq!(timer.pending_timeouts(), 0);
    timer.advance(20 * MS);
    assert_eq!(timer.stats().fired, 0);
}

#[test]
fn the_inner_services_own_error_passes_through_unchanged() {
    let timer = manual(MS);
    let mut svc =
        TimeoutLayer::new(timer, 10 * MS).layer(service_fn(|_: ()| ready(Err::<(), _>(Refused))));
    let mut call = task::spawn(svc.call(()));
    let err = assert_ready!(call.poll()).unwrap_err();
    assert_eq!(err.downcast_ref::<Refused>(), Some(&Refused));
    assert!(!err.is::<Elapsed>());
}

/// A service that is not ready until told, then fails its readiness.
struct Gate {
    open: bool,
}

impl Service<()> for Gate {
    type Response = ();
    type Error = Refused;
    type Future = Ready<Result<(), Refused>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Refused>> {
        if self.open {
            Poll::Ready(Err(Refused))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, _: ()) -> Self::Future {
        ready(Ok(()))
    }
}

#[test]
fn readiness_is_the_inner_services() {
    let timer = manual(MS);
    let mut svc: TimeoutService<Gate> =
        TimeoutLayer::new(timer.clone(), MS).layer(Gate { open: false });
    let mut t = task::spawn(());
    assert!(t.enter(|cx, _| svc.poll_ready(cx)).is_pending());
    timer.advance(10 * MS);
    assert!(
        t.enter(|cx, _| svc.poll_ready(cx)).is_pending(),
        "no deadline on readiness"
    );
    svc.get_mut().open = true;
    let err = match t.enter(|cx, _| svc.poll_ready(cx)) {
        Poll::Ready(Err(e)) => e,
        other => panic!(
            "expected the inner error, got {:?}",
            other.map(|r| r.is_ok())
        ),
    };
    assert!(err.is::<Refused>());
}

#[tokio::test(start_paused = true)]
async fn through_service_builder_on_a_paused_tokio_clock() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(TimeoutLayer::new(timer.clone(), Duration::from_millis(100)))
        .service(service_fn(|ms: u64| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, BoxError>(ms)
        }));
    let start = tokio::time::Instant::now();
    assert_eq!(svc.ready().await.unwrap().call(99).await.unwrap(), 99);
    let err = svc.ready().await.unwrap().call(101).await.unwrap_err();
    assert!(err.is::<Elapsed>());
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(199),
        "99 ms, then the 100 ms deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_call_on_a_stopped_timer_still_gets_its_time_then_fails() {
    let timer = HashedWheelTimer::builder().tokio_clock().build().unwrap();
    let mut svc = TimeoutLayer::new(timer.clone(), Duration::from_millis(100))
        .layer(service_fn(|_: ()| pending::<Result<(), Infallible>>()));
    let call = svc.call(());
    timer.stop().unwrap();
    let err = call.await.unwrap_err();
    assert!(err.is::<Elapsed>(), "tower's error, as tower's layer gives");
    assert!(timer.is_shutdown(), "it ended after the timer stopped");
}
