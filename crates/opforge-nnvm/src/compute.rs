//! The FCompute -> core `OpKernel` adapter: how an op given only NNVM
//! attributes runs, eagerly and in sessions.
//!
//! Per call, the kernel reads the inputs' shapes, runs the op's
//! [`FInferShape`](crate::FInferShape) on them (hidden outputs included),
//! then hands the compute function one tensor per output:
//!
//! - `Write`: a fresh output of the inferred shape;
//! - `Add` (MXNet's `kAddTo`): the accumulator the runtime set, after
//!   checking its shape is the inferred one;
//! - `Null` (`kNullOp`): an empty placeholder, dropped afterwards.
//!
//! The kernel declares `Null` and `Add` support
//! ([`OpKernel::supported_requests`]), never `InPlace` (a compute function
//! gets its inputs and outputs as separate tensors), so the runtime asks
//! `Write` where it would ask `InPlace`. Hidden outputs (beyond
//! [`FNumVisibleOutputs`](crate::FNumVisibleOutputs)) are always `Write`
//! and dropped after the call.

use crate::attrs::{ComputeFn, InferShapeFn, NodeAttrs, Parsed, ResourceRequest, TShape};
use opforge_core::attrs::AttrMap;
use opforge_core::device::{Device, ThreadPool};
use opforge_core::kernel::{OpKernel, OpKernelContext, OutputRequest, RequestSupport};
use opforge_core::{DataType, Result, Status, Tensor, TensorShape};
use std::sync::Arc;

/// What a compute function may use besides its tensors (MXNet's
/// `OpContext`): the device, its thread pool, the requested resources.
pub struct OpContext<'k, 'a> {
    kernel: &'k OpKernelContext<'a>,
    temp_space: bool,
}

impl<'k, 'a> OpContext<'k, 'a> {
    /// The context of a compute function run inside `kernel`;
    /// `temp_space` says whether the op requested
    /// [`ResourceRequest::TempSpace`].
    pub fn new(kernel: &'k OpKernelContext<'a>, temp_space: bool) -> OpContext<'k, 'a> {
        OpContext { kernel, temp_space }
    }

    /// The device the computation runs on.
    pub fn device(&self) -> &'a dyn Device {
        self.kernel.device()
    }

    /// The device's thread pool.
    pub fn thread_pool(&self) -> &'a ThreadPool {
        self.kernel.thread_pool()
    }

    /// The kernel context underneath (the node's name, attrs, signature).
    pub fn kernel_context(&self) -> &'k OpKernelContext<'a> {
        self.kernel
    }

    /// Temporary workspace (MXNet's `ctx.requested[k].get_space`): a
    /// scratch tensor of `dtype` and `dims` on the device. Only for ops
    /// whose [`FResourceRequest`](crate::FResourceRequest) asks for
    /// [`ResourceRequest::TempSpace`]; otherwise `FailedPrecondition`
    /// naming the op.
    pub fn requested_temp(&self, dtype: DataType, dims: &[i64]) -> Result<Tensor> {
        if !self.temp_space {
            return Err(Status::failed_precondition(format!(
                "{}: the compute function asked for temporary workspace, but the op's \
                 FResourceRequest does not request TempSpace",
                self.kernel.op_def().name
            )));
        }
        self.kernel.allocate_temp(dtype, TensorShape::new(dims)?)
    }
}

