//! Graph runs from Python: without the GIL, and cancelled by Ctrl-C.
//!
//! Python handles a signal only on its main thread, and only when that
//! thread runs Python code. A run started on the main thread therefore
//! executes on a helper thread while the main thread waits for it, waking
//! every [`POLL`] to let Python check for signals; when a handler raises
//! (KeyboardInterrupt for SIGINT), the run's cancellation flag is set, the
//! executor stops before its next node, and the handler's exception is
//! raised once the run has stopped (the session stays usable). Runs on
//! other threads release the GIL and run on the calling thread (no signal
//! reaches them).

use crate::errors;
use opforge::graph::{NodeId, Output, Session};
use opforge::{Status, Tensor};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How often the main thread checks for signals while a run is under way.
const POLL: Duration = Duration::from_millis(20);

/// Whether the calling thread is Python's main thread.
fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    static MAIN: OnceLock<(Py<PyAny>, u64)> = OnceLock::new();
    let (get_ident, main) = match MAIN.get() {
        Some(m) => m,
        None => {
            let threading = py.import("threading")?;
            let main: u64 = threading
                .call_method0("main_thread")?
                .getattr("ident")?
                .extract()?;
            let get_ident = threading.getattr("get_ident")?.unbind();
            let _ = MAIN.set((get_ident, main));
            MAIN.get().unwrap_or_else(|| unreachable!("set just above"))
        }
    };
    let me: u64 = get_ident.bind(py).call0()?.extract()?;
    Ok(me == *main)
}

/// Runs `session` (see the module doc): the fetched tensors, the run's
/// error as an `opforge.errors` exception, or the signal handler's
/// exception.
pub fn run_interruptible(
    py: Python<'_>,
    session: &Session,
    feeds: Vec<(Output, Tensor)>,
    fetches: &[Output],
    targets: &[NodeId],
) -> PyResult<Vec<Tensor>> {
    let cancel = AtomicBool::new(false);
    if !on_main_thread(py)? {
        let r = py.detach(|| session.run_cancellable(feeds, fetches, targets, Some(&cancel)));
        return errors::check(py, r, None);
    }
    let mut interrupted: Option<PyErr> = None;
    let result = std::thread::scope(|s| {
        let cancel = &cancel;
        let waiter = std::thread::current();
        let worker = s.spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                session.run_cancellable(feeds, fetches, targets, Some(cancel))
            }));
            waiter.unpark();
            r
        });
        while !worker.is_finished() {
            py.detach(|| std::thread::park_timeout(POLL));
            if interrupted.is_none() && !worker.is_finished() {
                if let Err(e) = py.check_signals() {
                    interrupted = Some(e);
                    cancel.store(true, Ordering::Relaxed);
                }
            }
        }
        match worker.join() {
            Ok(Ok(r)) => r,
            Ok(Err(panic)) | Err(panic) => Err(Status::internal(format!(
                "opforge panicked in a graph run: {} (a bug: please report it)",
                panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into())
            ))),
        }
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    errors::check(py, result, None)
}
