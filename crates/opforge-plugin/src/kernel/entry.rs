//! The entry points the host calls for every kernel registered with
//! [`KernelDefBuilder::build`](crate::KernelDefBuilder::build): create,
//! compute and destroy, each under `catch_unwind`.

use super::*;
use opforge_abi::OPFORGE_OK;

/// A kernel instance: the author's kernel, its definition, and whether an
/// earlier panic left it possibly inconsistent.
pub(super) struct Instance<K> {
    kernel: K,
    /// The flat input count create read (fixed for the instance;
    /// `usize::MAX` if the host lacks `init_num_inputs`).
    num_inputs: usize,
    def: &'static KernelDef,
    /// The mask of the declared outputs below 64 ([`declared_mask`]).
    declared: u64,
    poisoned: AtomicBool,
}

pub(super) fn kernel_what(def: &KernelDef, phase: &str) -> String {
    format!("{phase} of kernel {}", def.def.op())
}

pub(crate) unsafe extern "C" fn create_trampoline<K: CreateKernel>(
    init: *const OpforgeKernelInit,
    user: *mut c_void,
    state: *mut *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: `user` is the `'static` KernelDef given at registration.
    let def = unsafe { &*(user as *const KernelDef) };
    if state.is_null() {
        return OPFORGE_INTERNAL;
    }
    host::guard(
        status,
        || kernel_what(def, "create"),
        |host| {
            let init = OpKernelConstruction {
                raw: init,
                status,
                host,
                missing: Cell::new(None),
            };
            let kernel = K::create(&init);
            if let Some(missing) = init.missing.take() {
                return Err(missing);
            }
            let num_inputs = match host.kernel.init_num_inputs {
                // SAFETY: the create's init (R7).
                Some(f) => unsafe { f(init.raw) },
                None => usize::MAX,
            };
            let instance = Box::new(Instance {
                kernel: kernel?,
                num_inputs,
                def,
                declared: declared_mask(def),
                poisoned: AtomicBool::new(false),
            });
            // SAFETY: `state` is the host's out-pointer (checked non-null).
            unsafe { *state = Box::into_raw(instance).cast() };
            Ok(())
        },
    )
}

pub(crate) unsafe extern "C" fn compute_trampoline<K: OpKernel>(
    state: *mut c_void,
    ctx: *mut OpforgeKernelCtx,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: forwarded from the host's call (R7); no views: the 1.0 entry.
    unsafe { run_compute::<K>(state, ctx, core::ptr::null(), status) }
}

/// The 1.1 entry: as [`compute_trampoline`], with the views the host made.
pub(crate) unsafe extern "C" fn compute_views_trampoline<K: OpKernel>(
    state: *mut c_void,
    ctx: *mut OpforgeKernelCtx,
    views: *const OpforgeKernelViews,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    if views.is_null() {
        return OPFORGE_INTERNAL;
    }
    // SAFETY: forwarded from the host's call (R7).
    unsafe { run_compute::<K>(state, ctx, views, status) }
}

/// Runs `K::compute` for either entry, under the same guard as every
/// callback ([`host::guard`]'s): an error is written to `status`; a panic
/// is `INTERNAL` with its location and message, flagged `PANICKED`, and
/// poisons the instance.
///
/// The dispatch hot path: the guarded closure captures one reference, and
/// the kernel's result is turned into a code where it lies, so that no
/// large value is copied on the way (copies of values just written in
/// pieces stall the CPU, and each costs as much as the rest of a call).
///
/// # Safety
/// The arguments are those the host passed to compute or compute_views
/// (`views` NULL for compute) of a kernel registered by
/// [`KernelDefBuilder::build::<K>`](crate::KernelDefBuilder::build).
#[inline(always)]
unsafe fn run_compute<K: OpKernel>(
    state: *mut c_void,
    ctx: *mut OpforgeKernelCtx,
    views: *const OpforgeKernelViews,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    if state.is_null() {
        return OPFORGE_INTERNAL;
    }
    // SAFETY: `state` is the `Instance<K>` made by `create_trampoline::<K>`
    // for this kernel (the host passes it back unchanged) and lives until
    // destroy, after the last compute; computes share it (`K: Sync`).
    let instance = unsafe { &*(state as *const Instance<K>) };
    let Some(host) = host::host() else {
        // Called outside init..fini: nothing to report through.
        return OPFORGE_INTERNAL;
    };
    let call = Call {
        instance,
        host,
        ctx,
        views,
        status,
    };
    match crate::panic::catch_fast(|| call.run()) {
        Ok(code) => code,
        Err(panic) => compute_panicked(instance, host, status, panic),
    }
}

