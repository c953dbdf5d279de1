//! Graph runs from Python: without the GIL, and cancelled by Ctrl-C.
//!
//! Python handles a signal only on its main thread, and only when that
//! thread runs Python code. A run started on the main thread is cancelled
//! by Ctrl-C in one of two ways:
//!
//! - **Directly** (the common case, on Unix): while SIGINT's Python handler
//!   is the default one (`signal.default_int_handler`, which raises
//!   KeyboardInterrupt), the main thread runs the graph itself, with a C
//!   handler for SIGINT in front of Python's ([`SigintGuard`]) that sets
//!   the run's cancellation flag and passes the signal on to Python's
//!   handler. The executor stops before its next node; once the run has
//!   stopped, Python runs its handler (KeyboardInterrupt). No thread is
//!   handed the run, so a small run costs no thread wake-ups. Other
//!   signals' Python handlers run when the run ends.
//! - **Through a helper thread** (any other SIGINT handler, or no
//!   sigaction): the run executes on a helper thread (one, kept for the
//!   process: starting a thread per run would cost more than a small run)
//!   while the main thread waits for it, waking every [`POLL`] to let
//!   Python check for signals; when a handler raises, the run's
//!   cancellation flag is set and the handler's exception is raised once
//!   the run has stopped.
//!
//! Either way the session stays usable. Runs on other threads release the
//! GIL and run on the calling thread (no signal reaches them).

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
    #[cfg(unix)]
    if default_sigint(py)? {
        if let Some(guard) = sigint::SigintGuard::install() {
            let r = py
                .detach(|| session.run_cancellable(feeds, fetches, targets, Some(&sigint::CANCEL)));
            drop(guard);
            // KeyboardInterrupt if Ctrl-C came (the run then stopped early).
            py.check_signals()?;
            return errors::check(py, r, None);
        }
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

/// Whether SIGINT's Python handler is `signal.default_int_handler` (it
/// raises KeyboardInterrupt, so a SIGINT may cancel the run at once).
#[cfg(unix)]
fn default_sigint(py: Python<'_>) -> PyResult<bool> {
    static SIGNAL: OnceLock<(Py<PyAny>, Py<PyAny>)> = OnceLock::new();
    let (getsignal, default) = match SIGNAL.get() {
        Some(s) => s,
        None => {
            // `_signal`'s (C) getsignal: `signal.getsignal` also maps the
            // result to an enum, which costs more than the whole check.
            let m = py.import("_signal")?;
            let s = (
                m.getattr("getsignal")?.unbind(),
                m.getattr("default_int_handler")?.unbind(),
            );
            let _ = SIGNAL.set(s);
            SIGNAL
                .get()
                .unwrap_or_else(|| unreachable!("set just above"))
        }
    };
    let current = getsignal.bind(py).call1((libc::SIGINT,))?;
    Ok(current.is(default.bind(py)))
}

/// The C-level SIGINT handler of runs the main thread executes itself.
#[cfg(unix)]
mod sigint {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// The cancellation flag of the run the main thread executes (one at a
    /// time: only the main thread runs this way). Static, so that a
    /// handler running late on another thread never sees freed memory.
    pub static CANCEL: AtomicBool = AtomicBool::new(false);

    /// The handler that was installed before ours (Python's), as an
    /// address: [`on_sigint`] passes every SIGINT on to it.
    static PREVIOUS: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn on_sigint(sig: libc::c_int) {
        CANCEL.store(true, Ordering::SeqCst);
        let prev = PREVIOUS.load(Ordering::SeqCst);
        if prev != 0 {
            // SAFETY: `PREVIOUS` only ever holds the `sa_handler` of the
            // action `SigintGuard::install` found installed, checked there
            // to be a function (not SIG_DFL or SIG_IGN) of the plain
            // one-argument kind (no SA_SIGINFO); a process's signal
            // handlers stay mapped for as long as they can be called.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev) };
            f(sig);
        }
    }

    /// Our SIGINT handler, in front of the one it replaced, until dropped.
    pub struct SigintGuard {
        old: libc::sigaction,
    }

    impl SigintGuard {
        /// Installs [`on_sigint`] (with the cancellation flag cleared) when
        /// SIGINT's current handler is a plain handler function; `None`
        /// otherwise (default action, ignored, or an SA_SIGINFO handler).
        pub fn install() -> Option<SigintGuard> {
            // SAFETY: a zeroed `sigaction` is a valid value of the plain C
            // struct.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: `sigaction` with a null new action only reads the
            // current one into `old`, a valid struct of this frame.
            if unsafe { libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old) } != 0 {
                return None;
            }
            let handler = old.sa_sigaction;
            if handler == libc::SIG_DFL
                || handler == libc::SIG_IGN
                || old.sa_flags & libc::SA_SIGINFO != 0
            {
                return None;
            }
            PREVIOUS.store(handler, Ordering::SeqCst);
            CANCEL.store(false, Ordering::SeqCst);
            let mut new = old;
            new.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
            // SAFETY: `new` is the old action (mask and flags as Python set
            // them) with our handler, an async-signal-safe function (it
            // stores to atomics and calls the handler it replaced).
            if unsafe { libc::sigaction(libc::SIGINT, &new, std::ptr::null_mut()) } != 0 {
                return None;
            }
            Some(SigintGuard { old })
        }
    }

    impl Drop for SigintGuard {
        fn drop(&mut self) {
            // SAFETY: restores the action `install` read (a valid action).
            unsafe {
                libc::sigaction(libc::SIGINT, &self.old, std::ptr::null_mut());
            }
        }
    }
}
