//! The host's tables, kept from init until fini, and the plumbing every
//! callback shares: statuses, missing slots, panic guards.

use core::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};

use opforge_abi::{
    OpforgeCode, OpforgeGradApi, OpforgeHostApi, OpforgeKernelApi, OpforgeRegistrationApi,
    OpforgeShapeApi, OpforgeStatus, OpforgeStr, Versioned, OPFORGE_INTERNAL, OPFORGE_OK,
    OPFORGE_STATUS_PANICKED, OPFORGE_UNKNOWN,
};

use crate::registry::Library;
use crate::status::{Code, Result, Status};

/// Copies of the host's tables (prefix reads: a slot the host lacks is
/// `None`), the pointer init received, and the library being served.
pub(crate) struct Host {
    pub raw: *const OpforgeHostApi,
    pub api: OpforgeHostApi,
    pub registration: OpforgeRegistrationApi,
    pub kernel: OpforgeKernelApi,
    pub shape: OpforgeShapeApi,
    pub grad: OpforgeGradApi,
    pub library: &'static Library,
}

static HOST: AtomicPtr<Host> = AtomicPtr::new(null_mut());

/// The tables of the running init..fini span, if any.
#[inline]
pub(crate) fn host() -> Option<&'static Host> {
    let p = HOST.load(Ordering::Acquire);
    // SAFETY: a non-null HOST was made by `Box::into_raw` in `install` and
    // is freed only by `uninstall`, which runs in fini (or when init fails);
    // the host calls fini only once nothing can call into the library any
    // more (header: every kernel destroyed, every foreign output released),
    // so no callback holds this reference past it.
    unsafe { p.as_ref() }
}

/// Reads the host's tables at init (rule R1: prefix reads of each table).
///
/// # Safety
///
/// `raw` must be the table init received, valid until fini (rule R7).
pub(crate) unsafe fn install(raw: *const OpforgeHostApi, library: &'static Library) -> Result<()> {
    if raw.is_null() {
        return Err(Status::invalid_argument("init received a NULL host table"));
    }
    // SAFETY: `raw` is the host table (caller), aligned and readable for
    // the struct_size it starts with.
    let api = unsafe { OpforgeHostApi::read_from(raw) }
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    if api.abi_major != opforge_abi::OPFORGE_ABI_MAJOR {
        return Err(Status::failed_precondition(format!(
            "library {} {} was built for opforge C ABI {}.x; this host provides {}.x",
            library.name,
            library.version,
            opforge_abi::OPFORGE_ABI_MAJOR,
            api.abi_major
        )));
    }
    /// A sub-table: a prefix read, or all slots `None` when the pointer is
    /// NULL or the host's table is shorter than this slot's struct_size.
    ///
    /// SAFETY (of the callers): the pointer is NULL or a sub-table of the
    /// host table, readable for its struct_size (R1, R7).
    unsafe fn table<T: Versioned>(p: *const T) -> Result<T> {
        if p.is_null() {
            // A zeroed table with struct_size 0: every slot missing.
            let mut t = T::NEW;
            // SAFETY: `t` is a local `T`, whose first field is
            // `struct_size: usize` (Versioned's contract).
            unsafe { (&mut t as *mut T).cast::<usize>().write(0) };
            return Ok(t);
        }
        // SAFETY: see above.
        unsafe { T::read_from(p) }.map_err(|e| Status::invalid_argument(e.to_string()))
    }
    // SAFETY: the sub-table pointers come from the host table (R7).
    let host = unsafe {
        Host {
            raw,
            registration: table(api.registration)?,
            kernel: table(api.kernel)?,
            shape: table(api.shape)?,
            grad: table(api.grad)?,
            api,
            library,
        }
    };
    let old = HOST.swap(Box::into_raw(Box::new(host)), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: `old` came from `Box::into_raw` above; a second init
        // without fini means the host is starting over, and none of the
        // earlier span's callbacks can run any more (R7).
        drop(unsafe { Box::from_raw(old) });
    }
    Ok(())
}

