//! `Const`, `Identity`, `IdentityN` and `StopGradient`.

use super::*;
use opforge_core::shape_inference::common::*;
use opforge_ops_base::shape::*;

// ---------------------------------------------------------------------------
// Const
// ---------------------------------------------------------------------------

/// `Const`.
pub fn const_op() -> OpDefBuilder {
    OpDefBuilder::new("Const")
        .output("output: dtype")
        .attr("value: tensor")
        .attr("dtype: type")
        .doc(
            "Returns a constant tensor.\n\n\
             value: Attr `value` is the tensor to return.",
        )
}

pub(super) struct ConstOp {
    value: Tensor,
}

impl CreateKernel for ConstOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let value = match ctx.attr("value").and_then(|v| v.value.as_ref()) {
            Some(Value::Tensor(proto)) => Tensor::from_proto(proto)?,
            _ => {
                return Err(Status::invalid_argument(
                    "Const: attr 'value' must be a tensor",
                ))
            }
        };
        let want = ctx.output_types()[0];
        ensure!(
            want == value.dtype(),
            InvalidArgument,
            "Type mismatch between value ({}) and dtype ({want})",
            value.dtype()
        );
        Ok(ConstOp { value })
    }
}

impl OpKernel for ConstOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ctx.set_output(0, self.value.clone())
    }
}

/// TensorFlow's `TensorShapeProto` debug string: `[1,?,3]` (`<unknown>`
/// before it for an unknown rank).
pub(super) fn proto_shape_string(p: &TensorShapeProto) -> String {
    let dims: Vec<String> = p
        .dim
        .iter()
        .map(|d| {
            if d.size == -1 {
                "?".to_string()
            } else {
                d.size.to_string()
            }
        })
        .collect();
    match (p.unknown_rank, dims.is_empty()) {
        (true, true) => "<unknown>".to_string(),
        (true, false) => format!("<unknown>[{}]", dims.join(",")),
        _ => format!("[{}]", dims.join(",")),
    }
}

/// `Const`: the shape of attr `value`, which must be a valid fully defined
/// shape (TensorFlow's `TensorShape::IsValidShape`).
pub(super) fn const_shape(c: &mut InferenceContext) -> Result<()> {
    let proto = match c.attrs().get("value").and_then(|v| v.value.as_ref()) {
        Some(Value::Tensor(t)) => t.tensor_shape.clone().unwrap_or_default(),
        _ => {
            return Err(c.get_attr::<Tensor>("value").err().unwrap_or_else(|| {
                Status::invalid_argument("Const: attr 'value' must be a tensor")
            }))
        }
    };
    let shape = proto_shape_string(&proto);
    ensure!(
        proto.dim.len() <= 254,
        InvalidArgument,
        "Shape {shape} has too many dimensions"
    );
    let mut elements: i64 = 1;
    for d in &proto.dim {
        ensure!(
            d.size >= 0,
            InvalidArgument,
            "Shape {shape} is not fully defined"
        );
        elements = elements.checked_mul(d.size).ok_or_else(|| {
            Status::invalid_argument(format!(
                "Shape {shape} is too large (more than 2**63 - 1 entries)"
            ))
        })?;
    }
    let dims: Vec<i64> = proto.dim.iter().map(|d| d.size).collect();
    let out = c.make_partial_shape(Some(&dims));
    c.set_output(0, out);
    Ok(())
}

register_op!(const_op().set_shape_fn(const_shape));
register_kernel!(KernelDefBuilder::new("Const"), ConstOp);

// ---------------------------------------------------------------------------
// Identity, IdentityN, StopGradient
// ---------------------------------------------------------------------------

/// `Identity`.
pub fn identity() -> OpDefBuilder {
    OpDefBuilder::new("Identity")
        .input("input: T")
        .output("output: T")
        .attr("T: type")
        .doc("Return a tensor with the same shape and contents as the input tensor or value.")
}

/// `IdentityN`.
pub fn identity_n() -> OpDefBuilder {
    OpDefBuilder::new("IdentityN")
        .input("input: T")
        .output("output: T")
        .attr("T: list(type)")
        .doc(
            "Returns a list of tensors with the same shapes and contents as the input\n\
             tensors.\n\n\
             This op can be used to override the gradient for complicated functions.",
        )
}

/// `StopGradient`.
pub fn stop_gradient() -> OpDefBuilder {
    OpDefBuilder::new("StopGradient")
        .input("input: T")
        .output("output: T")
        .attr("T: type")
        .doc(
            "Stops gradient computation.\n\n\
             When executed in a graph, this op outputs its input tensor as-is.",
        )
}

/// `Identity`, `IdentityN` and `StopGradient`: every input is passed
/// through to the output of the same index, without a copy.
pub(super) struct IdentityOp;

impl CreateKernel for IdentityOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(IdentityOp)
    }
}

impl OpKernel for IdentityOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ensure!(
            ctx.num_inputs() == ctx.num_outputs(),
            InvalidArgument,
            "Input and output counts must match"
        );
        for i in 0..ctx.num_inputs() {
            let t = ctx.take_input(i);
            ctx.set_output(i, t)?;
        }
        Ok(())
    }
}

