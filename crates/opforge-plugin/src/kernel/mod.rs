//! Kernels: the [`OpKernel`] and [`CreateKernel`] traits, what `create`
//! reads ([`OpKernelConstruction`]), what `compute` works with
//! ([`OpKernelContext`]), tensor views ([`Tensor`],
//! [`TensorMut`]), and the trampolines the host calls.
//!
//! The names are opforge-core's `OpKernelConstruction` and
//! `OpKernelContext` ones, so an in-tree kernel ports mechanically. Every
//! call goes through the host's kernel table; a slot the host lacks answers
//! `Unimplemented` (calls that return a value and no `Result` record the
//! missing slot, and the compute then fails with `Unimplemented`).
//!
//! Two entries run a kernel's [`OpKernel::compute`], and it cannot tell them
//! apart. A 1.1 host calls `compute_views` with every input's view made and
//! every declared output
//! ([`KernelDefBuilder::output_like`](crate::KernelDefBuilder::output_like))
//! set: `input`, `output_mut`, `inputs_and_output` and a repeated
//! `forward_input_or_allocate_output` of a declared output read those
//! views, with no call into the host. A 1.0 host calls `compute`: the SDK
//! allocates the declared outputs first (never forwarding) and asks the
//! host for each view, as in 1.0.

use core::cell::{Cell, RefCell, UnsafeCell};
use core::ffi::c_void;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ops::Range;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use opforge_abi::{
    OpforgeCode, OpforgeForeignTensor, OpforgeKernelCtx, OpforgeKernelInit, OpforgeKernelViews,
    OpforgeStatus, OpforgeStr, OpforgeTensor, Versioned, OPFORGE_INTERNAL, OPFORGE_NOT_FORWARDED,
    OPFORGE_REQ_ADD, OPFORGE_REQ_INPLACE, OPFORGE_REQ_NULL, OPFORGE_REQ_WRITE,
    OPFORGE_TENSOR_CONTIGUOUS, OPFORGE_TENSOR_WRITABLE,
};

use crate::attr::{self, FromAttrValue};
use crate::dtype::{DataType, Element};
use crate::host::{self, arg_ranges, query, slot, Host};
use crate::registry::KernelDef;
use crate::status::{Result, Status};

/// A kernel: the computation of an op on one device (opforge-core's and
/// TensorFlow's `OpKernel`). Made once per node (or eager call signature)
/// through [`CreateKernel::create`], then run on each call, possibly
/// concurrently (`Sync`) unless the definition says
/// [`not_thread_safe`](crate::KernelDefBuilder::not_thread_safe).
pub trait OpKernel: Send + Sync + 'static {
    /// Runs the kernel once: reads the inputs from `ctx` and sets every
    /// output.
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()>;
}

/// A kernel type that builds itself from the node's attrs (opforge-core's
/// `CreateKernel`, TensorFlow's kernel constructor);
/// [`KernelDefBuilder::build`](crate::KernelDefBuilder::build) binds it.
pub trait CreateKernel: OpKernel + Sized {
    /// Reads and validates attrs and dtypes (a failure fails the node's
    /// construction, as TensorFlow's constructor errors do).
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self>;
}

/// Where a sticky "missing slot" is recorded by calls without a `Result`.
type Missing = Cell<Option<Status>>;

fn note_missing(missing: &Missing, host: &Host, name: &str) {
    host::note_missing(missing, host, "kernel", name);
}

/// What a kernel's `create` reads: the node's attrs, dtypes and names
/// (opforge-core's `OpKernelConstruction`).
pub struct OpKernelConstruction<'a> {
    raw: *const OpforgeKernelInit,
    status: *mut OpforgeStatus,
    host: &'a Host,
    missing: Missing,
}

impl<'a> OpKernelConstruction<'a> {
    fn note(&self, name: &str) {
        note_missing(&self.missing, self.host, name);
    }

    /// The op's name.
    pub fn op_name(&self) -> String {
        query!(self, kernel.init_op_name, String::new(), |f| {
            // SAFETY: the create's init (R7); the string is copied at once.
            String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned()
        })
    }
    /// The node's name (the op's name for eager calls).
    pub fn node_name(&self) -> String {
        query!(self, kernel.init_node_name, String::new(), |f| {
            // SAFETY: as `op_name`.
            String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned()
        })
    }
    /// The device type the kernel is built for.
    pub fn device_type(&self) -> String {
        query!(self, kernel.init_device_type, String::new(), |f| {
            // SAFETY: as `op_name`.
            String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned()
        })
    }
    /// The number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        // SAFETY: the create's init (R7).
        query!(self, kernel.init_num_inputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        // SAFETY: the create's init (R7).
        query!(self, kernel.init_num_outputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The dtype of input `i` ([`DataType::Invalid`] out of range).
    pub fn input_type(&self, i: usize) -> DataType {
        // SAFETY: the create's init (R7); a bad index is answered by the
        // host, not undefined.
        DataType(query!(self, kernel.init_input_dtype, 0, |f| unsafe {
            f(self.raw, i)
        }))
    }
    /// The dtype of output `i`.
    pub fn output_type(&self, i: usize) -> DataType {
        // SAFETY: as `input_type`.
        DataType(query!(self, kernel.init_output_dtype, 0, |f| unsafe {
            f(self.raw, i)
        }))
    }
    /// The dtype of each flat input (opforge-core's `input_types`).
    pub fn input_types(&self) -> Vec<DataType> {
        (0..self.num_inputs()).map(|i| self.input_type(i)).collect()
    }
    /// The dtype of each flat output.
    pub fn output_types(&self) -> Vec<DataType> {
        (0..self.num_outputs())
            .map(|i| self.output_type(i))
            .collect()
    }
    /// Attr `name` of the node as `T` (opforge-core's `get_attr`).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        let f = slot!(self.host, kernel.init_attr)?;
        attr::read_attr(self.host, name, self.status, |n, v| {
            // SAFETY: the create's init and status (R7); `v` is a zeroed
            // out-struct with its struct_size set.
            unsafe { f(self.raw, n, v, self.status) }
        })
    }
    /// The flat range of the input (`is_output` false) or output argument
    /// `name`.
    pub fn arg_range(&self, name: &str, is_output: bool) -> Result<Range<usize>> {
        let f = slot!(self.host, kernel.init_arg_range)?;
        // SAFETY: the create's init and status (R7).
        unsafe {
            self.host
                .arg_range(f, self.raw, self.status, name, is_output)
        }
    }
}

mod context;
mod entry;
mod pool;
mod tensor;
mod views;
pub use context::{OpKernelContext, OutputRequest};
use entry::*;
pub(crate) use entry::{
    compute_trampoline, compute_views_trampoline, create_trampoline, destroy_trampoline,
};
pub use pool::ThreadPool;
use pool::*;
use tensor::*;
pub use tensor::{Tensor, TensorMut};
use views::*;
pub use views::{InputViews, InputViewsIter};
