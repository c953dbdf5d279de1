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
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
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
use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
use opforge_core::register_gradient;
use opforge_ops_base::grad::{attr_or, int_scalar, reduce_sum, slice_vector};

type Grads = Result<Vec<Option<Sym>>>;

/// TensorFlow's `_ReluGrad`: `ReluGrad(grad, relu(x))`.
fn relu_grad_fn(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    Ok(vec![Some(o.op1("ReluGrad", &[g, op.outputs[0]], &[])?)])
}

/// TensorFlow's `_ReluGradGrad`: `ReluGrad(grad, features)` for the
/// gradients, zeros for the features.
fn relu_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let x = op.inputs[1];
    let gg = o.op1("ReluGrad", &[g, x], &[])?;
    Ok(vec![Some(gg), Some(o.zeros_like(x)?)])
}

/// TensorFlow's `_Relu6Grad`: `Relu6Grad(grad, relu6(x))`.
fn relu6_grad_fn(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    Ok(vec![Some(o.op1("Relu6Grad", &[g, op.outputs[0]], &[])?)])
}

/// TensorFlow's `_Relu6GradGrad`: `Relu6Grad(grad, features)` for the
/// gradients, zeros for the features.
fn relu6_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let x = op.inputs[1];
    let gg = o.op1("Relu6Grad", &[g, x], &[])?;
    Ok(vec![Some(gg), Some(o.zeros_like(x)?)])
}

/// `Sum(x, -1, keep_dims=True)`.
fn sum_last(o: &mut dyn Ops, x: Sym) -> Result<Sym> {
    let axis = int_scalar(o, -1)?;
    reduce_sum(o, x, axis, true)
}

/// TensorFlow's `_SoftmaxGrad`: `(grad - sum(grad * softmax, -1)) * softmax`.
fn softmax_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let y = op.outputs[0];
    let gy = o.mul(g, y)?;
    let s = sum_last(o, gy)?;
    let d = o.sub(g, s)?;
    Ok(vec![Some(o.mul(d, y)?)])
}

/// TensorFlow's `_LogSoftmaxGrad`: `grad - sum(grad, -1) * exp(logsoftmax)`.
fn log_softmax_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let softmax = o.op1("Exp", &[op.outputs[0]], &[])?;
    let s = sum_last(o, g)?;
    let p = o.mul(s, softmax)?;
    Ok(vec![Some(o.sub(g, p)?)])
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
fn softmax_cross_entropy_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let (grad_loss, grad_grad) = (grads[0], grads.get(1).copied().flatten());
    let logits = op.inputs[0];
    let mut features = match grad_loss {
        Some(gl) => Some(broadcast_mul(o, gl, op.outputs[1])?),
        None => None,
    };
    if let Some(gg) = grad_grad {
        let softmax = o.op1("Softmax", &[logits], &[])?;
        // TensorFlow: squeeze(matmul(grad_grad[:, None, :], softmax[:, :, None]), 1).
        let one = int_scalar(o, 1)?;
        let two = int_scalar(o, 2)?;
        let a = o.op1("ExpandDims", &[gg, one], &[])?;
        let b = o.op1("ExpandDims", &[softmax, two], &[])?;
        let m = o.op1("BatchMatMulV2", &[a, b], &[])?;
        let dot = o.op1(
            "Squeeze",
            &[m],
            &[("squeeze_dims", vec![1i64].into_attr_value())],
        )?;
        let d = o.sub(gg, dot)?;
        let extra = o.mul(d, softmax)?;
        features = Some(match features {
            Some(f) => o.add(f, extra)?,
            None => extra,
        });
    }
    let labels = match grad_loss {
        Some(gl) => {
            let ls = o.op1("LogSoftmax", &[logits], &[])?;
            let neg = o.neg(ls)?;
            Some(broadcast_mul(o, gl, neg)?)
        }
        None => None,
    };
    Ok(vec![features, labels])
}

/// TensorFlow's `_SparseSoftmaxCrossEntropyWithLogitsGrad`: the features get
/// `grad_loss[:, None] * backprop`, the labels none. Like TensorFlow (whose
/// `PreventGradient` raises), a gradient through the backprop output is an
/// error.
fn sparse_softmax_cross_entropy_grad(
    o: &mut dyn Ops,
    op: &GradOp<'_>,
    grads: &[Option<Sym>],
) -> Grads {
    if grads.get(1).copied().flatten().is_some() {
        return Err(Status::unimplemented(
            "Currently there is no way to take the second derivative of \
             sparse_softmax_cross_entropy_with_logits due to the fused implementation's \
             interaction with tf.gradients()",
        ));
    }
    let Some(gl) = grads[0] else {
        return Ok(vec![None, None]);
    };
    Ok(vec![Some(broadcast_mul(o, gl, op.outputs[1])?), None])
}

/// The forward op's `data_format` attr, as given (none if not set).
fn data_format_attr(
    op: &GradOp<'_>,
) -> Result<Vec<(&'static str, opforge_core::proto::AttrValue)>> {
    Ok(if op.attrs.contains_key("data_format") {
        let f: String = op.attr("data_format")?;
        vec![("data_format", f.into_attr_value())]
    } else {
        Vec::new()
    })
}

/// TensorFlow's `_BiasAddGrad`: the gradient for the value, its
/// `BiasAddGrad` for the bias.
fn bias_add_grad_fn(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let attrs = data_format_attr(op)?;
    let gb = o.op1("BiasAddGrad", &[g], &attrs)?;
    Ok(vec![Some(g), Some(gb)])
}

/// TensorFlow's `_BiasAddGradGrad`: the received gradient reshaped to
/// `[1, ..., C, ...]` and tiled to the input's shape.
fn bias_add_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let nchw = attr_or(op, "data_format", "NHWC".to_string())? == "NCHW";
    let shape = o.shape_of(op.inputs[0])?;
    let bias_shape = o.shape_of(g)?;
    let one = o.int_vector(&[1])?;
    let axis = int_scalar(o, 0)?;
    let concat = |o: &mut dyn Ops, parts: Vec<Sym>| -> Result<Sym> {
        let mut out = o.call(
            "ConcatV2",
            &[SymArg::List(parts), SymArg::One(axis)],
            &Default::default(),
        )?;
        out.pop()
            .ok_or_else(|| Status::internal("ConcatV2 has no output"))
    };
    let (expanded_shape, tile_mults) = if nchw {
        let first = slice_vector(o, shape, 0, Some(1))?;
        let rest = slice_vector(o, shape, 2, None)?;
        let first_ones = o.ones_like(first)?;
        let rest_ones = o.ones_like(rest)?;
        (
            concat(o, vec![first_ones, bias_shape, rest_ones])?,
            concat(o, vec![first, one, rest])?,
        )
    } else {
        let lead = slice_vector(o, shape, 0, Some(-1))?;
        let lead_ones = o.ones_like(lead)?;
        (
            concat(o, vec![lead_ones, bias_shape])?,
            concat(o, vec![lead, one])?,
        )
    };
    let expanded = o.reshape(g, expanded_shape)?;
    Ok(vec![Some(o.op1("Tile", &[expanded, tile_mults], &[])?)])
}

register_gradient!("Relu", relu_grad_fn);
register_gradient!("ReluGrad", relu_grad_grad);
register_gradient!("Relu6", relu6_grad_fn);
register_gradient!("Relu6Grad", relu6_grad_grad);
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
