//! The OpDefs and shape functions of the neural-network ops.

use super::*;

// OpDefs
// ---------------------------------------------------------------------------

/// `Relu`.
pub fn relu() -> OpDefBuilder {
    OpDefBuilder::new("Relu")
        .input("features: T")
        .output("activations: T")
        .attr("T: {realnumbertype, qint8}")
        .set_shape_fn(common::unchanged_shape)
        .doc("Computes rectified linear: `max(features, 0)`.")
}

/// `ReluGrad`.
pub fn relu_grad() -> OpDefBuilder {
    OpDefBuilder::new("ReluGrad")
        .input("gradients: T")
        .input("features: T")
        .output("backprops: T")
        .attr("T: realnumbertype")
        .set_shape_fn(merge_both_inputs_shape)
        .doc(
            "Computes rectified linear gradients for a Relu operation.\n\n\
             `backprops = gradients * (features > 0)`; `gradients` and `features`\n\
             must have the same shape.",
        )
}

/// `Relu6`.
pub fn relu6() -> OpDefBuilder {
    OpDefBuilder::new("Relu6")
        .input("features: T")
        .output("activations: T")
        .attr("T: realnumbertype")
        .set_shape_fn(common::unchanged_shape)
        .doc("Computes rectified linear 6: `min(max(features, 0), 6)`.")
}

/// `Relu6Grad`.
pub fn relu6_grad() -> OpDefBuilder {
    OpDefBuilder::new("Relu6Grad")
        .input("gradients: T")
        .input("features: T")
        .output("backprops: T")
        .attr("T: realnumbertype")
        .set_shape_fn(merge_both_inputs_shape)
        .doc(
            "Computes rectified linear 6 gradients for a Relu6 operation.\n\n\
             `backprops = gradients * (features > 0) * (features < 6)`; `features` are\n\
             the inputs or the outputs of the Relu6, of the shape of `gradients`.",
        )
}

/// `Softmax`.
pub fn softmax() -> OpDefBuilder {
    OpDefBuilder::new("Softmax")
        .input("logits: T")
        .output("softmax: T")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}}"))
        .set_shape_fn(softmax_shape)
        .doc(
            "Computes softmax activations.\n\n\
             For each batch `i` and class `j` we have\n\n\
             $$softmax[i, j] = exp(logits[i, j]) / sum_j(exp(logits[i, j]))$$\n\n\
             over the last dimension of `logits` (rank >= 1).",
        )
}

/// `LogSoftmax`.
pub fn log_softmax() -> OpDefBuilder {
    OpDefBuilder::new("LogSoftmax")
        .input("logits: T")
        .output("logsoftmax: T")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}}"))
        .set_shape_fn(softmax_shape)
        .doc(
            "Computes log softmax activations.\n\n\
             For each batch `i` and class `j` we have\n\n\
             logsoftmax[i, j] = logits[i, j] - log(sum(exp(logits[i])))\n\n\
             over the last dimension of `logits` (rank >= 1).",
        )
}

/// `SoftmaxCrossEntropyWithLogits`.
pub fn softmax_cross_entropy_with_logits() -> OpDefBuilder {
    OpDefBuilder::new("SoftmaxCrossEntropyWithLogits")
        .input("features: T")
        .input("labels: T")
        .output("loss: T")
        .output("backprop: T")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}}"))
        .set_shape_fn(softmax_cross_entropy_shape)
        .doc(
            "Computes softmax cross entropy cost and gradients to backpropagate.\n\n\
             Inputs are the logits, not probabilities. `features` and `labels` are\n\
             `[batch_size, num_classes]` or broadcast to it; `loss` is `[batch_size]`\n\
             and `backprop` (the gradient of the loss with respect to the logits) is\n\
             `[batch_size, num_classes]`.",
        )
}

/// `SparseSoftmaxCrossEntropyWithLogits`.
pub fn sparse_softmax_cross_entropy_with_logits() -> OpDefBuilder {
    OpDefBuilder::new("SparseSoftmaxCrossEntropyWithLogits")
        .input("features: T")
        .input("labels: Tlabels")
        .output("loss: T")
        .output("backprop: T")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}}"))
        .attr("Tlabels: {int32, int64} = DT_INT64")
        .set_shape_fn(sparse_softmax_cross_entropy_shape)
        .doc(
            "Computes softmax cross entropy cost and gradients to backpropagate.\n\n\
             Unlike `SoftmaxCrossEntropyWithLogits`, this operation does not accept a\n\
             matrix of label probabilities, but rather a single label per row of\n\
             features. `features` is `[batch_size, num_classes]`, `labels` is\n\
             `[batch_size]` with values in `[0, num_classes)`.",
        )
}

/// `BiasAdd`.
pub fn bias_add() -> OpDefBuilder {
    OpDefBuilder::new("BiasAdd")
        .attr("T: numbertype")
        .input("value: T")
        .input("bias: T")
        .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
        .set_shape_fn(bias_add_shape)
        .output("output: T")
        .doc(
            "Adds `bias` to `value`.\n\n\
             This is a special case of `tf.add` where `bias` is restricted to be 1-D.\n\
             Broadcasting is supported, so `value` may have any number of dimensions\n\
             (at least 2); `bias` has the size of its channel dimension (the last one\n\
             for NHWC, dimension 1 for NCHW).",
        )
}

