//! Neural-network ops with TensorFlow 2.21's OpDefs and CPU kernel
//! semantics: `Relu`, `ReluGrad`, `Relu6`, `Relu6Grad`, the activations
//! of `activations.rs` (`Elu`, `Selu`, `Softplus`, `Softsign`, `LeakyRelu`
//! and their `*Grad` ops), `Softmax`, `LogSoftmax`,
//! `SoftmaxCrossEntropyWithLogits`, `SparseSoftmaxCrossEntropyWithLogits`,
//! `BiasAdd` and `BiasAddGrad`.
//!
//! Softmax-style ops work row by row over the last axis, in `f32` for
//! `half`/`bfloat16` and in the element type otherwise, subtracting the
//! row's maximum first so large logits do not overflow; rows are sharded
//! over the intra-op pool. `BiasAddGrad` uses the sharded column/row sums of
//! [`crate::reduction`].

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext, OutputRequest,
    RequestSupport,
};
use opforge_core::shape_inference::{common, InferenceContext};
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::broadcast::{binary_same, broadcast_shapes, unary_same};
use opforge_ops_base::cpu::elem::{Float, Num, Ordered, RealFloat, Wide};
use opforge_ops_base::cpu::par::par_chunks;
use opforge_ops_base::cpu::par::CHEAP_COST;
use opforge_ops_base::cpu::reduce::{reduce_into, SumR};
use opforge_ops_base::types::{FLOAT_TYPES, NUMERIC_KERNEL_TYPES, REAL_KERNEL_TYPES};

opforge_ops_base::dtype_table! {
    /// The `T` of TensorFlow's activations (`Elu`, ..., `LeakyRelu` and
    /// their gradients) and softmax ops, in its order; their kernels
    /// register `FLOAT_TYPES`.
    NN_FLOAT_SPEC = FLOAT_TYPES in [Half, BFloat16, Float, Double]
}

// ---------------------------------------------------------------------------
mod defs;

mod relu_family;

mod activations;

mod softmax_family;

mod bias;

// ---- Gradients ----

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym};
use opforge_core::register_gradient;
use opforge_ops_base::grad::{attr_or, concat, int_scalar, reduce_sum, slice_vector};

/// `Sum(x, -1, keep_dims=True)`.
fn sum_last(o: &mut dyn Ops, x: Sym) -> Result<Sym> {
    let axis = int_scalar(o, -1)?;
    reduce_sum(o, x, axis, true)
}

/// TensorFlow's `_SoftmaxGrad`: `(grad - sum(grad * softmax, -1)) * softmax`.
fn softmax_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, y) = (ctx.grad()?, ctx.output(0));
    let gy = ctx.mul(g, y)?;
    let s = sum_last(ctx, gy)?;
    let d = ctx.sub(g, s)?;
    let dx = ctx.mul(d, y)?;
    ctx.set_input_grad(0, dx)
}

/// TensorFlow's `_LogSoftmaxGrad`: `grad - sum(grad, -1) * exp(logsoftmax)`.
fn log_softmax_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let softmax = ctx.op1("Exp", &[ctx.output(0)], &[])?;
    let s = sum_last(ctx, g)?;
    let p = ctx.mul(s, softmax)?;
    let dx = ctx.sub(g, p)?;
    ctx.set_input_grad(0, dx)
}

/// TensorFlow's `_BroadcastMul`: `vec[..., None] * mat`.
fn broadcast_mul(o: &mut dyn Ops, vec: Sym, mat: Sym) -> Result<Sym> {
    let axis = int_scalar(o, -1)?;
    let v = o.op1("ExpandDims", &[vec, axis], &[])?;
    o.mul(v, mat)
}

/// TensorFlow 2.x's `_SoftmaxCrossEntropyWithLogitsGrad`: the features get
/// `grad_loss[:, None] * backprop` (plus, for a gradient of the backprop
/// output, `(grad_grad - sum(grad_grad * softmax)) * softmax`), the labels
/// `grad_loss[:, None] * -log_softmax(features)`.
fn softmax_cross_entropy_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (grad_loss, grad_grad) = (ctx.output_grad(0), ctx.output_grad(1));
    let (logits, backprop) = (ctx.input(0), ctx.output(1));
    let mut features = match grad_loss {
        Some(gl) => Some(broadcast_mul(ctx, gl, backprop)?),
        None => None,
    };
    if let Some(gg) = grad_grad {
        let softmax = ctx.op1("Softmax", &[logits], &[])?;
        // TensorFlow: squeeze(matmul(grad_grad[:, None, :], softmax[:, :, None]), 1).
        let one = int_scalar(ctx, 1)?;
        let two = int_scalar(ctx, 2)?;
        let a = ctx.op1("ExpandDims", &[gg, one], &[])?;
        let b = ctx.op1("ExpandDims", &[softmax, two], &[])?;
        let m = ctx.op1("BatchMatMulV2", &[a, b], &[])?;
        let dot = ctx.op1(
            "Squeeze",
            &[m],
            &[("squeeze_dims", vec![1i64].into_attr_value())],
        )?;
        let d = ctx.sub(gg, dot)?;
        let extra = ctx.mul(d, softmax)?;
        features = Some(match features {
            Some(f) => ctx.add(f, extra)?,
            None => extra,
        });
    }
    if let Some(f) = features {
        ctx.set_input_grad(0, f)?;
    }
    if let Some(gl) = grad_loss {
        let ls = ctx.op1("LogSoftmax", &[logits], &[])?;
        let neg = ctx.neg(ls)?;
        let labels = broadcast_mul(ctx, gl, neg)?;
        ctx.set_input_grad(1, labels)?;
    }
    Ok(())
}

