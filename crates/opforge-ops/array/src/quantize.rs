//! Quantization ops of TensorFlow's `array_ops`, with TensorFlow 2.21's
//! exact OpDefs, shape functions and CPU kernels: `Dequantize`
//! (`dequantize.rs`), the FakeQuant family (`FakeQuantWithMinMaxArgs`,
//! `FakeQuantWithMinMaxVars`, `FakeQuantWithMinMaxVarsPerChannel` and
//! their `*Gradient` ops, [`fake_quant`]), `QuantizeAndDequantize` (V1)
//! and `QuantizeAndDequantizeV2` (`qdq.rs`), `QuantizedConcat` and
//! `QuantizedReshape` (`quantized.rs`); gradients where TensorFlow's
//! Python registers them.

use fake_quant::{ArgsParams, GridParams};
use opforge_core::shape_inference::common::{concat_shape_helper, unchanged_shape};
use opforge_core::shape_inference::InferenceContext;
use opforge_core::{register_op, OpDefBuilder, Result, Status};
use opforge_ops_base::shape::{reshape_shape, with_inputs};
use opforge_ops_base::types::FLOAT_DOUBLE_TYPES;

opforge_ops_base::dtype_table! {
    /// `T` of `QuantizeAndDequantize` (V1, V2), in TensorFlow's order: its
    /// kernels run `float` and `double` only.
    QDQ_SPEC = FLOAT_DOUBLE_TYPES, no_kernel [BFloat16, Half] in [BFloat16, Half, Float, Double]
}

register_op!(OpDefBuilder::new("QuantizeAndDequantize")
    .input("input: T")
    .attr("signed_input: bool = true")
    .attr("num_bits: int = 8")
    .attr("range_given: bool = false")
    .attr("input_min: float = 0")
    .attr("input_max: float = 0")
    .output("output: T")
    .attr(format!("T: {{{QDQ_SPEC}}}"))
    .deprecated(22, "Replaced by QuantizeAndDequantizeV2")
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc("Use QuantizeAndDequantizeV2 instead."));

register_op!(OpDefBuilder::new("QuantizeAndDequantizeV2")
    .input("input: T")
    .input("input_min: T")
    .input("input_max: T")
    .attr("signed_input: bool = true")
    .attr("num_bits: int = 8")
    .attr("range_given: bool = false")
    .output("output: T")
    .attr(format!("T: {{{QDQ_SPEC}}}"))
    .attr("round_mode: {'HALF_TO_EVEN', 'HALF_UP'} = 'HALF_TO_EVEN'")
    .attr("narrow_range: bool = false")
    .attr("axis: int = -1")
    .set_shape_fn(with_inputs(3, quantize_and_dequantize_v2_shape))
    .doc(
        "Quantizes then dequantizes a tensor.\n\n\
         Rounds the input to the values a `num_bits` quantization over `[input_min, input_max]` \
         can represent (per slice along `axis`, unless it is -1).",
    ));

fn quantize_and_dequantize_v2_shape(c: &mut InferenceContext) -> Result<()> {
    let axis: i32 = c.get_attr("axis")?;
    let minmax_rank = if axis == -1 { 0 } else { 1 };
    let (min, max) = (c.input(1), c.input(2));
    let minmax = c.with_rank(min, minmax_rank)?;
    let minmax = c.merge(max, minmax)?;
    if axis < -1 {
        return Err(Status::invalid_argument(format!(
            "axis should be at least -1, got {axis}"
        )));
    }
    if axis != -1 {
        let i = c.input(0);
        let input = c.with_rank_at_least(i, axis as usize + 1)?;
        let (depth, d) = (c.dim(minmax, 0), c.dim(input, i64::from(axis)));
        c.merge_dim(depth, d)?;
    }
    let i = c.input(0);
    c.set_output(0, i);
    Ok(())
}

register_op!(OpDefBuilder::new("Dequantize")
    .input("input: T")
    .input("min_range: float")
    .input("max_range: float")
    .output("output: dtype")
    .attr("T: quantizedtype")
    .attr("mode: {'MIN_COMBINED', 'MIN_FIRST', 'SCALED'} = 'MIN_COMBINED'")
    .attr("narrow_range: bool = false")
    .attr("axis: int = -1")
    .attr("dtype: {bfloat16, float} = DT_FLOAT")
    .set_shape_fn(with_inputs(3, dequantize_shape))
    .doc(
        "Dequantize the 'input' tensor into a float or bfloat16 Tensor.\n\n\
         `[min_range, max_range]` are the float values the quantized range maps to (per slice \
         along `axis`, unless it is -1).",
    ));