/// The dtypes of every output (hidden ones too) given a node's attrs and
/// input dtypes.
pub(crate) type OutputTypesFn =
    dyn Fn(&NodeAttrs<'_>, &[DataType]) -> Result<Vec<DataType>> + Send + Sync;

/// What the adapter kernel needs of the op, read once when the op is
/// synthesised.
pub(crate) struct ComputeParts {
    pub(crate) op: String,
    pub(crate) compute: Arc<ComputeFn>,
    pub(crate) infer_shape: Arc<InferShapeFn>,
    pub(crate) parser: Option<fn(&str, &AttrMap) -> Result<Parsed>>,
    pub(crate) resources: Option<Arc<crate::attrs::ResourceFn>>,
    /// The dtypes of every output (hidden ones too) given the node's input
    /// dtypes and attrs.
    pub(crate) output_types: Arc<OutputTypesFn>,
    pub(crate) num_outputs: usize,
}

/// The kernel of one node: [`ComputeParts`] plus the node's parsed
/// parameters and every output's dtype.
pub(crate) struct ComputeKernel {
    parts: Arc<ComputeParts>,
    node: String,
    attrs: AttrMap,
    parsed: Option<Parsed>,
    temp_space: bool,
    output_types: Vec<DataType>,
}

impl ComputeKernel {
    pub(crate) fn new(
        parts: Arc<ComputeParts>,
        ctx: &opforge_core::kernel::OpKernelConstruction<'_>,
    ) -> Result<ComputeKernel> {
        let attrs = ctx.attrs().clone();
        let parsed = match parts.parser {
            Some(parse) => Some(parse(&parts.op, &attrs)?),
            None => None,
        };
        let node_attrs = NodeAttrs::new(&parts.op, ctx.node_name(), &attrs, parsed.as_deref());
        let temp_space = match &parts.resources {
            Some(f) => f(&node_attrs).contains(&ResourceRequest::TempSpace),
            None => false,
        };
        let mut output_types = (parts.output_types)(&node_attrs, ctx.input_types())?;
        // The visible outputs' dtypes are the signature's.
        for (t, &sig) in output_types.iter_mut().zip(ctx.output_types()) {
            *t = sig.base();
        }
        if output_types.len() != parts.num_outputs {
            return Err(Status::internal(format!(
                "{}: {} output dtypes for {} outputs",
                parts.op,
                output_types.len(),
                parts.num_outputs
            )));
        }
        Ok(ComputeKernel {
            node: ctx.node_name().to_string(),
            attrs,
            parsed,
            temp_space,
            output_types,
            parts,
        })
    }
}

impl OpKernel for ComputeKernel {
    fn supported_requests(&self) -> RequestSupport {
        RequestSupport::NULL | RequestSupport::ADD
    }

    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let op = self.parts.op.as_str();
        let node_attrs = NodeAttrs::new(op, &self.node, &self.attrs, self.parsed.as_deref());
        let mut in_shapes: Vec<TShape> =
            ctx.inputs().iter().map(|t| TShape::new(t.dims())).collect();
        let mut out_shapes = vec![TShape::unknown(); self.parts.num_outputs];
        (self.parts.infer_shape)(&node_attrs, &mut in_shapes, &mut out_shapes)?;
        let visible = ctx.num_outputs();
        let mut requests = Vec::with_capacity(out_shapes.len());
        let mut outputs = Vec::with_capacity(out_shapes.len());
        for (i, shape) in out_shapes.iter().enumerate() {
            let Some(dims) = shape.dims().filter(|_| shape.is_known()) else {
                return Err(Status::invalid_argument(format!(
                    "{op}: FInferShape left output {i} with shape {shape} for inputs of shapes \
                     {}: the compute function needs every output's shape",
                    join_shapes(ctx.inputs())
                )));
            };
            let dtype = self.output_types[i];
            let request = if i < visible {
                ctx.output_request(i)
            } else {
                OutputRequest::Write
            };
            let t = match request {
                OutputRequest::Null => Tensor::zeros(dtype, &[0])?,
                OutputRequest::Add => {
                    let acc = std::mem::replace(ctx.output_mut(i)?, Tensor::zeros(dtype, &[0])?);
                    if acc.dims() != dims {
                        return Err(Status::invalid_argument(format!(
                            "{op}: output {i} is requested with Add into an accumulator of shape \
                             {}, but the output's shape is {shape}",
                            TShape::new(acc.dims())
                        )));
                    }
                    acc
                }
                OutputRequest::Write | OutputRequest::InPlace => {
                    ctx.device().allocate(dtype, TensorShape::new(dims)?)?
                }
            };
            requests.push(if request == OutputRequest::InPlace {
                OutputRequest::Write
            } else {
                request
            });
            outputs.push(t);
        }
        {
            let op_ctx = OpContext::new(ctx, self.temp_space);
            (self.parts.compute)(&node_attrs, &op_ctx, ctx.inputs(), &requests, &mut outputs)?;
        }
        for (i, t) in outputs.into_iter().enumerate().take(visible) {
            if requests[i] != OutputRequest::Null {
                ctx.set_output(i, t)?;
            }
        }
        Ok(())
    }
}

fn join_shapes(ts: &[Tensor]) -> String {
    let shapes: Vec<String> = ts
        .iter()
        .map(|t| TShape::new(t.dims()).to_string())
        .collect();
    shapes.join(", ")
}
