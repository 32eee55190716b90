//! Spans on the hot path that cost nothing when nobody listens.

use std::future::Future;

use tracing::{Instrument, Span};

/// Runs `fut` inside `span`; without the span's wrapper (an enter and an
/// exit at every poll) when the span is disabled, as it is unless a
/// subscriber wants DEBUG for this crate.
pub(crate) async fn in_span<F: Future>(span: Span, fut: F) -> F::Output {
    if span.is_disabled() {
        fut.await
    } else {
        fut.instrument(span).await
    }
}
