//! A clean stop, as kube-apiserver drains: on SIGTERM (or SIGINT) a server
//! first leaves the registry of replicas, so nobody routes to it; its
//! watches then end as a broken stream, which the server above resumes on
//! another replica from the last event; requests in flight finish; and it
//! exits within [`GRACE`]. A leader gives up its lease on the way out.
//! Whatever its threads are doing then (a long computation cannot be
//! cancelled), the process is gone [`HARD_STOP`] after the signal.

use std::sync::{LazyLock, Once};
use std::time::Duration;

use tokio::sync::watch;

/// The longest a stopping server waits for requests in flight.
pub const GRACE: Duration = Duration::from_secs(8);

/// When a stopping process exits even if its work has not finished.
pub const HARD_STOP: Duration = Duration::from_secs(GRACE.as_secs() + 4);

/// Flips to `true` once the process is asked to stop (a signal is
/// process-wide). The sender lives as long as the process.
static DRAINING: LazyLock<watch::Sender<bool>> = LazyLock::new(|| watch::channel(false).0);

/// Starts listening for the stop signals, once per process; called by a
/// server's `main` ([`crate::config::run`]), inside its runtime. A server
/// run inside another program (a test's) leaves the program's signals to it
/// and never drains.
pub fn listen() {
    static LISTENING: Once = Once::new();
    LISTENING.call_once(|| {
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("asked to stop: draining");
            DRAINING.send_replace(true);
            // A thread of its own: it runs even when every runtime thread is busy.
            std::thread::spawn(|| {
                std::thread::sleep(HARD_STOP);
                tracing::warn!(after = ?HARD_STOP, "still running after the grace period: exiting");
                std::process::exit(1);
            });
        });
    });
}

/// Whether the process has been asked to stop.
pub fn is_draining() -> bool {
    *DRAINING.borrow()
}

/// Resolves once the process is asked to stop.
pub async fn draining() {
    let mut rx = DRAINING.subscribe();
    let _ = rx.wait_for(|draining| *draining).await;
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}
