//! The signals an operator sends, caught once at start and kept until exit.
//!
//! Installing the handlers before anything else means no signal is lost
//! between phases (connecting, waiting for the lock, starting the command,
//! supervising it, releasing): each phase asks this one set what arrived.
//! Once installed, none of these signals kills the supervisor by default
//! any more; each phase decides what it means.

use futures::FutureExt;
use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

/// The signals handled: the stop signals and the two user signals.
const HANDLED: [Signal; 6] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// A signal that ends the supervisor's wait for the lock (before CMD runs).
pub fn is_stop(sig: Signal) -> bool {
    matches!(
        sig,
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT
    )
}

/// The shell's status for a process ended by `sig`.
pub fn status_for(sig: Signal) -> u8 {
    u8::try_from(128 + sig as i32).unwrap_or(crate::exit::SOFTWARE)
}

/// Every handled signal's stream.
pub struct Signals {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Installs the handlers (inside the runtime).
    pub fn install() -> std::io::Result<Self> {
        let streams = HANDLED
            .iter()
            .map(|&sig| Ok((sig, signal(SignalKind::from_raw(sig as i32))?)))
            .collect::<std::io::Result<_>>()?;
        Ok(Self { streams })
    }

    /// The next signal that arrives (or arrived since the last call).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a signal is only taken when this returns it.
    pub async fn next(&mut self) -> Signal {
        let waits = self.streams.iter_mut().map(|(sig, stream)| {
            let sig = *sig;
            Box::pin(async move {
                if stream.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
                sig
            })
        });
        futures::future::select_all(waits).await.0
    }

    /// A stop signal that has already arrived, without waiting. Call
    /// after `tokio::task::yield_now()` so that the runtime has read the
    /// signals delivered so far.
    pub fn pending_stop(&mut self) -> Option<Signal> {
        let mut found = None;
        for (sig, stream) in &mut self.streams {
            if stream.recv().now_or_never().flatten().is_some() && found.is_none() && is_stop(*sig)
            {
                found = Some(*sig);
            }
        }
        found
    }
}