/// `IdentityN`: output `i` is input `i`.
pub(super) fn identity_n_shape(c: &mut InferenceContext) -> Result<()> {
    let n = c.num_inputs();
    ensure!(
        c.num_outputs() == n,
        InvalidArgument,
        "Must have exactly {n} shapes."
    );
    for i in 0..n {
        let s = c.input(i);
        c.set_output(i, s);
    }
    Ok(())
}

register_op!(identity().set_shape_fn(common::unchanged_shape));
register_op!(identity_n().set_shape_fn(identity_n_shape));
register_op!(stop_gradient().set_shape_fn(common::unchanged_shape));
register_kernel!(KernelDefBuilder::new("Identity"), IdentityOp);
register_kernel!(KernelDefBuilder::new("IdentityN"), IdentityOp);
register_kernel!(KernelDefBuilder::new("StopGradient"), IdentityOp);

// ---------------------------------------------------------------------------

// `ImmutableConst` and `RefIdentity`: OpDef and shape function only (no CPU
// kernel: running one eagerly fails with TensorFlow's "No OpKernel was
// registered" error). `ImmutableConst` needs memory-mapped regions;
// `RefIdentity` needs ref tensors (`Ref(T)` inputs and outputs), which
// opforge's runtimes do not have. `GuaranteeConst` and `CheckNumerics`
// forward their input, as TensorFlow's CPU kernels do.

register_op!(OpDefBuilder::new("ImmutableConst")
    .attr("dtype: type")
    .attr("shape: shape")
    .attr("memory_region_name: string")
    .output("tensor: dtype")
    .set_shape_fn(explicit_shape)
    .doc(
        "Returns an immutable tensor from a memory region.\n\n\
         The tensor's memory is a read-only memory-mapped region.",
    ));

register_op!(OpDefBuilder::new("GuaranteeConst")
    .input("input: T")
    .output("output: T")
    .attr("T: type")
    .stateful()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Gives a guarantee to the runtime that the input tensor is a constant.\n\n\
         The runtime may then fold the subgraph computing it.",
    ));

register_op!(OpDefBuilder::new("RefIdentity")
    .input("input: Ref(T)")
    .output("output: Ref(T)")
    .attr("T: type")
    .allows_uninitialized_input()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc("Return the same ref tensor as the input ref tensor."));

register_op!(OpDefBuilder::new("CheckNumerics")
    .input("tensor: T")
    .output("output: T")
    .attr("T: {bfloat16, half, float, double}")
    .attr("message: string")
    .stateful()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Checks a tensor for NaN and Inf values.\n\n\
         Fails with `message` if the tensor has any; otherwise passes it through.",
    ));

// `GuaranteeConst`: TensorFlow's CPU kernel (`GuaranteeConstOp`) forwards
// its input, for every type.
register_kernel!(KernelDefBuilder::new("GuaranteeConst"), IdentityOp);

/// `CheckNumerics`: the input, forwarded, if it has no NaN and no infinity;
/// else InvalidArgument with TensorFlow's message
/// `"<message> : Tensor had {NaN|Inf|Inf and NaN} values"`.
pub(super) struct CheckNumericsOp {
    message: String,
}

impl CreateKernel for CheckNumericsOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(CheckNumericsOp {
            message: ctx.get_attr("message")?,
        })
    }
}

/// Whether `xs` (as f64 through `to_f64`) hold a NaN and an infinity.
fn nan_inf<T: Copy + Sync>(xs: &[T], to_f64: impl Fn(T) -> f64) -> (bool, bool) {
    let (mut nan, mut inf) = (false, false);
    for &x in xs {
        let v = to_f64(x);
        nan |= v.is_nan();
        inf |= v.is_infinite();
        if nan && inf {
            break;
        }
    }
    (nan, inf)
}

impl OpKernel for CheckNumericsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.take_input(0);
        let (nan, inf) = match input.dtype() {
            DataType::Float => nan_inf(input.flat::<f32>()?, f64::from),
            DataType::Double => nan_inf(input.flat::<f64>()?, |v| v),
            DataType::Half => nan_inf(input.flat::<half::f16>()?, half::f16::to_f64),
            DataType::BFloat16 => nan_inf(input.flat::<half::bf16>()?, half::bf16::to_f64),
            dt => return Err(unsupported(ctx, dt)),
        };
        let status = match (nan, inf) {
            (false, false) => return ctx.set_output(0, input),
            (true, true) => "Inf and NaN",
            (true, false) => "NaN",
            (false, true) => "Inf",
        };
        Err(Status::invalid_argument(format!(
            "{} : Tensor had {status} values",
            self.message
        )))
    }
}

register_kernel!(
    KernelDefBuilder::new("CheckNumerics").type_constraint_list(
        "T",
        &[
            DataType::Half,
            DataType::BFloat16,
            DataType::Float,
            DataType::Double
        ]
    ),
    CheckNumericsOp
);