/// Forgets the host's tables (fini, or a failed init).
pub(crate) fn uninstall() {
    let old = HOST.swap(null_mut(), Ordering::AcqRel);
    if !old.is_null() {
        // SAFETY: `old` came from `Box::into_raw` in `install`; fini runs
        // when nothing can call into the library (see `host`).
        drop(unsafe { Box::from_raw(old) });
    }
}

/// A function slot of a host table, or `Unimplemented` naming the table,
/// the slot and the host's version when the host lacks it (its table is
/// shorter than the slot, or the slot is NULL: `OPFORGE_HAS_SLOT`).
macro_rules! slot {
    ($host:expr, $table:ident . $name:ident) => {
        match $host.$table.$name {
            Some(f) => Ok(f),
            None => Err($crate::host::missing_slot(
                $host,
                stringify!($table),
                stringify!($name),
            )),
        }
    };
}
pub(crate) use slot;

/// Calls `table`'s slot `name` (`|f| call`) when the host has it; otherwise
/// records the slot as missing (`self.note`) and answers `default`: the
/// queries of every context (kernel construction and compute, shape,
/// gradient), which go on with a default and report the first missing slot
/// when the callback returns.
macro_rules! query {
    ($self:ident, $table:ident . $name:ident, $default:expr, |$f:ident| $call:expr) => {
        match $self.host.$table.$name {
            Some($f) => $call,
            None => {
                $self.note(stringify!($name));
                $default
            }
        }
    };
}
pub(crate) use query;

/// A context's `input_range` and `output_range`: the flat range of an
/// input or output argument by name, through its table's `arg_range` slot
/// (the context has `host`, `raw` and `status` fields, as every context of
/// the SDK).
macro_rules! arg_ranges {
    ($table:ident, $of:literal) => {
        #[doc = concat!("The flat range of ", $of, "input argument `name`.")]
        pub fn input_range(&self, name: &str) -> Result<core::ops::Range<usize>> {
            let f = slot!(self.host, $table.arg_range)?;
            // SAFETY: the running callback's context and status (R7).
            unsafe { self.host.arg_range(f, self.raw, self.status, name, false) }
        }
        #[doc = concat!("The flat range of ", $of, "output argument `name`.")]
        pub fn output_range(&self, name: &str) -> Result<core::ops::Range<usize>> {
            let f = slot!(self.host, $table.arg_range)?;
            // SAFETY: as `input_range`.
            unsafe { self.host.arg_range(f, self.raw, self.status, name, true) }
        }
    };
}
pub(crate) use arg_ranges;

/// Records in `missing` that `table`'s slot `name` was asked for and the host
/// lacks it (the first such miss is kept: it is what the callback reports).
pub(crate) fn note_missing(
    missing: &core::cell::Cell<Option<Status>>,
    host: &Host,
    table: &str,
    name: &str,
) {
    let previous = missing.take();
    missing.set(Some(
        previous.unwrap_or_else(|| missing_slot(host, table, name)),
    ));
}

/// The error of a slot the host lacks.
pub(crate) fn missing_slot(host: &Host, table: &str, name: &str) -> Status {
    Status::unimplemented(format!(
        "the host's {table} API has no `{name}` (host opforge C ABI {}.{}; library {} {} needs \
         a newer host for this call)",
        host.api.abi_major, host.api.abi_minor, host.library.name, host.library.version
    ))
}

/// The signature of every context's `arg_range` slot (kernel init,
/// kernel, shape and gradient contexts), over its context pointer `P`.
pub(crate) type ArgRangeFn<P> = unsafe extern "C" fn(
    P,
    OpforgeStr,
    u8,
    *mut usize,
    *mut usize,
    *mut OpforgeStatus,
) -> OpforgeCode;

impl Host {
    /// The flat range of the input (`is_output` false) or output argument
    /// `name`, through a context's `arg_range` slot `f`.
    ///
    /// # Safety
    /// `raw` and `status` are the context and status of the running
    /// callback `f` belongs to (R7).
    pub(crate) unsafe fn arg_range<P>(
        &self,
        f: ArgRangeFn<P>,
        raw: P,
        status: *mut OpforgeStatus,
        name: &str,
        is_output: bool,
    ) -> Result<core::ops::Range<usize>> {
        let (mut start, mut stop) = (0, 0);
        // SAFETY: the caller's context and status; out-pointers to locals;
        // the name is read during the call (R5).
        let code = unsafe {
            f(
                raw,
                OpforgeStr::from_text(name),
                u8::from(is_output),
                &mut start,
                &mut stop,
                status,
            )
        };
        self.check(code, status)?;
        Ok(start..stop)
    }

