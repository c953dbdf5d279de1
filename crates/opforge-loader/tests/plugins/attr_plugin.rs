//! A test op library (built by tests/attr_values.rs with a nested cargo):
//! `AttrProbe` has a `value: tensor` and an `f: func` attr, read by its
//! kernel at creation and by its shape function.
//!
//! - `y: float`: the tensor attr's elements as f32 (numeric dtypes), or the
//!   byte length of each element (`DT_STRING`); shape: the tensor's dims,
//!   which the shape function sets from the attr.
//! - `info: string` (shape `[3]`): the tensor's dtype number, the function's
//!   name, and its attr names joined with `,`. The shape function sets
//!   `[3]` only if the function's name is not empty and fails with
//!   `InvalidArgument` naming `f` otherwise.

use opforge_plugin::prelude::*;
use opforge_plugin::{FuncAttr, KernelDef, TensorAttr};

/// `AttrProbe`'s declaration.
pub const ATTR_PROBE: OpDefBuilder = OpDefBuilder::new("AttrProbe")
    .attr("value: tensor")
    .attr("f: func")
    .output("y: float")
    .output("info: string")
    .set_shape_fn(attr_probe_shape)
    .doc("Echoes its tensor and func attrs.");

fn attr_probe_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let value: TensorAttr = c.get_attr("value")?;
    let f: FuncAttr = c.get_attr("f")?;
    ensure!(
        !f.name.is_empty(),
        InvalidArgument,
        "AttrProbe: f names no function"
    );
    let y = c.make_partial_shape(Some(&value.dims))?;
    c.set_output(0, y)?;
    let info = c.vector(3)?;
    c.set_output(1, info)
}

/// The kernel: what it read at creation.
pub struct AttrProbeKernel {
    values: Vec<f32>,
    dims: Vec<i64>,
    info: [Vec<u8>; 3],
}

fn elements(t: &TensorAttr) -> Result<Vec<f32>> {
    let chunks = |n: usize| t.bytes.chunks_exact(n);
    Ok(match t.dtype {
        DataType::Float => chunks(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        DataType::Int32 => chunks(4)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as f32)
            .collect(),
        DataType::Int64 => chunks(8)
            .map(|b| i64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
            .collect(),
        DataType::String => t.strings.iter().map(|s| s.len() as f32).collect(),
        other => {
            return Err(Status::unimplemented(format!(
                "AttrProbe does not read {other} tensors"
            )))
        }
    })
}

impl CreateKernel for AttrProbeKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        let value: TensorAttr = init.get_attr("value")?;
        let f: FuncAttr = init.get_attr("f")?;
        Ok(AttrProbeKernel {
            values: elements(&value)?,
            dims: value.dims.clone(),
            info: [
                value.dtype.0.to_string().into_bytes(),
                f.name.into_bytes(),
                f.attr_names.join(",").into_bytes(),
            ],
        })
    }
}

impl OpKernel for AttrProbeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ctx.set_output_from_vec(0, &self.dims, self.values.clone())?;
        let info: Vec<&[u8]> = self.info.iter().map(Vec::as_slice).collect();
        ctx.set_output_strings(1, &[3], &info)
    }
}

/// `AttrProbe`'s kernel definition.
pub const ATTR_PROBE_KERNEL: KernelDef =
    KernelDefBuilder::new("AttrProbe").build::<AttrProbeKernel>();

opforge_plugin::export! {
    name: "attr_plugin",
    version: "0.1.0",
    ops: [ATTR_PROBE],
    kernels: [ATTR_PROBE_KERNEL],
    gradients: [],
}
