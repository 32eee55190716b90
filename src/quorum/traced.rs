//! The spans of the hot path.

use std::future::Future;

use tracing::{Instrument, Span};

/// Runs `fut` inside `span`. (Skipping the wrapper when the span is
/// disabled saved 0.4 % of the instructions of a lock cycle, within
/// callgrind's spread between runs: BENCHMARKS.md.)
pub(crate) async fn in_span<F: Future>(span: Span, fut: F) -> F::Output {
    fut.instrument(span).await
}
