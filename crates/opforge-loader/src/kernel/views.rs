//! The 1.1 compute entry of a plugin kernel (`compute_views`): every
//! input's view made and every declared output set before the plugin runs
//! (see the parent module's documentation).

use super::context::{KernelCtx, INLINE_ARGS};
use super::PluginKernel;
use crate::host::*;
use opforge_abi::*;
use opforge_core::kernel::{OpKernelContext, OutputRequest};
use opforge_core::{Result, TensorShape};
use std::ffi::c_void;
use std::mem::MaybeUninit;

/// The plugin's 1.1 compute entry.
pub(super) type ComputeViewsFn = unsafe extern "C" fn(
    *mut c_void,
    *mut OpforgeKernelCtx,
    *const OpforgeKernelViews,
    *mut OpforgeStatus,
) -> OpforgeCode;

/// The arrays of the views entry: input views, output views, and the
/// input each output took over.
type ViewArrays<'v> = (
    &'v mut [MaybeUninit<OpforgeTensor>],
    &'v mut [MaybeUninit<OpforgeTensor>],
    &'v mut [i64],
);

impl PluginKernel {
    /// The 1.1 entry: makes every input's view and sets every declared
    /// output (see the module's documentation), then calls `f`. An error
    /// here (an allocation) is the host's own, before any plugin code runs.
    ///
    /// The arrays live on the stack when the node has at most
    /// [`INLINE_ARGS`] inputs and outputs (the common case, kept free of
    /// any heap bookkeeping); larger nodes take [`run_views_large`](Self::run_views_large).
    #[inline]
    pub(super) fn run_views(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        c: &mut OpKernelContext<'_>,
        status: &mut HostStatus,
    ) -> Result<OpforgeCode> {
        let (ni, no) = (c.num_inputs(), c.num_outputs());
        if ni > INLINE_ARGS || no > INLINE_ARGS {
            return self.run_views_large(f, state, k, c, status);
        }
        // Written before they are read; only the first `ni`/`no` elements
        // are used.
        let mut ins = [const { MaybeUninit::<OpforgeTensor>::uninit() }; INLINE_ARGS];
        let mut outs = [const { MaybeUninit::<OpforgeTensor>::uninit() }; INLINE_ARGS];
        let mut from = [OPFORGE_NOT_FORWARDED; INLINE_ARGS];
        let arrays = (&mut ins[..ni], &mut outs[..no], &mut from[..no]);
        self.fill_and_call(f, state, k, c, status, arrays)
    }

    /// [`run_views`](Self::run_views) for a node with more than
    /// [`INLINE_ARGS`] inputs or outputs: the arrays on the heap.
    #[cold]
    #[inline(never)]
    fn run_views_large(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        c: &mut OpKernelContext<'_>,
        status: &mut HostStatus,
    ) -> Result<OpforgeCode> {
        let (ni, no) = (c.num_inputs(), c.num_outputs());
        let mut ins = vec![MaybeUninit::<OpforgeTensor>::uninit(); ni];
        let mut outs = vec![MaybeUninit::<OpforgeTensor>::uninit(); no];
        let mut from = vec![OPFORGE_NOT_FORWARDED; no];
        self.fill_and_call(f, state, k, c, status, (&mut ins, &mut outs, &mut from))
    }

    /// [`fill_views`](Self::fill_views) into the arrays (one element per
    /// input, per output, per output), then
    /// [`call_views`](Self::call_views) with them.
    #[inline(always)]
    fn fill_and_call(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        c: &mut OpKernelContext<'_>,
        status: &mut HostStatus,
        (ins, outs, from): ViewArrays<'_>,
    ) -> Result<OpforgeCode> {
        self.fill_views(k, c, ins, outs, from)?;
        // SAFETY: `fill_views` wrote every element of the arrays.
        Ok(unsafe { self.call_views(f, state, k, c, status, ins, outs, from) })
    }