    /// The message of a failed host call: `code` with the status's message.
    pub(crate) fn error(&self, code: OpforgeCode, status: *mut OpforgeStatus) -> Status {
        let message = match self.api.status_message {
            // SAFETY: `status` is the status of the running callback (R7);
            // the returned string lives until the status changes, and is
            // copied at once.
            Some(f) if !status.is_null() => unsafe {
                String::from_utf8_lossy(f(status).as_bytes()).into_owned()
            },
            _ => String::new(),
        };
        Status::new(Code(code), message)
    }

    /// `Ok` for OPFORGE_OK, else the status's error.
    pub(crate) fn check(&self, code: OpforgeCode, status: *mut OpforgeStatus) -> Result<()> {
        if code == OPFORGE_OK {
            Ok(())
        } else {
            Err(self.error(code, status))
        }
    }

    /// Writes `error` into the callback's status and returns its code.
    pub(crate) fn report(&self, status: *mut OpforgeStatus, error: &Status) -> OpforgeCode {
        let code = if error.code.0 == OPFORGE_OK {
            OPFORGE_UNKNOWN
        } else {
            error.code.0
        };
        if let (Some(set), false) = (self.api.set_status, status.is_null()) {
            // SAFETY: `status` is the callback's status (R7); the message is
            // copied by the host before the call returns (R5).
            unsafe { set(status, code, OpforgeStr::from_text(&error.message)) };
        }
        code
    }
}

/// Runs a callback's body for the host: `Ok` is OPFORGE_OK; an error is
/// written to `status`; a panic becomes OPFORGE_INTERNAL with
/// "WHAT (library NAME VERSION) panicked at FILE:LINE:COL: MESSAGE" and the
/// status is flagged OPFORGE_STATUS_PANICKED. Nothing unwinds out of it.
pub(crate) fn guard(
    status: *mut OpforgeStatus,
    what: impl FnOnce() -> String,
    body: impl FnOnce(&'static Host) -> Result<()>,
) -> OpforgeCode {
    guard_reporting_panic(status, what, body).0
}

/// [`guard`], also telling whether the body panicked.
pub(crate) fn guard_reporting_panic(
    status: *mut OpforgeStatus,
    what: impl FnOnce() -> String,
    body: impl FnOnce(&'static Host) -> Result<()>,
) -> (OpforgeCode, bool) {
    let Some(host) = host() else {
        // Called outside init..fini: nothing to report through.
        return (OPFORGE_INTERNAL, false);
    };
    match crate::panic::catch(|| body(host)) {
        Ok(Ok(())) => (OPFORGE_OK, false),
        Ok(Err(e)) => (host.report(status, &e), false),
        Err(panic) => (report_panic(host, status, &what(), &panic), true),
    }
}

/// Writes a caught panic into `status`: INTERNAL with "WHAT (library NAME
/// VERSION) panicked at FILE:LINE:COL: MESSAGE", flagged
/// OPFORGE_STATUS_PANICKED. Returns the code.
#[cold]
#[inline(never)]
pub(crate) fn report_panic(
    host: &Host,
    status: *mut OpforgeStatus,
    what: &str,
    panic: &str,
) -> OpforgeCode {
    let e = Status::internal(panic_message(host, what, panic));
    let code = host.report(status, &e);
    if let (Some(flags), false) = (host.api.set_status_flags, status.is_null()) {
        // SAFETY: the callback's status (R7).
        unsafe { flags(status, OPFORGE_STATUS_PANICKED) };
    }
    code
}

/// The message of a caught panic.
pub(crate) fn panic_message(host: &Host, what: &str, panic: &str) -> String {
    format!(
        "{what} (library {} {}) panicked at {panic}",
        host.library.name, host.library.version
    )
}