/// TensorFlow's `_SparseSoftmaxCrossEntropyWithLogitsGrad`: the features get
/// `grad_loss[:, None] * backprop`, the labels none. Like TensorFlow (whose
/// `PreventGradient` raises), a gradient through the backprop output is an
/// error.
fn sparse_softmax_cross_entropy_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    if ctx.output_grad(1).is_some() {
        return Err(Status::unimplemented(
            "Currently there is no way to take the second derivative of \
             sparse_softmax_cross_entropy_with_logits due to the fused implementation's \
             interaction with tf.gradients()",
        ));
    }
    let Some(gl) = ctx.output_grad(0) else {
        return Ok(());
    };
    let backprop = ctx.output(1);
    let df = broadcast_mul(ctx, gl, backprop)?;
    ctx.set_input_grad(0, df)
}

/// The forward op's `data_format` attr, as given (none if not set).
fn data_format_attr(
    ctx: &GradientContext<'_>,
) -> Result<Vec<(&'static str, opforge_core::proto::AttrValue)>> {
    Ok(if ctx.attrs().contains_key("data_format") {
        let f: String = ctx.get_attr("data_format")?;
        vec![("data_format", f.into_attr_value())]
    } else {
        Vec::new()
    })
}

/// TensorFlow's `_BiasAddGrad`: the gradient for the value, its
/// `BiasAddGrad` for the bias.
fn bias_add_grad_fn(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let attrs = data_format_attr(ctx)?;
    let gb = ctx.op1("BiasAddGrad", &[g], &attrs)?;
    ctx.set_input_grad(0, g)?;
    ctx.set_input_grad(1, gb)
}

/// TensorFlow's `_BiasAddGradGrad`: the received gradient reshaped to
/// `[1, ..., C, ...]` and tiled to the input's shape.
fn bias_add_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let nchw = attr_or(ctx, "data_format", "NHWC".to_string())? == "NCHW";
    let shape = ctx.shape_of(ctx.input(0))?;
    let bias_shape = ctx.shape_of(g)?;
    let one = ctx.int_vector(&[1])?;
    let axis = int_scalar(ctx, 0)?;
    let (expanded_shape, tile_mults) = if nchw {
        let first = slice_vector(ctx, shape, 0, Some(1))?;
        let rest = slice_vector(ctx, shape, 2, None)?;
        let first_ones = ctx.ones_like(first)?;
        let rest_ones = ctx.ones_like(rest)?;
        (
            concat(ctx, &[first_ones, bias_shape, rest_ones], axis)?,
            concat(ctx, &[first, one, rest], axis)?,
        )
    } else {
        let lead = slice_vector(ctx, shape, 0, Some(-1))?;
        let lead_ones = ctx.ones_like(lead)?;
        (
            concat(ctx, &[lead_ones, bias_shape], axis)?,
            concat(ctx, &[lead, one], axis)?,
        )
    };
    let expanded = ctx.reshape(g, expanded_shape)?;
    let dx = ctx.op1("Tile", &[expanded, tile_mults], &[])?;
    ctx.set_input_grad(0, dx)
}

// TensorFlow's `_ReluGrad` and `_Relu6Grad`: `<grad op>(grad, y)`.
register_gradient!("Relu", activations::activation_grad("ReluGrad", true));
register_gradient!(
    "ReluGrad",
    activations::piecewise_linear_grad_grad("ReluGrad")
);
register_gradient!("Relu6", activations::activation_grad("Relu6Grad", true));
register_gradient!(
    "Relu6Grad",
    activations::piecewise_linear_grad_grad("Relu6Grad")
);
register_gradient!("Softmax", softmax_grad);
register_gradient!("LogSoftmax", log_softmax_grad);
register_gradient!("SoftmaxCrossEntropyWithLogits", softmax_cross_entropy_grad);
register_gradient!(
    "SparseSoftmaxCrossEntropyWithLogits",
    sparse_softmax_cross_entropy_grad
);
register_gradient!("BiasAdd", bias_add_grad_fn);
register_gradient!("BiasAddGrad", bias_add_grad_grad);

#[cfg(test)]
mod tests;

#[cfg(test)]
mod activation_tests;
#[cfg(test)]
mod request_tests;