    /// Writes every input's view into `ins`, sets every declared output and
    /// writes every output's view into `outs` (the unset view for an
    /// undeclared one), and the input each output took over into `from`
    /// (which starts all `OPFORGE_NOT_FORWARDED`).
    #[inline(always)]
    fn fill_views(
        &self,
        k: &KernelCtx<'_>,
        c: &mut OpKernelContext<'_>,
        ins: &mut [MaybeUninit<OpforgeTensor>],
        outs: &mut [MaybeUninit<OpforgeTensor>],
        from: &mut [i64],
    ) -> Result<()> {
        for (i, v) in ins.iter_mut().enumerate() {
            k.write_input_view(c, i, v);
        }
        // Outputs requested INPLACE or ADD are bound before anything else
        // (an INPLACE input's view, written above, describes the buffer the
        // output now holds, as for a forwarded input).
        let requests = self.def.handles_requests();
        if requests {
            super::bind_inplace(k, c, |o, j| from[o] = j as i64)?;
        }
        let no = outs.len();
        // The outputs not declared get the unset view, or their bound
        // view (declared ones are written below; their indices are below 64
        // unless `no` is large). Skipped when every output is declared (the
        // elementwise case).
        if no > 64 || self.def.declared_mask != low_bits(no) {
            let declared = if no <= 64 { self.def.declared_mask } else { 0 };
            for (o, v) in outs.iter_mut().enumerate() {
                if o >= 64 || declared & (1 << o) == 0 {
                    if requests && c.output(o).is_some() {
                        v.write(k.output_view(c, o)?);
                        continue;
                    }
                    v.write(OpforgeTensor {
                        dtype: c.output_type(o).base() as i32,
                        ..OpforgeTensor::new()
                    });
                }
            }
        }
        for l in self.def.output_like.iter() {
            // In range and allocatable: checked for this node's signature
            // when the instance was made.
            let (o, j) = (l.output, l.input);
            if requests {
                if c.output(o).is_some() {
                    // Bound by an INPLACE or ADD request: its own view.
                    outs[o].write(k.output_view(c, o)?);
                    continue;
                }
                if c.output_request(o) == OutputRequest::Null {
                    // Not needed: left unset.
                    outs[o].write(OpforgeTensor {
                        dtype: c.output_type(o).base() as i32,
                        ..OpforgeTensor::new()
                    });
                    continue;
                }
            }
            // SAFETY: every element of `ins` was written above.
            let like = unsafe { ins[j].assume_init_ref() };
            let forwarded = if k.moved(j) {
                // Forwarded to an earlier declared output: its dims are in
                // its view.
                // SAFETY: `like` is a view this host made during this
                // compute (its dims live in the context's slots or arena).
                let dims = unsafe { dims_of_view(like) };
                c.allocate_output(o, TensorShape::new(dims)?)?;
                None
            } else if l.forward {
                c.forward_input_or_allocate_output_like(&[j], o, j)?
            } else {
                let shape = c.input(j).shape().clone();
                c.allocate_output(o, shape)?;
                None
            };
            if let Some(j) = forwarded {
                k.set_moved(j);
                from[o] = j as i64;
            }
            k.write_declared_output_view(c, o, like, &mut outs[o])?;
        }
        Ok(())
    }

    /// Calls the plugin's compute_views with the arrays.
    ///
    /// # Safety
    /// Every element of `ins`, `outs` and `from` is initialised (written by
    /// [`fill_views`](Self::fill_views) for this compute), and `state` is
    /// the state the caller runs the kernel with.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn call_views(
        &self,
        f: ComputeViewsFn,
        state: SendPtr,
        k: &KernelCtx<'_>,
        c: &mut OpKernelContext<'_>,
        status: &mut HostStatus,
        ins: &[MaybeUninit<OpforgeTensor>],
        outs: &[MaybeUninit<OpforgeTensor>],
        from: &[i64],
    ) -> OpforgeCode {
        let views = OpforgeKernelViews {
            inputs: ins.as_ptr().cast(),
            num_inputs: ins.len(),
            outputs: outs.as_ptr().cast(),
            num_outputs: outs.len(),
            forwarded_from: from.as_ptr(),
            ..OpforgeKernelViews::new()
        };
        let lent = k.lend(c);
        // SAFETY: `f` is the plugin's compute_views; the state is the one
        // its create made, kept from destroy until the instance is dropped
        // (its first state) or by the caller's read lock (a later one);
        // `k` (lent until the call returns), `status`, `views` and the
        // arrays it points to (every element written, the caller says)
        // live across the call.
        unsafe { f(state.0, lent.ptr(), &views, status.as_ptr()) }
    }
}

/// The mask of the outputs `0..n` (all 64 bits from 64 on).
#[inline(always)]
fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The dims of a view the host made (`rank` of them, or none).
///
/// # Safety
/// `v` is a view made by this host during the running compute: its dims
/// live in the context's slots or arena.
pub(super) unsafe fn dims_of_view(v: &OpforgeTensor) -> &[i64] {
    if v.rank == 0 || v.dims.is_null() {
        return &[];
    }
    // SAFETY: the host wrote `rank` dims there (caller).
    unsafe { std::slice::from_raw_parts(v.dims, v.rank as usize) }
}
