//! `timer.timeout(d, fut)` on a manual clock: `Elapsed` exactly at the
//! deadline, `Ok` when the future wins, and a stopped timer.

mod common;

use common::manual;
use hashed_wheel_timer::{Elapsed, TimeoutFuture};
use std::future::{pending, ready};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_test::{assert_pending, assert_ready, assert_ready_eq, task};

const MS: Duration = Duration::from_millis(1);

#[test]
fn elapsed_exactly_at_the_deadline() {
    let timer = manual(MS);
    let mut call = task::spawn(timer.timeout(MS * 5, pending::<()>()));
    assert_pending!(call.poll());
    timer.advance(MS * 4);
    assert!(!call.is_woken());
    assert_pending!(call.poll());
    timer.advance(MS);
    assert!(call.is_woken());
    let err = assert_ready!(call.poll()).unwrap_err();
    assert!(!err.is_shutdown());
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn ok_if_the_inner_future_finishes_first() {
    let timer = manual(MS);
    let (tx, rx) = oneshot::channel();
    let mut call = task::spawn(timer.timeout(MS * 5, rx));
    assert_pending!(call.poll());
    timer.advance(MS * 3);
    tx.send(7).unwrap();
    assert!(call.is_woken());
    assert_ready_eq!(call.poll(), Ok(Ok(7)));
    drop(call);
    assert_eq!(timer.pending_timeouts(), 0, "the deadline was cancelled");
}

#[test]
fn the_inner_future_is_polled_first_so_it_wins_a_tie() {
    let timer = manual(MS);
    let (tx, rx) = oneshot::channel();
    let mut call = task::spawn(timer.timeout(MS * 5, rx));
    assert_pending!(call.poll());
    timer.advance(MS * 5);
    tx.send("reply").unwrap();
    assert_ready_eq!(call.poll(), Ok(Ok("reply")));
}

#[test]
fn a_ready_future_never_touches_the_wheel() {
    let timer = manual(MS);
    let mut call = task::spawn(timer.timeout(MS * 5, ready(1)));
    assert_eq!(timer.pending_timeouts(), 0);
    assert_ready_eq!(call.poll(), Ok(1));
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn timeout_at_uses_the_instant() {
    let timer = manual(MS);
    let at = timer.now() + MS * 3;
    let mut call = task::spawn(timer.timeout_at(at, pending::<()>()));
    assert_eq!(call.deadline(), at);
    assert_pending!(call.poll());
    timer.advance(MS * 2);
    assert_pending!(call.poll());
    timer.advance(MS);
    assert!(assert_ready!(call.poll()).is_err());
}

#[test]
fn dropping_it_cancels_the_deadline() {
    let timer = manual(MS);
    let mut call = task::spawn(timer.timeout(MS * 5, pending::<()>()));
    assert_pending!(call.poll());
    assert_eq!(timer.pending_timeouts(), 1);
    drop(call);
    assert_eq!(timer.pending_timeouts(), 0);
}

#[test]
fn it_gives_the_inner_future_back() {
    let timer = manual(MS);
    let (tx, rx) = oneshot::channel::<u8>();
    let mut call = timer.timeout(MS * 5, rx);
    assert!(!call.get_ref().is_terminated());
    call.get_mut().close();
    let mut rx = call.into_inner();
    assert!(rx.try_recv().is_err());
    assert!(tx.is_closed());
}

#[test]
fn after_stop_it_ends_with_an_elapsed_that_says_shutdown() {
    let timer = manual(MS);
    let mut pending_call = task::spawn(timer.timeout(MS * 50, pending::<()>()));
    assert_pending!(pending_call.poll());
    timer.stop().unwrap();
    assert!(pending_call.is_woken());
    // The call keeps its deadline (waited out on the default timer), so a
    // retry loop around it does not spin.
    assert_pending!(pending_call.poll());
    let err = futures::executor::block_on(pending_call.into_inner()).unwrap_err();
    assert!(err.is_shutdown());
    assert_eq!(err.to_string(), "the timer was stopped before the deadline");

    let mut new_call = task::spawn(timer.timeout(MS * 50, pending::<()>()));
    assert_pending!(new_call.poll());
    let err = futures::executor::block_on(new_call.into_inner()).unwrap_err();
    assert!(err.is_shutdown());
    let mut ready_call = task::spawn(timer.timeout(MS * 50, ready(3)));
    assert_ready_eq!(ready_call.poll(), Ok(3), "a ready future still wins");
}

#[test]
fn elapsed_is_an_error_with_a_message() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
    let timer = manual(MS);
    let mut call = task::spawn(timer.timeout(MS, pending::<()>()));
    assert_pending!(call.poll());
    timer.advance(MS);
    let err: Elapsed = assert_ready!(call.poll()).unwrap_err();
    is_error(&err);
    assert_eq!(err.to_string(), "deadline has elapsed");
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert_eq!(boxed.to_string(), "deadline has elapsed");
}

#[test]
fn it_is_send_for_send_futures() {
    fn check<T: Send>(_: &T) {}
    let timer = manual(MS);
    let call: TimeoutFuture<_> = timer.timeout(MS, ready(()));
    check(&call);
}