/// A compute panicked: the instance is poisoned, and the status says
/// where (INTERNAL, flagged PANICKED).
#[cold]
#[inline(never)]
fn compute_panicked<K>(
    instance: &Instance<K>,
    host: &Host,
    status: *mut OpforgeStatus,
    panic: crate::panic::Caught,
) -> OpforgeCode {
    instance.poisoned.store(true, Ordering::Relaxed);
    host::report_panic(
        host,
        status,
        &kernel_what(instance.def, "compute"),
        &panic.text(),
    )
}

/// One compute call's arguments ([`run_compute`]).
struct Call<'a, K> {
    instance: &'a Instance<K>,
    host: &'static Host,
    ctx: *mut OpforgeKernelCtx,
    views: *const OpforgeKernelViews,
    status: *mut OpforgeStatus,
}

impl<K: OpKernel> Call<'_, K> {
    /// The compute itself: its code, its error (if any) written to the
    /// status.
    #[inline(always)]
    fn run(&self) -> OpforgeCode {
        let (instance, host) = (self.instance, self.host);
        if instance.poisoned.load(Ordering::Relaxed) {
            return host.report(self.status, &poisoned(instance.def, host));
        }
        let premade = if self.views.is_null() {
            Premade::NONE
        } else {
            // SAFETY: the views of this compute_views call (run_compute's
            // caller).
            match unsafe { Premade::read(self.views) } {
                Ok(p) => p,
                Err(e) => return host.report(self.status, &e),
            }
        };
        let n_inputs = if self.views.is_null() {
            instance.num_inputs
        } else {
            premade.num_inputs
        };
        // Separate locals, left uninitialised (see `ViewSlots`).
        let slots: [ViewSlots; 2] = [
            UnsafeCell::new(MaybeUninit::uninit()),
            UnsafeCell::new(MaybeUninit::uninit()),
        ];
        let input_buf: InputBuf = UnsafeCell::new(MaybeUninit::uninit());
        let mut c = OpKernelContext {
            raw: self.ctx,
            status: self.status,
            host,
            def: instance.def,
            missing: Cell::new(None),
            premade,
            in_dead: Cell::new(0),
            // The host set the declared outputs (views entry).
            preset: Cell::new(if self.views.is_null() {
                0
            } else {
                instance.declared
            }),
            out_reset: Cell::new(0),
            out_claimed: Cell::new(0),
            in_views: ViewStore::new(&slots[0]),
            out_views: ViewStore::new(&slots[1]),
            spill: RefCell::new(Vec::new()),
            n_inputs: Cell::new(n_inputs),
            input_buf: &input_buf,
        };
        if self.views.is_null() && !instance.def.def.output_likes().is_empty() {
            if let Err(e) = c.preset_declared_outputs() {
                return host.report(self.status, &e);
            }
        }
        let result = instance.kernel.compute(&mut c);
        if let Err(e) = &result {
            return host.report(self.status, e);
        }
        match c.missing.take() {
            Some(missing) => host.report(self.status, &missing),
            None => OPFORGE_OK,
        }
    }
}

#[cold]
#[inline(never)]
fn poisoned(def: &KernelDef, host: &Host) -> Status {
    Status::internal(format!(
        "kernel {} (library {} {}) was poisoned by an earlier panic",
        def.def.op(),
        host.library.name,
        host.library.version
    ))
}

/// The mask of a kernel's declared outputs (below 64).
#[inline]
fn declared_mask(def: &KernelDef) -> u64 {
    def.def
        .output_likes()
        .iter()
        .fold(0, |m, l| m | bit(l.output))
}

pub(crate) unsafe extern "C" fn destroy_trampoline<K: OpKernel>(
    state: *mut c_void,
    user: *mut c_void,
) {
    if state.is_null() {
        return;
    }
    // SAFETY: `user` is the `'static` KernelDef given at registration.
    let def = unsafe { &*(user as *const KernelDef) };
    // SAFETY: `state` is the `Instance<K>` from `create_trampoline::<K>`;
    // destroy is called once, after the last compute, so we own it.
    let instance = unsafe { Box::from_raw(state as *mut Instance<K>) };
    if let Err(panic) = crate::panic::catch(move || drop(instance)) {
        if let Some(host) = host::host() {
            let message = host::panic_message(host, &kernel_what(def, "destroy"), &panic);
            if let Some(log) = host.api.log {
                // SAFETY: `raw` is init's table, as `log` asks; the message
                // is copied (R5).
                unsafe {
                    log(
                        host.raw,
                        opforge_abi::OPFORGE_LOG_ERROR,
                        OpforgeStr::from_text(&message),
                    )
                };
            }
        }
    }
}
