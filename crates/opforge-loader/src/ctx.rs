//! What the three bridges (kernel, shape, gradient) share about the
//! contexts they lend to plugin callbacks and the handles those contexts
//! hand out:
//!
//! - **The thread's current context (R9).** A context pointer
//!   (`OpforgeKernelInit*`, `OpforgeKernelCtx*`, `OpforgeShapeCtx*`,
//!   `OpforgeGradCtx*`) is only ever dereferenced after it was found to be
//!   the context the host lent to the callback running on the calling
//!   thread: [`lend`] records it (address and kind) in a thread-local for
//!   the span of the callback, and [`claim`] checks a host function's
//!   pointer against it before anything reads through the pointer. A
//!   forged pointer, one of another thread, of a finished callback, or of
//!   another kind is INVALID_ARGUMENT (or the function's failure value),
//!   never a dereference.
//! - **Exclusive use.** A claim also *takes* the thread's context until the
//!   host function returns: any plugin code the host function runs meanwhile
//!   (a `parallel_for` work function on the calling thread, a foreign
//!   output's release callback, a nested kernel, shape or gradient
//!   callback, which lends a context of its own) finds no context to use.
//!   So while a host function holds the `&mut` it made from a context, no
//!   other host function can make another one: that is the argument of
//!   every `// SAFETY:` that turns a context pointer into a reference.
//! - **Handles of one call (R7).** Shape, dim and value handles carry the
//!   [`Epoch`] of the callback that made them in their high 32 bits: a
//!   handle kept from an earlier call (or taken from another context) is
//!   refused even when its index is valid in the new call.
//! - **[`host_fn!`].** Every `extern "C"` function of the
//!   kernel, shape and gradient tables is written through this macro: one
//!   place for the panic guard (R10), the context check and claim, and the
//!   status handling (R8).

use opforge_abi::{OpforgeShape, OPFORGE_NO_HANDLE};
use opforge_core::{Result, Status};
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// The kinds of context the host lends to plugin callbacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CtxKind {
    /// `OpforgeKernelInit*`: a kernel's create.
    KernelInit,
    /// `OpforgeKernelCtx*`: a kernel's compute.
    Kernel,
    /// `OpforgeShapeCtx*`: a shape function.
    Shape,
    /// `OpforgeGradCtx*`: a gradient callback.
    Grad,
}

impl CtxKind {
    /// The header's name of the context type.
    fn type_name(self) -> &'static str {
        match self {
            CtxKind::KernelInit => "OpforgeKernelInit",
            CtxKind::Kernel => "OpforgeKernelCtx",
            CtxKind::Shape => "OpforgeShapeCtx",
            CtxKind::Grad => "OpforgeGradCtx",
        }
    }

    /// The callback a context of this kind is passed to.
    fn callback(self) -> &'static str {
        match self {
            CtxKind::KernelInit => "a kernel's create",
            CtxKind::Kernel => "a kernel's compute",
            CtxKind::Shape => "a shape function",
            CtxKind::Grad => "a gradient function",
        }
    }
}

/// The context plugin code on this thread may use now (`addr` 0: none).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Current {
    addr: usize,
    kind: Option<CtxKind>,
}

impl Current {
    const NONE: Current = Current {
        addr: 0,
        kind: None,
    };
}

thread_local! {
    static CURRENT: Cell<Current> = const { Cell::new(Current::NONE) };
}

/// A context lent to the plugin callback about to run on this thread; the
/// loan ends when this drops (the previous context, if any, is current
/// again).
#[must_use = "the loan ends when the guard drops"]
pub(crate) struct Lent {
    ptr: *const (),
    prev: Current,
}

/// Lends `ctx` (what a context pointer of `kind` points to) to the
/// callback the caller runs next on this thread: pass [`Lent::ptr`] to it,
/// and keep the guard until it returns.
pub(crate) fn lend<T>(ctx: &T, kind: CtxKind) -> Lent {
    let ptr = (ctx as *const T).cast::<()>();
    let prev = CURRENT.replace(Current {
        addr: ptr.addr(),
        kind: Some(kind),
    });
    Lent { ptr, prev }
}

impl Lent {
    /// The context pointer to pass to the callback.
    pub(crate) fn ptr<P>(&self) -> *mut P {
        self.ptr.cast_mut().cast()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        CURRENT.set(self.prev);
    }
}

/// A host function's hold on the context the calling thread's callback
/// was lent: while it lives, no context is current on the thread (see the
/// module's documentation); dropping it makes the context current again.
#[must_use = "the claim ends when the guard drops"]
pub(crate) struct Claim {
    ctx: Current,
}

impl Drop for Claim {
    fn drop(&mut self) {
        CURRENT.set(self.ctx);
    }
}