fn dequantize_shape(c: &mut InferenceContext) -> Result<()> {
    // TensorFlow tolerates a node without the attr (older graphs).
    let axis: i32 = if c.has_attr("axis") {
        c.get_attr("axis")?
    } else {
        -1
    };
    if axis < -1 {
        return Err(Status::invalid_argument(format!(
            "axis should be at least -1, got {axis}"
        )));
    }
    let input_dims = c.rank(c.input(0)).map_or(-1, |r| r as i64);
    if i64::from(axis) > input_dims {
        return Err(Status::invalid_argument(format!(
            "Axis must be less than input dimension({input_dims}), got {axis}"
        )));
    }
    let minmax_rank = if axis == -1 { 0 } else { 1 };
    unchanged_shape(c)?;
    let (min, max) = (c.input(1), c.input(2));
    c.with_rank(min, minmax_rank)?;
    let minmax = c.with_rank(max, minmax_rank)?;
    if axis != -1 {
        if axis == i32::MAX {
            return Err(Status::invalid_argument(format!(
                "Axis cannot be >= kint32max value, got {axis}"
            )));
        }
        let i = c.input(0);
        let input = c.with_rank_at_least(i, axis as usize + 1)?;
        let (depth, d) = (c.dim(minmax, 0), c.dim(input, i64::from(axis)));
        c.merge_dim(depth, d)?;
    }
    Ok(())
}

register_op!(OpDefBuilder::new("QuantizedConcat")
    .input("concat_dim: int32")
    .input("values: N * T")
    .input("input_mins: N * float32")
    .input("input_maxes: N * float32")
    .output("output: T")
    .output("output_min: float")
    .output("output_max: float")
    .attr("N: int >= 2")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, quantized_concat_shape))
    .doc(
        "Concatenates quantized tensors along one dimension.\n\n\
         The inputs are requantized to the union of their ranges.",
    ));

fn quantized_concat_shape(c: &mut InferenceContext) -> Result<()> {
    let n = (c.num_inputs() - 1) / 3;
    concat_shape_helper(c, 1, 1 + n, 0)?;
    for i in n + 1..c.num_inputs() {
        let s = c.input(i);
        c.with_rank(s, 0)?;
    }
    set_scalar_outputs(c);
    Ok(())
}

/// Outputs 1 and 2 (a quantized op's output range) are scalars.
fn set_scalar_outputs(c: &mut InferenceContext) {
    for i in 1..c.num_outputs().min(3) {
        let s = c.scalar();
        c.set_output(i, s);
    }
}

register_op!(OpDefBuilder::new("QuantizedReshape")
    .input("tensor: T")
    .input("shape: Tshape")
    .input("input_min: float")
    .input("input_max: float")
    .output("output: T")
    .output("output_min: float")
    .output("output_max: float")
    .attr("T: type")
    .attr("Tshape: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(4, quantized_reshape_shape))
    .doc(
        "Reshapes a quantized tensor as per the Reshape op.\n\n\
         The output range is the input range.",
    ));

fn quantized_reshape_shape(c: &mut InferenceContext) -> Result<()> {
    reshape_shape(c)?;
    let (min, max) = (c.input(2), c.input(3));
    c.with_rank(min, 0)?;
    c.with_rank(max, 0)?;
    set_scalar_outputs(c);
    Ok(())
}

register_op!(OpDefBuilder::new("FakeQuantWithMinMaxArgs")
    .params::<ArgsParams>()
    .input("inputs: float")
    .output("outputs: float")
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Fake-quantize the 'inputs' tensor, type float to 'outputs' tensor of same type.\n\n\
         The range `[min, max]` (attrs) is nudged so that 0.0 is on the grid of `2^num_bits` \
         levels (`2^num_bits - 1` with `narrow_range`); values are clamped to it and rounded.",
    ));

register_op!(OpDefBuilder::new("FakeQuantWithMinMaxArgsGradient")
    .params::<ArgsParams>()
    .input("gradients: float")
    .input("inputs: float")
    .output("backprops: float")
    .set_shape_fn(with_inputs(2, unchanged_shape))
    .doc(
        "Compute gradients for a FakeQuantWithMinMaxArgs operation.\n\n\
         `backprops` is `gradients` where `inputs` is in the nudged range, 0 elsewhere.",
    ));

