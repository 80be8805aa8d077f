//! `tower::timeout`, name for name, on the wheel: change the `use` line and
//! nothing else. [`Timeout::new`] (also what a [`TimeoutLayer`] wraps with)
//! takes tower's arguments and runs on the [`current_timer`](crate::current_timer)
//! when it is called, as tower's run on the ambient tokio runtime.

use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service};

pub use super::ResponseFuture;
use super::{BoxError, TimeoutService};

/// tower's `timeout::error`.
pub mod error {
    pub use tower::timeout::error::Elapsed;
}

/// tower's `timeout::future`.
pub mod future {
    pub use super::ResponseFuture;
}

/// tower's `TimeoutLayer`: each service it wraps is a [`Timeout::new`], on the
/// [`current_timer`](crate::current_timer) then.
#[derive(Clone, Debug)]
pub struct TimeoutLayer(Duration);

impl TimeoutLayer {
    /// A layer that gives each request `timeout`; a `const fn`, as tower's.
    pub const fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer(timeout)
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout::new(inner, self.0)
    }
}

/// tower's `timeout::Timeout`: a [`TimeoutService`] made with tower's
/// arguments.
#[derive(Clone, Debug)]
pub struct Timeout<S>(TimeoutService<S>);

impl<S> Timeout<S> {
    /// Wraps `inner`, giving each request `timeout` on the
    /// [`current_timer`](crate::current_timer) when it is made.
    pub fn new(inner: S, timeout: Duration) -> Timeout<S> {
        Timeout(TimeoutService::new(inner, crate::current_timer(), timeout))
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        self.0.get_ref()
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        self.0.get_mut()
    }

    /// The wrapped service, by value.
    pub fn into_inner(self) -> S {
        self.0.into_inner()
    }
}

impl<S, Request> Service<Request> for Timeout<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> ResponseFuture<S::Future> {
        self.0.call(request)
    }
}
