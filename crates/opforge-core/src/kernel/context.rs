//! What a kernel sees: [`OpKernelConstruction`] once per node, and
//! [`OpKernelContext`] on every run.

use crate::attrs::{get_attr, AttrMap, FromAttrValue};
use crate::device::{Device, ThreadPool};
use crate::proto::{AttrValue, OpDef};
use crate::resource::ResourceMgr;
use crate::tensor::{Tensor, TensorShape};
use crate::{DataType, Result, Status};
use std::ops::Range;
use std::sync::OnceLock;

/// What a kernel's constructor may read: the node's attrs, its dtypes and
/// the device. Validation that fails here fails the node's construction.
pub struct OpKernelConstruction<'a> {
    pub(crate) op_def: &'a OpDef,
    pub(crate) node_name: &'a str,
    pub(crate) attrs: &'a AttrMap,
    pub(crate) device: &'a dyn Device,
    pub(crate) input_types: &'a [DataType],
    pub(crate) output_types: &'a [DataType],
}

impl<'a> OpKernelConstruction<'a> {
    /// A construction context (for runtimes and tests that build kernels themselves).
    pub fn new(
        op_def: &'a OpDef,
        node_name: &'a str,
        attrs: &'a AttrMap,
        device: &'a dyn Device,
        input_types: &'a [DataType],
        output_types: &'a [DataType],
    ) -> Self {
        OpKernelConstruction {
            op_def,
            node_name,
            attrs,
            device,
            input_types,
            output_types,
        }
    }

    /// Attr `name` as a `T` (`InvalidArgument` if missing or of another type).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        get_attr(&self.op_def.name, self.attrs, name)
    }

    /// Attr `name` as it is stored.
    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attrs.get(name)
    }

    /// Every attr of the node.
    pub fn attrs(&self) -> &AttrMap {
        self.attrs
    }

    /// The op's definition.
    pub fn op_def(&self) -> &OpDef {
        self.op_def
    }

    /// The node's name (the op's name in eager mode).
    pub fn node_name(&self) -> &str {
        self.node_name
    }

    /// The device type the kernel is built for.
    pub fn device_type(&self) -> &'static str {
        self.device.device_type()
    }

    /// The dtype of each flat input.
    pub fn input_types(&self) -> &[DataType] {
        self.input_types
    }

    /// The dtype of each flat output.
    pub fn output_types(&self) -> &[DataType] {
        self.output_types
    }
}

/// Per-node data a runtime computes once and every run of the kernel shares.
#[derive(Clone, Debug)]
pub struct KernelSignature {
    /// The op's definition.
    pub op_def: OpDef,
    /// The node's name.
    pub node_name: String,
    /// The node's attrs.
    pub attrs: AttrMap,
    /// Flat input dtypes.
    pub input_types: Vec<DataType>,
    /// Flat output dtypes.
    pub output_types: Vec<DataType>,
    /// The flat input indices of each input argument.
    pub input_ranges: Vec<Range<usize>>,
    /// The flat output indices of each output argument.
    pub output_ranges: Vec<Range<usize>>,
}

impl KernelSignature {
    /// The flat indices of the input (or output) argument named `name`.
    pub fn arg_range(&self, name: &str, output: bool) -> Result<Range<usize>> {
        let (args, ranges, kind) = if output {
            (&self.op_def.output_arg, &self.output_ranges, "output")
        } else {
            (&self.op_def.input_arg, &self.input_ranges, "input")
        };
        let idx = args.iter().position(|a| a.name == name).ok_or_else(|| {
            Status::invalid_argument(format!("{} has no {kind} named '{name}'", self.op_def.name))
        })?;
        Ok(ranges[idx].clone())
    }
}

fn placeholder() -> &'static Tensor {
    static EMPTY: OnceLock<Tensor> = OnceLock::new();
    EMPTY.get_or_init(|| Tensor::zeros(DataType::Float, &[0]).expect("an empty tensor"))
}

/// What a kernel sees on one run: its inputs, its output slots, the device
/// (allocator and thread pool) and the resource manager.
pub struct OpKernelContext<'a> {
    sig: &'a KernelSignature,
    inputs: Vec<Tensor>,
    outputs: Vec<Option<Tensor>>,
    device: &'a dyn Device,
    resource_mgr: &'a ResourceMgr,
}

impl<'a> OpKernelContext<'a> {
    /// A context over `inputs` (flat, in the signature's order).
    pub fn new(
        sig: &'a KernelSignature,
        inputs: Vec<Tensor>,
        device: &'a dyn Device,
        resource_mgr: &'a ResourceMgr,
    ) -> Self {
        let outputs = vec![None; sig.output_types.len()];
        OpKernelContext {
            sig,
            inputs,
            outputs,
            device,
            resource_mgr,
        }
    }

    /// The op's definition.
    pub fn op_def(&self) -> &OpDef {
        &self.sig.op_def
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.sig.node_name
    }

    /// The number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Flat input `i`. Panics if `i` is out of range (a kernel bug: the
    /// number of inputs is fixed by the op's signature), or reads an empty
    /// tensor if the input was forwarded to an output.
    pub fn input(&self, i: usize) -> &Tensor {
        &self.inputs[i]
    }