register_op!(OpDefBuilder::new("FakeQuantWithMinMaxVars")
    .params::<GridParams>()
    .input("inputs: float")
    .input("min: float")
    .input("max: float")
    .output("outputs: float")
    .set_shape_fn(with_inputs(3, fake_quant_vars_shape))
    .doc(
        "Fake-quantize the 'inputs' tensor of type float via global float scalars `min` and `max`.\n\n\
         Values are clamped to `[min, max]` and rounded to `2^num_bits` levels.",
    ));

fn fake_quant_vars_shape(c: &mut InferenceContext) -> Result<()> {
    unchanged_shape(c)?;
    let (min, max) = (c.input(1), c.input(2));
    c.with_rank(min, 0)?;
    c.with_rank(max, 0)?;
    Ok(())
}

register_op!(OpDefBuilder::new("FakeQuantWithMinMaxVarsGradient")
    .params::<GridParams>()
    .input("gradients: float")
    .input("inputs: float")
    .input("min: float")
    .input("max: float")
    .output("backprops_wrt_input: float")
    .output("backprop_wrt_min: float")
    .output("backprop_wrt_max: float")
    .set_shape_fn(with_inputs(4, fake_quant_vars_gradient_shape))
    .doc(
        "Compute gradients for a FakeQuantWithMinMaxVars operation.\n\n\
         The input backprop is `gradients` where `inputs` is in the nudged range; the min and \
         max backprops are the sums of `gradients` below and above it.",
    ));

fn fake_quant_vars_gradient_shape(c: &mut InferenceContext) -> Result<()> {
    let (g, i) = (c.input(0), c.input(1));
    let inputs = c.merge(g, i)?;
    let mn = c.input(2);
    let min_max = c.with_rank(mn, 0)?;
    let mx = c.input(3);
    let min_max = c.merge(min_max, mx)?;
    c.set_output(0, inputs);
    c.set_output(1, min_max);
    c.set_output(2, min_max);
    Ok(())
}

register_op!(OpDefBuilder::new("FakeQuantWithMinMaxVarsPerChannel")
    .params::<GridParams>()
    .input("inputs: float")
    .input("min: float")
    .input("max: float")
    .output("outputs: float")
    .set_shape_fn(with_inputs(3, fake_quant_per_channel_shape))
    .doc(
        "Fake-quantize the 'inputs' tensor of type float per channel.\n\n\
         `min` and `max` have one value per element of the last dimension of `inputs`.",
    ));

fn fake_quant_per_channel_shape(c: &mut InferenceContext) -> Result<()> {
    let (i, mn, mx) = (c.input(0), c.input(1), c.input(2));
    let input = c.with_rank_at_least(i, 1)?;
    let min = c.with_rank(mn, 1)?;
    let max = c.with_rank(mx, 1)?;
    let (last, min0, max0) = (c.dim(input, -1), c.dim(min, 0), c.dim(max, 0));
    c.merge_dim(last, min0)?;
    c.merge_dim(last, max0)?;
    c.merge_dim(min0, max0)?;
    c.set_output(0, input);
    Ok(())
}

register_op!(
    OpDefBuilder::new("FakeQuantWithMinMaxVarsPerChannelGradient")
        .params::<GridParams>()
        .input("gradients: float")
        .input("inputs: float")
        .input("min: float")
        .input("max: float")
        .output("backprops_wrt_input: float")
        .output("backprop_wrt_min: float")
        .output("backprop_wrt_max: float")
        .set_shape_fn(with_inputs(4, fake_quant_per_channel_gradient_shape))
        .doc(
            "Compute gradients for a FakeQuantWithMinMaxVarsPerChannel operation.\n\n\
         The inputs are of rank 1 to 4; `min` and `max` have one value per last-dimension element.",
        )
);

