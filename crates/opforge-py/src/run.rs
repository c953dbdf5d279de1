//! Graph runs from Python: without the GIL, and cancelled by Ctrl-C.
//!
//! Python handles a signal only on its main thread, and only when that
//! thread runs Python code. A run started on the main thread therefore
//! executes on a helper thread (one, kept for the process: starting a
//! thread per run would cost more than a small run) while the main thread
//! waits for it, waking every [`POLL`] to let Python check for signals;
//! when a handler raises (KeyboardInterrupt for SIGINT), the run's
//! cancellation flag is set, the executor stops before its next node, and
//! the handler's exception is raised once the run has stopped (the session
//! stays usable). Runs on other threads release the GIL and run on the
//! calling thread (no signal reaches them).

use crate::errors;
use opforge::graph::{NodeId, Output, Session};
use opforge::{Result as OfResult, Status, Tensor};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
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

/// A run handed to the helper thread.
type Job = Box<dyn FnOnce() + Send>;

/// The helper thread's queue, with the id of the process that started it
/// (a child forked from this process has the queue but not the thread:
/// it starts its own).
static HELPER: Mutex<Option<(u32, mpsc::Sender<Job>)>> = Mutex::new(None);

/// Hands `job` to the helper thread (started on first use).
fn submit(job: Job) -> OfResult<()> {
    let mut helper = HELPER.lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    let job = match &*helper {
        Some((p, tx)) if *p == pid => match tx.send(job) {
            Ok(()) => return Ok(()),
            // The thread is gone (it cannot be, short of a panic inside
            // the job guard): start another.
            Err(mpsc::SendError(job)) => job,
        },
        _ => job,
    };
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("opforge-py-run".into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        })
        .map_err(|e| {
            Status::resource_exhausted(format!("cannot start a thread for graph runs: {e}"))
        })?;
    tx.send(job)
        .map_err(|_| Status::internal("the graph-run thread stopped at once"))?;
    *helper = Some((pid, tx));
    Ok(())
}

/// The text of a panic payload.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Runs `session` (see the module doc): the fetched tensors, the run's
/// error as an `opforge.errors` exception, or the signal handler's
/// exception.
pub fn run_interruptible(
    py: Python<'_>,
    session: &Arc<Session>,
    feeds: Vec<(Output, Tensor)>,
    fetches: &[Output],
    targets: &[NodeId],
) -> PyResult<Vec<Tensor>> {
    if !on_main_thread(py)? {
        let r = py.detach(|| session.run_cancellable(feeds, fetches, targets, None));
        return errors::check(py, r, None);
    }
    let cancel = Arc::new(AtomicBool::new(false));
    // Set by the helper when the run is over, before it wakes this thread.
    let done = Arc::new(AtomicBool::new(false));
    let slot: Arc<Mutex<Option<OfResult<Vec<Tensor>>>>> = Arc::new(Mutex::new(None));
    let job: Job = {
        let (session, cancel, done, slot) =
            (session.clone(), cancel.clone(), done.clone(), slot.clone());
        let (fetches, targets) = (fetches.to_vec(), targets.to_vec());
        let waiter = std::thread::current();
        Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                session.run_cancellable(feeds, &fetches, &targets, Some(&cancel))
            }))
            .unwrap_or_else(|panic| {
                Err(Status::internal(format!(
                    "opforge panicked in a graph run: {} (a bug: please report it)",
                    panic_text(&*panic)
                )))
            });
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
            done.store(true, Ordering::Release);
            waiter.unpark();
        })
    };
    errors::check(py, submit(job), None)?;
    let mut interrupted: Option<PyErr> = None;
    while !done.load(Ordering::Acquire) {
        py.detach(|| std::thread::park_timeout(POLL));
        if interrupted.is_none() && !done.load(Ordering::Acquire) {
            if let Err(e) = py.check_signals() {
                interrupted = Some(e);
                cancel.store(true, Ordering::Relaxed);
            }
        }
    }
    let result = slot
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .unwrap_or_else(|| Err(Status::internal("a graph run ended without a result")));
    if let Some(e) = interrupted {
        return Err(e);
    }
    errors::check(py, result, None)
}
