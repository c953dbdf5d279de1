//! Gradients: [`GradientContext`], a builder over the host's gradient API
//! with the names of opforge-core's `GradientContext` (every value is a
//! [`Sym`], and the gradient is built from calls of registered ops, so
//! higher-order gradients work whenever those ops are differentiable).

use core::cell::Cell;
use core::ffi::c_void;
use core::marker::PhantomData;

use opforge_abi::{
    OpforgeCode, OpforgeGradCtx, OpforgeNamedAttr, OpforgeStatus, OpforgeStr, OpforgeSym,
    OpforgeSymArg, OpforgeTensor, OPFORGE_NO_HANDLE, OPFORGE_TENSOR_CONTIGUOUS,
    OPFORGE_TENSOR_HOST_MEMORY,
};

use crate::attr::{self, AbiAttr, AttrValue, FromAttrValue};
use crate::dtype::{DataType, Element};
use crate::host::{self, arg_ranges, slot, Host};
use crate::registry::{GradientDef, GradientForm};
use crate::status::{Result, Status};

/// A value (graph output or eager tensor) in a gradient call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sym(pub OpforgeSym);

/// One input argument of [`GradientContext::call`]: a single value or a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymArg {
    /// A single-tensor argument.
    One(Sym),
    /// A list argument.
    List(Vec<Sym>),
}

impl From<Sym> for SymArg {
    fn from(s: Sym) -> SymArg {
        SymArg::One(s)
    }
}

/// One gradient-function call: the forward op, the gradients flowing into
/// its outputs, and the graph builder.
pub struct GradientContext<'a> {
    raw: *mut OpforgeGradCtx,
    status: *mut OpforgeStatus,
    host: &'a Host,
    missing: Cell<Option<Status>>,
    _call: PhantomData<&'a mut ()>,
}

use crate::host::query;

impl<'a> GradientContext<'a> {
    fn note(&self, name: &str) {
        crate::host::note_missing(&self.missing, self.host, "grad", name);
    }