fn fake_quant_per_channel_gradient_shape(c: &mut InferenceContext) -> Result<()> {
    let (g, i) = (c.input(0), c.input(1));
    let inputs = c.with_rank_at_least(g, 1)?;
    let inputs = c.with_rank_at_most(inputs, 4)?;
    let inputs = c.merge(inputs, i)?;
    // With `gradients` of unknown rank the merge takes `inputs`' rank,
    // which may be 0: check the merged shape too before reading its last
    // dim (TensorFlow reads past the end there).
    let inputs = c.with_rank_at_least(inputs, 1)?;
    let inputs = c.with_rank_at_most(inputs, 4)?;
    let last = c.dim(inputs, -1);
    let last = c.vector(last);
    let mn = c.input(2);
    let min_max = c.with_rank(mn, 1)?;
    let min_max = c.merge(min_max, last)?;
    let mx = c.input(3);
    let min_max = c.merge(mx, min_max)?;
    c.set_output(0, inputs);
    c.set_output(1, min_max);
    c.set_output(2, min_max);
    Ok(())
}

mod dequantize;
mod fake_quant;
mod qdq;
mod quantized;

#[cfg(test)]
mod fake_quant_tests;
#[cfg(test)]
mod kernel_tests;
#[cfg(test)]
mod quantized_tests;
#[cfg(test)]
#[rustfmt::skip]
// A data table: 3.14159 is an input value (not pi), and the rows are tuples.
#[allow(clippy::approx_constant, clippy::type_complexity)]
mod vectors;

#[cfg(test)]
mod tests {
    use opforge_core::{DataType, Tensor};
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::{infer_error, infer_ok};

    fn op(name: &str) -> ShapeTestOp {
        ShapeTestOp::new(name)
    }

    #[test]
    fn quantize_and_dequantize() {
        let op = op("QuantizeAndDequantize");
        infer_ok!(op, "?", "in0");
        infer_ok!(op, "[]", "in0");
        infer_ok!(op, "[1,2,?,4,5]", "in0");
    }

    #[test]
    fn quantize_and_dequantize_v2() {
        let op = op("QuantizeAndDequantizeV2").attr("axis", -1i64);
        infer_ok!(op, "?;?;?", "in0");
        infer_ok!(op, "[];?;?", "in0");
        infer_ok!(op, "[1,2,?,4,5];?;?", "in0");
        infer_error!(
            op,
            "[1,2,?,4,5];[1];[]",
            "Shape must be rank 0 but is rank 1"
        );
        infer_error!(
            op,
            "[1,2,?,4,5];[];[1]",
            "Shapes must be equal rank, but are 1 and 0"
        );
        infer_error!(
            op,
            "[1,2,?,4,5];[1];[1]",
            "Shape must be rank 0 but is rank 1"
        );
        let op = ShapeTestOp::new("QuantizeAndDequantizeV2").attr("axis", 1i64);
        infer_ok!(op, "[2,3];[3];[3]", "in0");
        infer_ok!(op, "?;[?];?", "in0");
        infer_error!(
            op,
            "[2,3];[4];[4]",
            "Dimensions must be equal, but are 4 and 3"
        );
        infer_error!(
            op,
            "[2];[2];[2]",
            "Shape must be at least rank 2 but is rank 1"
        );
        infer_error!(op, "[2,3];[];[]", "Shape must be rank 1 but is rank 0");
        let op = ShapeTestOp::new("QuantizeAndDequantizeV2").attr("axis", -2i64);
        infer_error!(op, "[2,3];[3];[3]", "axis should be at least -1, got -2");
        // A bare node has no `axis`: TensorFlow 2.21 fails too.
        infer_error!(
            ShapeTestOp::new("QuantizeAndDequantizeV2"),
            "?;?;?",
            "No attr named 'axis' in NodeDef"
        );
    }