/// Claims context `p` of `kind` for one host function: Ok only if `p` is
/// the context lent to the callback running on this thread, of this kind,
/// and no other host function holds it. Reads nothing through `p`.
pub(crate) fn claim<P>(p: *const P, kind: CtxKind) -> Result<Claim> {
    let current = CURRENT.get();
    let addr = p.addr();
    if addr != 0 && current.addr == addr && current.kind == Some(kind) {
        CURRENT.set(Current::NONE);
        return Ok(Claim { ctx: current });
    }
    Err(refusal(addr, kind, current))
}

/// Why context pointer `addr` of `kind` was refused.
#[cold]
fn refusal(addr: usize, kind: CtxKind, current: Current) -> Status {
    let name = kind.type_name();
    let why = if addr == 0 {
        format!("a NULL {name}")
    } else if current.addr == addr {
        // The current context, passed where another kind is expected.
        let other = current.kind.map_or("context", CtxKind::type_name);
        format!("an {other} passed as an {name}")
    } else {
        format!(
            "an {name} ({addr:#x}) that is not the context of the callback running on this thread"
        )
    };
    Status::invalid_argument(format!(
        "{why}: an {name} is valid only during {} it was passed to, on that callback's \
         thread, and not in parallel_for work functions (rules R7 and R9 of opforge.h); pass \
         the context the callback received",
        kind.callback()
    ))
}

/// The generation of one callback's handles (R7): handles are
/// `epoch << 32 | (index + 1)`, so a handle of another call never names a
/// value of this one. Epochs come from one process-wide counter (0 is
/// skipped: a handle is never OPFORGE_NO_HANDLE); it wraps after 2^32 - 1
/// calls, so only a handle kept that many calls would be taken for a
/// current one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epoch(u32);

static NEXT_EPOCH: AtomicU32 = AtomicU32::new(1);

impl Epoch {
    /// A new epoch, for one callback.
    pub(crate) fn next() -> Epoch {
        loop {
            let e = NEXT_EPOCH.fetch_add(1, Ordering::Relaxed);
            if e != 0 {
                return Epoch(e);
            }
        }
    }

    /// The handle of entry `index` of the context's table, or an error if
    /// the index does not fit a handle (more than 2^32 - 2 entries).
    pub(crate) fn handle(self, index: usize) -> Result<OpforgeShape> {
        match u32::try_from(index) {
            Ok(i) if i < u32::MAX => Ok(u64::from(self.0) << 32 | u64::from(i + 1)),
            _ => Err(Status::resource_exhausted(format!(
                "the context made more than {} values; make fewer in one callback",
                u32::MAX - 1
            ))),
        }
    }

    /// The table index of handle `h` (a `what`: "shape", "dimension",
    /// "value"), if it is a handle of this epoch. Whether the index names
    /// an entry is the table's check.
    pub(crate) fn index(self, h: OpforgeShape, what: &str) -> Result<usize> {
        if h == OPFORGE_NO_HANDLE {
            return Err(Status::invalid_argument(format!(
                "OPFORGE_NO_HANDLE where a {what} handle is required (a function that returned \
                 it failed: check its result before using it)"
            )));
        }
        let (epoch, low) = ((h >> 32) as u32, h as u32);
        if epoch != self.0 || low == 0 {
            return Err(Status::invalid_argument(format!(
                "{what} handle {h:#x} is not a handle of this call: handles are values of the \
                 callback that made them (rule R7 of opforge.h); one kept from an earlier call, \
                 taken from another context, or forged is refused. Make the {what} again in \
                 this call"
            )));
        }
        Ok(low as usize - 1)
    }
}