    /// All flat inputs.
    pub fn inputs(&self) -> &[Tensor] {
        &self.inputs
    }

    /// The tensors of the input argument named `name`.
    pub fn input_list(&self, name: &str) -> Result<&[Tensor]> {
        let range = self.sig.arg_range(name, false)?;
        Ok(&self.inputs[range])
    }

    /// The dtype of flat input `i`.
    pub fn input_dtype(&self, i: usize) -> DataType {
        self.sig.input_types[i]
    }

    /// Moves flat input `i` out of the context (leaving an empty tensor), for
    /// kernels that pass an input through or update it in place.
    pub fn take_input(&mut self, i: usize) -> Tensor {
        std::mem::replace(&mut self.inputs[i], placeholder().clone())
    }

    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The dtype output `i` must have.
    pub fn output_type(&self, i: usize) -> DataType {
        self.sig.output_types[i]
    }

    /// The flat output indices of the output argument named `name`.
    pub fn output_range(&self, name: &str) -> Result<Range<usize>> {
        self.sig.arg_range(name, true)
    }

    /// Allocates output `i` with `shape` (its dtype is the signature's) and
    /// returns it for writing. Its contents are unspecified.
    pub fn allocate_output(&mut self, i: usize, shape: TensorShape) -> Result<&mut Tensor> {
        let t = self.device.allocate(self.sig.output_types[i], shape)?;
        Ok(self.outputs[i].insert(t))
    }

    /// Reuses one of the `candidates` inputs' buffer for output `i` when it
    /// has the output's dtype and `shape` and no other tensor shares it (the
    /// input is then moved to the output, and the kernel must compute in
    /// place); otherwise allocates output `i`. Returns the input forwarded,
    /// if any.
    pub fn forward_input_or_allocate_output(
        &mut self,
        candidates: &[usize],
        i: usize,
        shape: &TensorShape,
    ) -> Result<Option<usize>> {
        let dtype = self.sig.output_types[i];
        for &c in candidates {
            let input = &self.inputs[c];
            if input.dtype() == dtype
                && input.shape() == shape
                && input.is_uniquely_owned()
                && input.location() == self.device.location()
                && !std::ptr::eq(input, placeholder())
            {
                let t = self.take_input(c);
                self.outputs[i] = Some(t);
                return Ok(Some(c));
            }
        }
        self.allocate_output(i, shape.clone())?;
        Ok(None)
    }

    /// The inputs and output `i` at once (output `i` must have been
    /// allocated), for kernels that read inputs while writing the output.
    pub fn inputs_and_output(&mut self, i: usize) -> Result<(&[Tensor], &mut Tensor)> {
        let name = &self.sig.op_def.name;
        let out = self.outputs[i].as_mut().ok_or_else(|| {
            Status::internal(format!("{name}: output {i} used before it was allocated"))
        })?;
        Ok((&self.inputs, out))
    }

    /// Output `i`, if set.
    pub fn output(&self, i: usize) -> Option<&Tensor> {
        self.outputs[i].as_ref()
    }

    /// Output `i` for writing (must have been allocated or set).
    pub fn output_mut(&mut self, i: usize) -> Result<&mut Tensor> {
        let name = &self.sig.op_def.name;
        self.outputs[i].as_mut().ok_or_else(|| {
            Status::internal(format!("{name}: output {i} used before it was allocated"))
        })
    }

    /// Sets output `i` to an existing tensor (which must have the output's dtype).
    pub fn set_output(&mut self, i: usize, t: Tensor) -> Result<()> {
        let want = self.sig.output_types[i].base();
        if t.dtype() != want {
            return Err(Status::internal(format!(
                "{}: output {i} must be {want}, but the kernel produced {}",
                self.sig.op_def.name,
                t.dtype()
            )));
        }
        self.outputs[i] = Some(t);
        Ok(())
    }

    /// A scratch tensor.
    pub fn allocate_temp(&self, dtype: DataType, shape: TensorShape) -> Result<Tensor> {
        self.device.allocate(dtype, shape)
    }

    /// The device the kernel runs on (borrowed for the whole run, not just
    /// this call, so it can be held while outputs are written).
    pub fn device(&self) -> &'a dyn Device {
        self.device
    }

    /// The device's intra-op thread pool (borrowed for the whole run).
    pub fn thread_pool(&self) -> &'a ThreadPool {
        self.device.thread_pool()
    }

    /// The resource manager for op state (borrowed for the whole run).
    pub fn resource_mgr(&self) -> &'a ResourceMgr {
        self.resource_mgr
    }

    /// The node's attrs.
    pub fn attrs(&self) -> &AttrMap {
        &self.sig.attrs
    }

    /// The outputs, once the kernel has set them all.
    pub fn into_outputs(self) -> Result<Vec<Tensor>> {
        let name = &self.sig.op_def.name;
        self.outputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                t.ok_or_else(|| {
                    Status::internal(format!("{name}: the kernel did not set output {i}"))
                })
            })
            .collect()
    }
}