    #[test]
    fn dequantize() {
        let op = op("Dequantize");
        infer_ok!(op, "?;?;?", "in0");
        infer_ok!(op, "[1,?,3];[];[]", "in0");
        infer_error!(op, "[1,?,3];[1];[]", "Shape must be rank 0 but is rank 1");
        infer_error!(op, "[1,?,3];[];[1]", "Shape must be rank 0 but is rank 1");
        let op = ShapeTestOp::new("Dequantize").attr("axis", 2i64);
        infer_ok!(op, "[1,?,3];[3];[3]", "in0");
        infer_ok!(op, "[1,?,3];[?];[?]", "in0");
        infer_ok!(op, "[1,?,3];[4];[?]", "in0");
        infer_error!(
            op,
            "[1,?,3];[?];[4]",
            "Dimensions must be equal, but are 4 and 3"
        );
        infer_error!(op, "[1,?,3];[];[]", "Shape must be rank 1 but is rank 0");
        infer_error!(
            op,
            "[1];[1];[1]",
            "Axis must be less than input dimension(1), got 2"
        );
        infer_error!(
            op,
            "?;[1];[1]",
            "Axis must be less than input dimension(-1), got 2"
        );
        infer_error!(
            op,
            "[1,3];[1];[1]",
            "Shape must be at least rank 3 but is rank 2"
        );
        let op = ShapeTestOp::new("Dequantize").attr("axis", -3i64);
        infer_error!(op, "[1];[];[]", "axis should be at least -1, got -3");
        let op = ShapeTestOp::new("Dequantize").attr("axis", "x");
        infer_error!(
            op,
            "[1];[];[]",
            "AttrValue had value with type 'string' when 'int' expected"
        );
    }

    fn qconcat(n: i64) -> ShapeTestOp {
        op("QuantizedConcat")
            .attr("N", n)
            .attr("T", DataType::QUInt8)
    }

    #[test]
    fn quantized_concat() {
        infer_error!(
            qconcat(1),
            "[1];?;?;?",
            "Shape must be rank 0 but is rank 1"
        );
        infer_error!(
            qconcat(2),
            "[];?;?;?;?;?;[1]",
            "Shape must be rank 0 but is rank 1"
        );
        infer_error!(qconcat(2), "[];?;?;?;?;[1];?", "must be rank 0");
        infer_error!(qconcat(2), "[];?;?;?;[1];?;?", "must be rank 0");
        infer_error!(qconcat(2), "[];?;?;[1];?;?;?", "must be rank 0");
        infer_error!(qconcat(2), "[];[1,2];[1,2,3];?;?;?;?", "must be rank 2");
        infer_ok!(qconcat(2), "[];[1,2];[1,3];?;?;?;?", "[?,?];[];[]");
        infer_ok!(qconcat(2), "[];?;?;?;?;?;?", "?;[];[]");
        let op = qconcat(2).input_tensor(0, Tensor::scalar(0i32));
        infer_ok!(op, "[];[100,2,?];[10,?,3];?;?;?;?", "[110,d1_1,d2_2];[];[]");
        infer_error!(
            op,
            "[];[100,2,5];[10,?,3];?;?;?;?",
            "Dimension 1 in both shapes must be equal, but are 5 and 3"
        );
        let op = qconcat(2).input_tensor(0, Tensor::scalar(-1i32));
        infer_ok!(op, "[];[2,3];[2,4];[];[];[];[]", "[d1_0,7];[];[]");
    }

    #[test]
    fn quantized_reshape() {
        let op = op("QuantizedReshape");
        infer_ok!(op, "?;?;?;?", "?;[];[]");
        infer_ok!(op, "[?];?;?;?", "?;[];[]");
        infer_ok!(op, "[?];[?];?;?", "?;[];[]");
        infer_ok!(op, "[4];[?];?;?", "?;[];[]");
        infer_ok!(op, "[4];[2];?;?", "[?,?];[];[]");
        infer_error!(op, "?;[2,2];?;?", "Shape must be rank 1 but is rank 2");
        let shape = Tensor::from_vec(&[3], vec![1i32, 2, 3]).unwrap();
        let op = ShapeTestOp::new("QuantizedReshape").input_tensor(1, shape);
        infer_ok!(op, "[?];[3];?;?", "[1,2,3];[];[]");
        infer_ok!(op, "[6];[3];?;?", "[1,2,3];[];[]");
        infer_error!(
            op,
            "[3,4];[3];?;?",
            "Cannot reshape a tensor with 12 elements to shape [1,2,3] (6 elements)"
        );
        infer_error!(
            op,
            "[?,5];[3];?;?",
            "Dimension size must be evenly divisible by 5 but is 6"
        );
        infer_error!(op, "?;?;[1];?", "must be rank 0");
        infer_error!(op, "?;?;?;[1]", "must be rank 0");
        let infer = Tensor::from_vec(&[3], vec![2i64, -1, 3]).unwrap();
        let op = ShapeTestOp::new("QuantizedReshape").input_tensor(1, infer);
        infer_ok!(op, "[4,3];[3];[];[]", "[2,2,3];[];[]");
        infer_ok!(op, "[?,6];[3];[];[]", "[2,d0_0,3];[];[]");
        infer_ok!(op, "[?,7];[3];[];[]", "[2,?,3];[];[]");
        infer_ok!(op, "[?,?];[3];[];[]", "[2,?,3];[];[]");
        infer_error!(
            op,
            "[5,3];[3];[];[]",
            "Dimension size must be evenly divisible by 6 but is 15"
        );
    }

