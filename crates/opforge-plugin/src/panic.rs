//! Panics never cross the boundary (rule R10): every callback the SDK gives
//! the host runs its body through [`guard`], which catches a panic and turns
//! it into `OPFORGE_INTERNAL` with a message naming the library, the
//! callback (kernel, shape function, ... and its op) and where the panic
//! happened, read by a panic hook the SDK installs once.
//!
//! The hook records the location and message in a thread-local only while a
//! guarded callback runs, and then prints nothing; any other panic goes to
//! the previous hook unchanged. In a `cdylib` the hook is the library's own
//! (its copy of `std`), so the host's hook is untouched.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// How many guarded callbacks run on this thread (nested: a
    /// parallel_for body inside a compute on the calling thread).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The location and message of the last panic inside a guard.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs the SDK's panic hook (once per copy of the SDK), chained to the
/// previous hook for panics outside guarded callbacks.
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
                LAST.with(|last| *last.borrow_mut() = Some(text));
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
    DEPTH.with(|d| d.set(d.get() + 1));
    LAST.with(|last| last.borrow_mut().take());
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    result.map_err(|payload| {
        let recorded = LAST.with(|last| last.borrow_mut().take());
        // Dropping the payload may itself panic (a payload with a panicking
        // Drop); catch that too rather than unwind into the host.
        let text = recorded.unwrap_or_else(|| payload_text(&*payload));
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(payload)));
        text
    })
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
