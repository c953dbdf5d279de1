//! Panics never cross the boundary (rule R10): every callback the SDK gives
//! the host runs its body through a guard (`catch` below), which catches a panic and turns
//! it into `OPFORGE_INTERNAL` with a message naming the library, the
//! callback (kernel, shape function, ... and its op) and where the panic
//! happened, read by a panic hook the SDK installs once.
//!
//! The hook records the location and message only while a guarded callback
//! runs on the panicking thread, and then prints nothing; any other panic
//! goes to the previous hook unchanged. In a `cdylib` the hook is the
//! library's own (its copy of `std`), so the host's hook is untouched.
//!
//! The SDK's thread-locals are plain integers without destructors: a
//! thread-local with a destructor would make glibc pin the library in
//! memory for as long as the thread lives (`__cxa_thread_atexit_impl`), so
//! the host could not unmap it at unload. The recorded texts live in a
//! global table keyed by a per-thread token instead.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

thread_local! {
    /// How many guarded callbacks run on this thread (nested: a
    /// parallel_for body inside a compute on the calling thread).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// This thread's token in `LAST` (0: none yet).
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

/// The next thread token.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
/// The location and message of the last panic inside a guard, per thread
/// token.
static LAST: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());

static HOOK: Once = Once::new();

fn token() -> u64 {
    TOKEN.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

fn last() -> MutexGuard<'static, Vec<(u64, String)>> {
    // Nothing panics while holding the lock; a poisoned lock is still fine.
    LAST.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes this thread's recorded panic text.
fn take_last() -> Option<String> {
    let me = token();
    let mut last = last();
    let i = last.iter().position(|(t, _)| *t == me)?;
    Some(last.swap_remove(i).1)
}

/// Installs the SDK's panic hook (once per copy of the SDK), chained to the
/// previous hook for panics outside guarded callbacks.
#[inline]
pub fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if DEPTH.with(Cell::get) > 0 {
                let location = info
                    .location()
                    .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                    .unwrap_or_else(|| "an unknown location".to_string());
                let text = format!("{location}: {}", payload_text(info.payload()));
                let me = token();
                let mut last = last();
                last.retain(|(t, _)| *t != me);
                last.push((me, text));
            } else {
                previous(info);
            }
        }));
    });
}

/// The text of a panic payload (`&str` or `String`, else a placeholder).
pub fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic payload that is not a string".to_string()
    }
}

/// Runs `f`, catching a panic: `Err(text)` is "LOCATION: MESSAGE" of the
/// panic (from the hook; the payload alone if the hook did not see it).
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    install_hook();
    // One thread-local lookup (a call into the dynamic loader's TLS
    // resolver in a cdylib) for both updates.
    let result = DEPTH.with(|d| {
        d.set(d.get() + 1);
        let result = panic::catch_unwind(AssertUnwindSafe(f));
        d.set(d.get() - 1);
        result
    });
    result.map_err(|payload| {
        let recorded = take_last();
        // Dropping the payload may itself panic (a payload with a panicking
        // Drop); catch that too rather than unwind into the host.
        let text = recorded.unwrap_or_else(|| payload_text(&*payload));
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(payload)));
        text
    })
}

/// A panic caught by [`catch_fast`]: its payload, turned into text only
/// when asked ([`text`](Caught::text), out of line).
pub(crate) struct Caught(Box<dyn Any + Send>);

impl Caught {
    /// "LOCATION: MESSAGE" of the panic, as [`catch`] gives it.
    #[cold]
    #[inline(never)]
    pub(crate) fn text(self) -> String {
        let payload = self.0;
        let recorded = take_last();
        // Dropping the payload may itself panic (a payload with a panicking
        // Drop); catch that too rather than unwind into the host.
        let text = recorded.unwrap_or_else(|| payload_text(&*payload));
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(payload)));
        text
    }
}

/// [`catch`] for the dispatch hot path (a kernel's compute): inlined into
/// its caller, and the payload is turned into text only after a panic
/// ([`Caught::text`]). A call that does not panic costs the hook's `Once`
/// check, one thread-local lookup and the two depth updates:
/// `catch_unwind` itself costs nothing until something unwinds.
#[inline(always)]
pub(crate) fn catch_fast<R>(f: impl FnOnce() -> R) -> Result<R, Caught> {
    install_hook();
    // One thread-local lookup (a call into the dynamic loader's TLS
    // resolver in a cdylib) for both updates.
    let depth: *const Cell<u32> = DEPTH.with(|d| d as *const Cell<u32>);
    // SAFETY: `depth` is this thread's DEPTH, a const-initialised
    // thread-local without a destructor, so its storage stays valid for the
    // thread's whole life, and this function (and `f`) runs on this thread;
    // the cell is only ever used through shared references.
    let depth = unsafe { &*depth };
    depth.set(depth.get() + 1);
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    depth.set(depth.get() - 1);
    result.map_err(Caught)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_reports_location_and_message() {
        let err = catch(|| -> u32 { panic!("boom {}", 7) }).unwrap_err();
        assert!(err.contains("src/panic.rs:"), "{err}");
        assert!(err.ends_with(": boom 7"), "{err}");
        assert_eq!(catch(|| 5), Ok(5));
    }

    #[test]
    fn catch_fast_reports_location_and_message() {
        let err = catch_fast(|| -> u32 { panic!("fast {}", 8) })
            .expect_err("caught")
            .text();
        assert!(err.contains("src/panic.rs:"), "{err}");
        assert!(err.ends_with(": fast 8"), "{err}");
        assert_eq!(catch_fast(|| 5).ok(), Some(5));
        // The depth is back to zero: a later unguarded panic reaches the
        // previous hook (not recorded here).
        assert_eq!(DEPTH.with(Cell::get), 0);
    }

    #[test]
    fn nested_catch_keeps_working() {
        let outer = catch(|| {
            let inner = catch(|| -> () { panic!("inner") }).unwrap_err();
            assert!(inner.ends_with(": inner"));
            panic!("outer")
        })
        .unwrap_err();
        assert!(outer.ends_with(": outer"), "{outer}");
    }
}