    #[test]
    fn fake_quant_with_min_max_vars() {
        let op = op("FakeQuantWithMinMaxVars");
        infer_ok!(op, "?;?;?", "in0");
        infer_ok!(op, "[1,?,3];[];[]", "in0");
        infer_error!(op, "[1,?,3];[1];[]", "Shape must be rank 0 but is rank 1");
        infer_error!(op, "[1,?,3];[];[1]", "Shape must be rank 0 but is rank 1");
    }

    #[test]
    fn fake_quant_per_channel() {
        let op = op("FakeQuantWithMinMaxVarsPerChannel");
        infer_ok!(op, "?;?;?", "in0");
        infer_ok!(op, "[?];?;?", "in0");
        infer_ok!(op, "[1,?,3];[3];[3]", "in0");
        infer_ok!(op, "[3];[3];[3]", "in0");
        infer_error!(op, "[];?;?", "Shape must be at least rank 1 but is rank 0");
        infer_error!(op, "[1,?,3];[1];[]", "Shape must be rank 1 but is rank 0");
        infer_error!(op, "[1,?,3];[];[1]", "Shape must be rank 1 but is rank 0");
        infer_error!(
            op,
            "[1,?,3];[2];[?]",
            "Dimensions must be equal, but are 3 and 2"
        );
        infer_error!(
            op,
            "[1,?,3];[?];[2]",
            "Dimensions must be equal, but are 3 and 2"
        );
        infer_error!(
            op,
            "[1,?,?];[1];[2]",
            "Dimensions must be equal, but are 1 and 2"
        );
        infer_error!(
            op,
            "[5];[4];[?]",
            "Dimensions must be equal, but are 5 and 4"
        );
    }

    #[test]
    fn fake_quant_per_channel_gradient() {
        let op = op("FakeQuantWithMinMaxVarsPerChannelGradient");
        // TensorFlow's merge: with both ranks unknown, the first shape.
        infer_ok!(op, "?;?;?;?", "in0;[?];[?]");
        infer_ok!(op, "[3];[3];[3];[3]", "in0;in3;in3");
        infer_ok!(op, "[1,3];[1,3];[3];[3]", "in0;in3;in3");
        infer_ok!(op, "[1,2,3,4];[1,2,3,4];[4];[4]", "in0;in3;in3");
        infer_ok!(op, "?;[2,?];?;?", "in1;[?];[?]");
        infer_ok!(op, "[2,?];[?,3];?;?", "[d0_0,d1_1];[d1_1];[d1_1]");
        // Fuzz finding (shape_inference): `gradients` of unknown rank and a
        // scalar `inputs` merged to rank 0, and the last-dim read panicked.
        infer_error!(
            op,
            "?;[];[];?",
            "Shape must be at least rank 1 but is rank 0"
        );
        infer_error!(
            op,
            "?;[1,2,3,4,5];?;?",
            "Shape must be at most rank 4 but is rank 5"
        );
        infer_error!(
            op,
            "[1,?,3];[1,?,3];[3];[]",
            "Shapes must be equal rank, but are 0 and 1"
        );
        infer_error!(
            op,
            "[1,?,3];[1,?,3];[];[3]",
            "Shape must be rank 1 but is rank 0"
        );
        infer_error!(
            op,
            "[];[];[1];[1]",
            "Shape must be at least rank 1 but is rank 0"
        );
        infer_error!(
            op,
            "[1,2,3,4,5];[1,2,3,4,5];[1];[1]",
            "Shape must be at most rank 4 but is rank 5"
        );
        infer_error!(
            op,
            "[1,3];[1,3];[2];[3]",
            "Dimension 0 in both shapes must be equal"
        );
        infer_error!(
            op,
            "[1,3];[1,3];[3];[2]",
            "Dimension 0 in both shapes must be equal"
        );
        infer_error!(
            op,
            "[1,3];[1,4];[3];[3]",
            "Dimension 1 in both shapes must be equal"
        );
    }
}
