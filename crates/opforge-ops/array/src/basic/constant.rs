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

// `ImmutableConst` maps the file `memory_region_name` read-only and returns
// a tensor over it, as TensorFlow's CPU kernel does. `RefIdentity` has no
// kernel on purpose (`without_kernel`): it takes and returns ref tensors
// (`Ref(T)`), which opforge's runtimes do not have, so no node could ever
// feed it. `GuaranteeConst` and `CheckNumerics` forward their input, as
// TensorFlow's CPU kernels do.

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
    .without_kernel(
        "it takes and returns ref tensors (TensorFlow 1's reference variables), which opforge \
         does not have: no op produces one; use resource variables (VarHandleOp) instead"
    )
    .doc("Return the same ref tensor as the input ref tensor."));

opforge_ops_base::dtype_table! {
    /// `CheckNumerics`' `T`, in TensorFlow's order (its kernel's types).
    CHECK_NUMERICS_SPEC = FLOAT_TYPES in [BFloat16, Half, Float, Double]
}

register_op!(OpDefBuilder::new("CheckNumerics")
    .input("tensor: T")
    .output("output: T")
    .attr(format!("T: {{{CHECK_NUMERICS_SPEC}}}"))
    .attr("message: string")
    .stateful()
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Checks a tensor for NaN and Inf values.\n\n\
         Fails with `message` if the tensor has any; otherwise passes it through.",
    ));

/// `ImmutableConst`: a tensor of `dtype` and `shape` over the file
/// `memory_region_name`, mapped read-only (no copy); the mapping lives as
/// long as a tensor uses it. TensorFlow's checks and messages: NotFound for
/// a missing file, Unimplemented for string, Internal for a file shorter
/// than the tensor. The file must not change while tensors use it (the
/// op's contract: the region is immutable). A bool tensor is refused
/// (InvalidArgument) if the file holds a byte other than 0 or 1, which
/// TensorFlow does not check.
pub(super) struct ImmutableConstOp {
    dtype: DataType,
    dims: Vec<i64>,
    region: String,
}

impl CreateKernel for ImmutableConstOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let region: String = ctx.get_attr("memory_region_name")?;
        let dtype: DataType = ctx.get_attr("dtype")?;
        ensure!(
            !matches!(dtype, DataType::Resource | DataType::Variant),
            InvalidArgument,
            "Resource and variant dtypes are invalid for this op."
        );
        let shape = TensorShape::from_proto(&ctx.get_attr::<TensorShapeProto>("shape")?)?;
        Ok(ImmutableConstOp {
            dtype,
            dims: shape.dims().to_vec(),
            region,
        })
    }
}

impl OpKernel for ImmutableConstOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let path = &self.region;
        let file = std::fs::File::open(path).map_err(|e| {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => Code::NotFound,
                std::io::ErrorKind::PermissionDenied => Code::PermissionDenied,
                _ => Code::FailedPrecondition,
            };
            let what = match e.kind() {
                std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
                _ => e.to_string(),
            };
            Status::new(code, format!("{path}; {what}"))
        })?;
        ensure!(
            self.dtype != DataType::String,
            Unimplemented,
            "Sorry, DT_STRING is not currently supported for ImmutableConstOp."
        );
        let shape = TensorShape::new(&self.dims)?;
        let needed = shape
            .num_elements()
            .checked_mul(self.dtype.size())
            .ok_or_else(|| Status::invalid_argument(format!("Shape {shape} is too large")))?;
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        if needed as u64 > length {
            return Err(Status::internal(format!(
                "Readonly memory region has wrong length ({length}) when allocating {needed}"
            )));
        }
        if needed == 0 {
            let out = Tensor::zeros(self.dtype, &self.dims)?;
            return ctx.set_output(0, out);
        }
        // SAFETY: the mapping is read-only and private to this kernel; it is
        // moved into the buffer's release closure below, so the memory stays
        // mapped until the last tensor over it is dropped. A file changed or
        // truncated by another process while mapped breaks this (the
        // immutability ImmutableConst's contract demands of the region, as
        // in TensorFlow); opforge itself never writes the file.
        let map = unsafe { memmap2::MmapOptions::new().len(needed).map(&file) }
            .map_err(|e| Status::internal(format!("{path}: cannot map the file: {e}")))?;
        let ptr = std::ptr::NonNull::new(map.as_ptr().cast_mut())
            .ok_or_else(|| Status::internal(format!("{path}: the mapping has no address")))?;
        // SAFETY: `ptr` points to `needed` initialized bytes (the file's
        // first `needed` bytes, `needed <= length`) that stay mapped until
        // the release closure drops `map`; the buffer is read-only, so
        // opforge never writes them; `from_buffer` checks alignment (a
        // mapping is page-aligned) and, for bool, that every byte is 0 or 1.
        let buffer = unsafe {
            opforge_core::tensor::Buffer::from_foreign_read_only(
                ptr,
                needed,
                opforge_core::tensor::Location::Host,
                move || drop(map),
            )
        };
        let out = Tensor::from_buffer(self.dtype, &self.dims, buffer)?;
        ctx.set_output(0, out)
    }
}

register_kernel!(KernelDefBuilder::new("ImmutableConst"), ImmutableConstOp);

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
    KernelDefBuilder::new("CheckNumerics").type_constraint_list("T", FLOAT_TYPES),
    CheckNumericsOp
);