/// `BiasAddGrad`.
pub fn bias_add_grad() -> OpDefBuilder {
    OpDefBuilder::new("BiasAddGrad")
        .attr("T: numbertype")
        .input("out_backprop: T")
        .attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
        .set_shape_fn(bias_add_grad_shape)
        .output("output: T")
        .doc(
            "The backward operation for \"BiasAdd\" on the \"bias\" tensor.\n\n\
             It accumulates all the values from out_backprop into the feature\n\
             dimension. For NHWC data format, the feature dimension is the last. For\n\
             NCHW data format, the feature dimension is dimension 1.",
        )
}

// ---- Shape functions (TensorFlow's nn_ops.cc) ----

/// TensorFlow's `MergeBothInputsShapeFn`.
pub(super) fn merge_both_inputs_shape(c: &mut InferenceContext) -> Result<()> {
    let (a, b) = (c.input(0), c.input(1));
    let out = c.merge(a, b)?;
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `UnchangedShapeWithRankAtLeast(c, 1)`.
pub(super) fn softmax_shape(c: &mut InferenceContext) -> Result<()> {
    let s = c.input(0);
    let out = c.with_rank_at_least(s, 1)?;
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow 2.x's `SoftmaxCrossEntropyWithLogits` shape function: equal
/// `[batch, classes]` inputs, else their broadcast, which must be of rank 2.
pub(super) fn softmax_cross_entropy_shape(c: &mut InferenceContext) -> Result<()> {
    let (features, labels) = (c.input(0), c.input(1));
    if let Ok(input) = c.with_rank(features, 2) {
        if let Ok(input) = c.merge(input, labels) {
            let batch = c.dim(input, 0);
            let loss = c.vector(batch);
            c.set_output(0, loss);
            c.set_output(1, input);
            return Ok(());
        }
    }
    let out = common::broadcast_shapes(c, features, labels, true)?;
    c.set_output(1, out);
    match c.rank(out) {
        None => Err(Status::invalid_argument(
            "Shape must be broadcasted with rank 2, but is rank is unknown.",
        )),
        Some(r) if r != 2 => Err(Status::invalid_argument(format!(
            "Shape must be broadcasted with rank 2, but is rank {r}"
        ))),
        Some(_) => {
            let batch = c.dim(out, 0);
            let loss = c.vector(batch);
            c.set_output(0, loss);
            Ok(())
        }
    }
}

/// TensorFlow's `SparseSoftmaxCrossEntropyWithLogits` shape function.
pub(super) fn sparse_softmax_cross_entropy_shape(c: &mut InferenceContext) -> Result<()> {
    let (f0, l0) = (c.input(0), c.input(1));
    let features = c.with_rank(f0, 2)?;
    let labels = c.with_rank(l0, 1)?;
    let (fb, lb) = (c.dim(features, 0), c.dim(labels, 0));
    let batch = c.merge_dim(fb, lb)?;
    let features = c.replace_dim(features, 0, batch)?;
    let loss = c.vector(batch);
    c.set_output(0, loss);
    c.set_output(1, features);
    Ok(())
}

/// Whether the node's `data_format` is NCHW (a missing attr counts as NHWC,
/// as TensorFlow's shape functions tolerate it).
pub(super) fn shape_is_nchw(c: &InferenceContext) -> bool {
    matches!(c.get_attr::<String>("data_format"), Ok(f) if f == "NCHW")
}

/// TensorFlow's `BiasAddShape`.
pub(super) fn bias_add_shape(c: &mut InferenceContext) -> Result<()> {
    let nchw = shape_is_nchw(c);
    let value = c.input(0);
    let input = c.with_rank_at_least(value, if nchw { 3 } else { 2 })?;
    let b = c.input(1);
    let bias = c.with_rank(b, 1)?;
    let bias_dim = c.dim(bias, 0);
    if c.rank(input).is_none() {
        return common::unknown_shape(c);
    }
    let out = if nchw {
        let first = c.subshape(input, 0, Some(1))?;
        let last = c.subshape(input, 2, None)?;
        let input_bias_dim = c.dim(input, 1);
        let merged = c.merge_dim(input_bias_dim, bias_dim)?;
        let merged = c.vector(merged);
        let temp = c.concatenate(first, merged)?;
        c.concatenate(temp, last)?
    } else {
        let all_but_bias = c.subshape(input, 0, Some(-1))?;
        let input_bias_dim = c.dim(input, -1);
        let merged = c.merge_dim(input_bias_dim, bias_dim)?;
        let merged = c.vector(merged);
        c.concatenate(all_but_bias, merged)?
    };
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `BiasAddGradShape`: a vector of the channel dim (the last
/// for NHWC, the third-to-last for NCHW).
pub(super) fn bias_add_grad_shape(c: &mut InferenceContext) -> Result<()> {
    let nchw = shape_is_nchw(c);
    let g = c.input(0);
    let input = c.with_rank_at_least(g, if nchw { 3 } else { 2 })?;
    // The channel: last for NHWC, dimension 1 for NCHW, as the kernel (and
    // TensorFlow's kernel) reduces. TensorFlow's shape function takes the
    // third-to-last dim for NCHW, which is the channel only at rank 4, so
    // graph shapes disagreed with the values at ranks 3 and 5.
    let d = c.dim(input, if nchw { 1 } else { -1 });
    let out = c.vector(d);
    c.set_output(0, out);
    Ok(())
}

register_op!(relu());
register_op!(relu_grad());
register_op!(relu6());
register_op!(relu6_grad());
register_op!(softmax());
register_op!(log_softmax());
register_op!(softmax_cross_entropy_with_logits());
register_op!(sparse_softmax_cross_entropy_with_logits());
register_op!(bias_add());
register_op!(bias_add_grad());

// ---------------------------------------------------------------------------
