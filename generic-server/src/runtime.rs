//! Where a server's work runs: the multi-threaded runtime with large stacks
//! that [`crate::config::run`] builds, and its blocking pool for long,
//! CPU-bound steps on user data (decoding a large or YAML body), so that
//! they never hold a thread that serves other requests' IO.

use std::sync::OnceLock;

/// Stack of each runtime thread: room for the bounded recursions over user
/// data (decoders, patches, schemas) even in a debug build; only what is
/// touched is ever committed.
pub const STACK_BYTES: usize = 8 * 1024 * 1024;

/// The server's main runtime, once [`crate::config::run`] has started it.
static MAIN: OnceLock<tokio::runtime::Handle> = OnceLock::new();

/// Remembers the current runtime as the one to offload work to.
pub(crate) fn remember_current() {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let _ = MAIN.set(handle);
    }
}

/// Runs `work` on the main runtime's blocking pool (threads of
/// [`STACK_BYTES`]), off the thread that awaits it; inline where no server
/// runtime was started (unit tests). A panic in `work` resumes in the caller.
pub async fn offload<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let Some(main) = MAIN.get() else {
        return work();
    };
    match main.spawn_blocking(work).await {
        Ok(done) => done,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Only a runtime shutting down cancels it.
            Err(e) => panic!("offloaded work did not finish: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offloaded_work_runs_on_a_thread_of_the_main_runtime() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("main-runtime")
            .thread_stack_size(STACK_BYTES)
            .build()
            .unwrap();
        runtime.block_on(async { remember_current() });
        // Awaited from another runtime, as actix's HTTP workers do.
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let name = other.block_on(offload(|| {
            std::thread::current().name().map(str::to_string)
        }));
        assert_eq!(name.as_deref(), Some("main-runtime"));
        let panicked = std::panic::catch_unwind(|| other.block_on(offload(|| panic!("boom"))));
        assert!(panicked.is_err());
    }
}