/// Writes one `extern "C"` function of the kernel, shape or gradient table:
/// the panic guard (R10), the context check and claim (the `$with`
/// function, e.g. `with_kctx`, runs the body with the context's references
/// or refuses the pointer), and the status (R8).
///
/// - `fn name(p: *const Ctx, args...) -> status, with_ctx, |a, b| { body }`:
///   the function also takes the `OpforgeStatus*` and returns the code;
///   the body returns `Result<()>`, and an error (or a refused context, or
///   a panic: INTERNAL) is written to the status.
/// - `fn name(p: *mut Ctx, args...) -> status, out out: T, with_ctx, |a, b| { body }`:
///   as above, with a last argument `out: *mut T` the body's value
///   (`Result<T>`) is written to.
/// - `fn name(p: *const Ctx, args...) -> T [fail], with_ctx, |a, b| { body }`:
///   a function whose failure is a value (header R8): the body returns
///   `Result<T>`, and an error, a refused context or a panic is `fail`.
///
/// The body is safe code: it reads the plugin's other pointers (strings,
/// arrays, out-pointers) through the `host` helpers in `unsafe` blocks of
/// its own.
macro_rules! host_fn {
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($p:ident: $pty:ty $(, $arg:ident: $argty:ty)* $(,)?)
            -> status, out $out:ident: $outty:ty,
        $with:path, |$($c:pat_param),+| $body:block
    ) => {
        $crate::ctx::host_fn! {
            $(#[$meta])*
            $vis fn $name($p: $pty $(, $arg: $argty)*, $out: *mut $outty) -> status,
            $with, |$($c),+| {
                let value: $outty = (|| -> ::opforge_core::Result<$outty> { $body })()?;
                // SAFETY: `$out` is the plugin's out-pointer for one value
                // (this slot's contract); NULL and misalignment are refused.
                unsafe { $crate::host::write_out($out, value, stringify!($out)) }
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($p:ident: $pty:ty $(, $arg:ident: $argty:ty)* $(,)?) -> status,
        $with:path, |$($c:pat_param),+| $body:block
    ) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// Called by a plugin through the host's table: `status` is NULL
        /// or a status the host made (R8); the other pointers as the
        /// header documents this slot.
        $vis unsafe extern "C" fn $name(
            $p: $pty,
            $($arg: $argty,)*
            status: *mut ::opforge_abi::OpforgeStatus,
        ) -> ::opforge_abi::OpforgeCode {
            let run = || $with($p, |$($c),+| $body);
            // SAFETY: `status` is NULL or a host-made status (this
            // function's contract), which is all `guard_status` needs.
            unsafe { $crate::host::guard_status(status, run) }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($p:ident: $pty:ty $(, $arg:ident: $argty:ty)* $(,)?) -> $ret:ty [$fail:expr],
        $with:path, |$($c:pat_param),+| $body:block
    ) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// Called by a plugin through the host's table: the pointers as
        /// the header documents this slot.
        $vis unsafe extern "C" fn $name($p: $pty $(, $arg: $argty)*) -> $ret {
            let fail: $ret = $fail;
            $crate::host::guard(fail, || $with($p, |$($c),+| $body).unwrap_or(fail))
        }
    };
}

pub(crate) use host_fn;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_usable_only_while_lent_and_not_claimed() {
        let (a, b) = (1u64, 2u64);
        // Nothing lent: refused, without reading through the pointer.
        let e = claim(&raw const a, CtxKind::Kernel).err().unwrap();
        assert!(
            e.message().contains("not the context of the callback"),
            "{e}"
        );
        let lent = lend(&a, CtxKind::Kernel);
        assert_eq!(lent.ptr::<u64>().cast_const(), &raw const a);
        // Another address, another kind, NULL: refused.
        assert!(claim(&raw const b, CtxKind::Kernel).is_err());
        let e = claim(&raw const a, CtxKind::Shape).err().unwrap();
        assert!(
            e.message()
                .contains("an OpforgeKernelCtx passed as an OpforgeShapeCtx"),
            "{e}"
        );
        let e = claim(std::ptr::null::<u64>(), CtxKind::Kernel)
            .err()
            .unwrap();
        assert!(e.message().starts_with("a NULL OpforgeKernelCtx"), "{e}");
        {
            let _held = claim(&raw const a, CtxKind::Kernel).unwrap();
            // Held: code the host function runs cannot claim it again.
            assert!(claim(&raw const a, CtxKind::Kernel).is_err());
            {
                // A nested callback lends its own context, then returns.
                let _inner = lend(&b, CtxKind::Grad);
                drop(claim(&raw const b, CtxKind::Grad).unwrap());
                assert!(claim(&raw const a, CtxKind::Kernel).is_err());
            }
            assert!(claim(&raw const b, CtxKind::Grad).is_err());
        }
        // Released: usable again; on another thread, never.
        drop(claim(&raw const a, CtxKind::Kernel).unwrap());
        let addr = (&raw const a).addr();
        std::thread::spawn(move || {
            let p = std::ptr::without_provenance::<u64>(addr);
            assert!(claim(p, CtxKind::Kernel).is_err());
        })
        .join()
        .unwrap();
        drop(lent);
        assert!(claim(&raw const a, CtxKind::Kernel).is_err());
    }

    #[test]
    fn handles_of_another_epoch_are_refused() {
        let (e1, e2) = (Epoch::next(), Epoch::next());
        let h = e1.handle(5).unwrap();
        assert_ne!(h, OPFORGE_NO_HANDLE);
        assert_eq!(e1.index(h, "shape").unwrap(), 5);
        let e = e2.index(h, "shape").unwrap_err();
        assert!(e.message().contains("not a handle of this call"), "{e}");
        assert!(e1.index(OPFORGE_NO_HANDLE, "shape").is_err());
        // The low half 0 is never made: forged.
        assert!(e1.index(h & !0xffff_ffff, "shape").is_err());
        assert!(e1.handle(u32::MAX as usize).is_err());
        assert_eq!(e1.index(e1.handle(0).unwrap(), "dim").unwrap(), 0);
    }
}