    /// The forward op's name.
    pub fn op_name(&self) -> String {
        query!(self, grad.op_name, String::new(), |f| {
            // SAFETY: the call's context (R7); copied at once.
            String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned()
        })
    }
    /// Attr `name` of the forward node as `T`.
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        let f = slot!(self.host, grad.attr)?;
        attr::read_attr(self.host, name, self.status, |n, v| {
            // SAFETY: the call's context and status (R7); `v` an out-struct.
            unsafe { f(self.raw, n, v, self.status) }
        })
    }
    /// The forward op's number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        // SAFETY: the call's context (R7).
        query!(self, grad.num_inputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The forward op's flat input `i`.
    pub fn input(&self, i: usize) -> Sym {
        // SAFETY: the call's context (R7).
        Sym(query!(self, grad.input, OPFORGE_NO_HANDLE, |f| unsafe {
            f(self.raw, i)
        }))
    }
    /// The forward op's number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        // SAFETY: the call's context (R7).
        query!(self, grad.num_outputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The forward op's flat output `i`.
    pub fn output(&self, i: usize) -> Sym {
        // SAFETY: the call's context (R7).
        Sym(query!(self, grad.output, OPFORGE_NO_HANDLE, |f| unsafe {
            f(self.raw, i)
        }))
    }
    arg_ranges!(grad, "the forward op's ");
    /// The gradient flowing into output `i`, if any.
    pub fn output_grad(&self, i: usize) -> Option<Sym> {
        let mut grad = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context (R7); out-pointer to a local.
        let flows = query!(self, grad.output_grad, 0, |f| unsafe {
            f(self.raw, i, &mut grad)
        });
        (flows != 0).then_some(Sym(grad))
    }
    /// The gradient flowing into the one output of a one-output op
    /// (opforge-core's `GradientContext::grad`): the host calls a gradient
    /// function only when a gradient flows into at least one output, so
    /// for such an op it is always there. For an op with several outputs
    /// (or none) it is an `InvalidArgument` error: use
    /// [`output_grad(i)`](Self::output_grad), which says per output
    /// whether a gradient flows.
    pub fn grad(&self) -> Result<Sym> {
        let n = self.num_outputs();
        if let Some(missing) = self.missing.take() {
            // The host lacks num_outputs: that error, kept for the callback.
            self.missing.set(Some(missing.clone()));
            return Err(missing);
        }
        if n != 1 {
            return Err(Status::invalid_argument(format!(
                "GradientContext::grad: op {} has {n} outputs, not 1; use output_grad(i) for \
                 the gradient of output i",
                self.op_name()
            )));
        }
        self.output_grad(0).ok_or_else(|| {
            Status::failed_precondition(format!(
                "GradientContext::grad: no gradient flows into the output of op {} (the host \
                 called its gradient function without one; use output_grad(0) to handle that)",
                self.op_name()
            ))
        })
    }
    /// The dtype of a value.
    pub fn dtype(&self, s: Sym) -> DataType {
        // SAFETY: the call's context (R7).
        DataType(query!(self, grad.dtype, 0, |f| unsafe { f(self.raw, s.0) }))
    }
    /// What is known of a value's shape: `None` for unknown rank, -1 for
    /// unknown dims.
    pub fn shape(&self, s: Sym) -> Option<Vec<i64>> {
        let f = match self.host.grad.shape {
            Some(f) => f,
            None => {
                self.note("shape");
                return None;
            }
        };
        let mut dims = vec![0i64; 8];
        // SAFETY: the call's context (R7); `dims` has room for `len` dims.
        let rank = unsafe { f(self.raw, s.0, dims.as_mut_ptr(), dims.len()) };
        let rank = usize::try_from(rank).ok()?;
        if rank > dims.len() {
            dims.resize(rank, 0);
            // SAFETY: as above, with room for `rank` dims.
            unsafe { f(self.raw, s.0, dims.as_mut_ptr(), dims.len()) };
        }
        dims.truncate(rank);
        Some(dims)
    }
    /// Calls the registered op `op` on `args` (one per input argument)
    /// with `attrs` (defaults and type inference as in a graph), and
    /// returns its flat outputs.
    pub fn call(
        &mut self,
        op: &str,
        args: &[SymArg],
        attrs: &[(&str, AttrValue)],
    ) -> Result<Vec<Sym>> {
        let f = slot!(self.host, grad.call)?;
        let syms: Vec<Vec<OpforgeSym>> = args
            .iter()
            .map(|a| match a {
                SymArg::One(s) => vec![s.0],
                SymArg::List(l) => l.iter().map(|s| s.0).collect(),
            })
            .collect();
        let abi_args: Vec<OpforgeSymArg> = args
            .iter()
            .zip(&syms)
            .map(|(a, s)| {
                let mut x = OpforgeSymArg::new();
                x.syms = s.as_ptr();
                x.num_syms = s.len();
                x.is_list = u8::from(matches!(a, SymArg::List(_)));
                x
            })
            .collect();
        let values: Vec<AbiAttr<'_>> = attrs.iter().map(|(_, v)| v.to_abi()).collect();
        let named: Vec<OpforgeNamedAttr> = attrs
            .iter()
            .zip(&values)
            .map(|((name, _), v)| {
                let mut n = OpforgeNamedAttr::new();
                n.name = OpforgeStr::from_text(name);
                n.value = v.get();
                n
            })
            .collect();
        let mut outs = vec![OPFORGE_NO_HANDLE; 8];
        let mut n = 0usize;
        // SAFETY: the call's context and status (R7); every array lives
        // across the call (the host copies what it keeps, R5); `outs` has
        // room for `cap` handles.
        let code = unsafe {
            f(
                self.raw,
                OpforgeStr::from_text(op),
                abi_args.as_ptr(),
                abi_args.len(),
                named.as_ptr(),
                named.len(),
                outs.as_mut_ptr(),
                outs.len(),
                &mut n,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        if n > outs.len() {
            return Err(Status::unimplemented(format!(
                "op {op} has {n} outputs; GradientContext::call reads at most {}",
                outs.len()
            )));
        }
        outs.truncate(n);
        Ok(outs.into_iter().map(Sym).collect())
    }
    /// [`call`](Self::call) of an op with single-tensor inputs and one
    /// output (opforge's `op1`).
    pub fn op1(&mut self, op: &str, inputs: &[Sym], attrs: &[(&str, AttrValue)]) -> Result<Sym> {
        let args: Vec<SymArg> = inputs.iter().map(|&s| SymArg::One(s)).collect();
        let outs = self.call(op, &args, attrs)?;
        match outs.as_slice() {
            [one] => Ok(*one),
            _ => Err(Status::invalid_argument(format!(
                "op {op} has {} outputs, not 1",
                outs.len()
            ))),
        }
    }
    /// A constant of `values` with `dims` (copied by the host).
    pub fn constant<T: Element>(&mut self, values: &[T], dims: &[i64]) -> Result<Sym> {
        let f = slot!(self.host, grad.constant)?;
        let n: i64 = dims.iter().product();
        if n != values.len() as i64 {
            return Err(Status::invalid_argument(format!(
                "a constant of {} values for {} elements",
                values.len(),
                n
            )));
        }
        let mut view = OpforgeTensor::new();
        view.dtype = T::DTYPE.0;
        view.rank =
            u32::try_from(dims.len()).map_err(|_| Status::invalid_argument("too many dims"))?;
        view.dims = dims.as_ptr();
        view.data = values.as_ptr() as *mut c_void;
        view.byte_len = core::mem::size_of_val(values) as u64;
        view.num_elements = n;
        view.flags = OPFORGE_TENSOR_CONTIGUOUS | OPFORGE_TENSOR_HOST_MEMORY;
        let mut out = OPFORGE_NO_HANDLE;
        // SAFETY: the call's context and status (R7); the view's memory is
        // read (copied) during the call and never written (not WRITABLE).
        let code = unsafe { f(self.raw, &view, &mut out, self.status) };
        self.host.check(code, self.status)?;
        Ok(Sym(out))
    }
    /// Sets the gradient of flat input `i` (unset inputs get none).
    pub fn set_input_grad(&mut self, i: usize, grad: Sym) -> Result<()> {
        let f = slot!(self.host, grad.set_input_grad)?;
        // SAFETY: the call's context and status (R7).
        let code = unsafe { f(self.raw, i, grad.0, self.status) };
        self.host.check(code, self.status)
    }
}

/// The callback registered for every SDK gradient function.
pub(crate) unsafe extern "C" fn grad_trampoline(
    ctx: *mut OpforgeGradCtx,
    user: *mut c_void,
    status: *mut OpforgeStatus,
) -> OpforgeCode {
    // SAFETY: `user` is the `'static` GradientDef given at registration.
    let def = unsafe { &*(user as *const GradientDef) };
    host::guard(
        status,
        || format!("the gradient of {}", def.op),
        |host| {
            let GradientForm::Fn(f) = def.form else {
                return Err(Status::internal("not a gradient function"));
            };
            let mut c = GradientContext {
                raw: ctx,
                status,
                host,
                missing: Cell::new(None),
                _call: PhantomData,
            };
            let result = f(&mut c);
            match c.missing.take() {
                Some(missing) if result.is_ok() => Err(missing),
                _ => result,
            }
        },
    )
}
