//! Neural-network ops with TensorFlow 2.21's OpDefs and CPU kernel
//! semantics: `Relu`, `ReluGrad`, `Relu6`, `Softmax`, `LogSoftmax`,
//! `SoftmaxCrossEntropyWithLogits`, `SparseSoftmaxCrossEntropyWithLogits`,
//! `BiasAdd` and `BiasAddGrad`.
//!
//! Softmax-style ops work row by row over the last axis, in `f32` for
//! `half`/`bfloat16` and in the element type otherwise, subtracting the
//! row's maximum first so large logits do not overflow; rows are sharded
//! over the intra-op pool. `BiasAddGrad` uses the sharded column/row sums of
//! [`crate::reduction`].

use half::{bf16, f16};
use num_traits::{Float, One, Zero};
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::{common, InferenceContext};
use opforge_core::{
    dispatch, ensure, register_kernel, register_op, DataType, Element, OpDefBuilder, Result,
    Status, Tensor, TensorShape,
};
use opforge_ops_base::args::{fmt_shape, index_values};
use opforge_ops_base::cpu::broadcast::{binary_same, broadcast_shapes, unary_same};
use opforge_ops_base::cpu::par::par_chunks;
use opforge_ops_base::cpu::par::CHEAP_COST;
use opforge_ops_base::cpu::reduce::{reduce_into, AccNum, NumElem, SumR};
use opforge_ops_base::types::{NUMERIC_KERNEL_TYPES, REAL_KERNEL_TYPES};

/// The ops this file registers (its tests check them).
#[cfg(test)]
const OPS: &[&str] = &[
    "Relu",
    "ReluGrad",
    "Relu6",
    "Softmax",
    "LogSoftmax",
    "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits",
    "BiasAdd",
    "BiasAddGrad",
];

// ---------------------------------------------------------------------------
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

/// `Softmax`.
pub fn softmax() -> OpDefBuilder {
    OpDefBuilder::new("Softmax")
        .input("logits: T")
        .output("softmax: T")
        .attr("T: {half, bfloat16, float, double}")
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
        .attr("T: {half, bfloat16, float, double}")
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
        .attr("T: {half, bfloat16, float, double}")
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
        .attr("T: {half, bfloat16, float, double}")
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
             NCHW data format, the feature dimension is the third-to-last.",
        )
}

// ---- Shape functions (TensorFlow's nn_ops.cc) ----

/// TensorFlow's `MergeBothInputsShapeFn`.
fn merge_both_inputs_shape(c: &mut InferenceContext) -> Result<()> {
    let (a, b) = (c.input(0), c.input(1));
    let out = c.merge(a, b)?;
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow's `UnchangedShapeWithRankAtLeast(c, 1)`.
fn softmax_shape(c: &mut InferenceContext) -> Result<()> {
    let s = c.input(0);
    let out = c.with_rank_at_least(s, 1)?;
    c.set_output(0, out);
    Ok(())
}

/// TensorFlow 2.x's `SoftmaxCrossEntropyWithLogits` shape function: equal
/// `[batch, classes]` inputs, else their broadcast, which must be of rank 2.
fn softmax_cross_entropy_shape(c: &mut InferenceContext) -> Result<()> {
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
fn sparse_softmax_cross_entropy_shape(c: &mut InferenceContext) -> Result<()> {
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
fn shape_is_nchw(c: &InferenceContext) -> bool {
    matches!(c.get_attr::<String>("data_format"), Ok(f) if f == "NCHW")
}

/// TensorFlow's `BiasAddShape`.
fn bias_add_shape(c: &mut InferenceContext) -> Result<()> {
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
fn bias_add_grad_shape(c: &mut InferenceContext) -> Result<()> {
    let nchw = shape_is_nchw(c);
    let g = c.input(0);
    let input = c.with_rank_at_least(g, if nchw { 3 } else { 2 })?;
    let d = c.dim(input, if nchw { -3 } else { -1 });
    let out = c.vector(d);
    c.set_output(0, out);
    Ok(())
}

register_op!(relu());
register_op!(relu_grad());
register_op!(relu6());
register_op!(softmax());
register_op!(log_softmax());
register_op!(softmax_cross_entropy_with_logits());
register_op!(sparse_softmax_cross_entropy_with_logits());
register_op!(bias_add());
register_op!(bias_add_grad());

// ---------------------------------------------------------------------------
// Relu family
// ---------------------------------------------------------------------------

/// A real element type of the Relu family.
trait ReluElem: Element + PartialOrd {
    const ZERO: Self;
    const SIX: Self;
    fn times(self, o: Self) -> Self;
}

macro_rules! relu_float {
    ($($t:ty),*) => {$(
        impl ReluElem for $t {
            const ZERO: $t = 0.0;
            const SIX: $t = 6.0;
            #[inline(always)] fn times(self, o: $t) -> $t { self * o }
        }
    )*};
}
relu_float!(f32, f64);

macro_rules! relu_half {
    ($($t:ty),*) => {$(
        impl ReluElem for $t {
            const ZERO: $t = <$t>::ZERO;
            const SIX: $t = <$t>::from_f32_const(6.0);
            #[inline(always)] fn times(self, o: $t) -> $t { <$t>::from_f32(self.to_f32() * o.to_f32()) }
        }
    )*};
}
relu_half!(f16, bf16);

macro_rules! relu_int {
    ($($t:ty),*) => {$(
        impl ReluElem for $t {
            const ZERO: $t = 0;
            const SIX: $t = 6;
            #[inline(always)] fn times(self, o: $t) -> $t { self.wrapping_mul(o) }
        }
    )*};
}
relu_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// `max(x, 0)` with NaN propagated (Eigen's `std::max(x, 0)`).
#[inline(always)]
fn relu_of<T: ReluElem>(x: T) -> T {
    if x < T::ZERO {
        T::ZERO
    } else {
        x
    }
}

#[inline(always)]
fn relu6_of<T: ReluElem>(x: T) -> T {
    let y = relu_of(x);
    if T::SIX < y {
        T::SIX
    } else {
        y
    }
}

#[derive(Clone, Copy, PartialEq)]
enum ReluOp {
    Relu,
    Relu6,
    Grad,
}

struct ReluKernel(ReluOp);

fn relu_kernel(op: ReluOp) -> Result<Box<dyn OpKernel>> {
    Ok(Box::new(ReluKernel(op)))
}

fn relu_compute<T: ReluElem>(op: ReluOp, ctx: &mut OpKernelContext<'_>) -> Result<()> {
    match op {
        ReluOp::Relu => unary_same::<T>(ctx, CHEAP_COST, relu_of),
        ReluOp::Relu6 => unary_same::<T>(ctx, CHEAP_COST, relu6_of),
        ReluOp::Grad => {
            ensure!(
                ctx.input(0).shape() == ctx.input(1).shape(),
                InvalidArgument,
                "g and a must be the same size: gradients {} vs. features {}",
                ctx.input(0).shape(),
                ctx.input(1).shape()
            );
            binary_same::<T>(ctx, CHEAP_COST, |g, f| {
                if f > T::ZERO {
                    g
                } else {
                    g.times(T::ZERO)
                }
            })
        }
    }
}

impl OpKernel for ReluKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        let op = self.0;
        dispatch!(dt, T => relu_compute::<T>(op, ctx),
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64],
            Err(Status::unimplemented(format!("{} has no CPU kernel for {dt}", ctx.op_def().name))))
    }
}

register_kernel!(
    KernelDefBuilder::new("Relu").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Relu)
);
register_kernel!(
    KernelDefBuilder::new("Relu6").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Relu6)
);
register_kernel!(
    KernelDefBuilder::new("ReluGrad").type_constraint_list("T", REAL_KERNEL_TYPES),
    fn = |_| relu_kernel(ReluOp::Grad)
);

// ---------------------------------------------------------------------------
// Softmax family
// ---------------------------------------------------------------------------

/// The compute type of the softmax family: `Float` plus an `exp` that
/// vectorizes.
pub(crate) trait ExpFloat: Float + Send + Sync + 'static {
    /// `exp(x)` for `x <= 88` (the ops only exponentiate shifted logits,
    /// which are <= 0): a Cephes-style polynomial for `f32` (within a couple
    /// of ulps of the correctly rounded value, 0 below the normal range,
    /// NaN for NaN) that LLVM vectorizes, as Eigen's `pexp` is; `exp` for `f64`.
    fn vexp(self) -> Self;
}

impl ExpFloat for f32 {
    #[inline(always)]
    fn vexp(self) -> f32 {
        const HI: f32 = 88.0;
        const LO: f32 = -87.336_55; // ln(f32::MIN_POSITIVE)
        let x = self.clamp(LO, HI);
        // x = n ln2 + r, |r| <= ln2 / 2; ln2 split in two for accuracy.
        // n = round(x / ln2) by the 1.5 * 2^23 trick (`floor` is a libm
        // call on baseline x86-64 and would stop vectorization).
        const ROUND: f32 = 12_582_912.0;
        let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
        let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
        let z = r * r;
        let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2)
            * r
            + 1.666_666_5e-1)
            * r
            + 0.5;
        let y = p * z + r + 1.0;
        // 2^n by building the exponent bits (n is in [-126, 127]).
        let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
        let v = y * scale;
        if self.is_nan() {
            self
        } else if self < LO {
            0.0
        } else {
            v
        }
    }
}

impl ExpFloat for f64 {
    #[inline(always)]
    fn vexp(self) -> f64 {
        self.exp()
    }
}

/// A floating-point element type computed in `C` (`f32` for
/// `half`/`bfloat16`, itself otherwise).
pub(crate) trait FloatElem: Element {
    /// The compute type.
    type C: ExpFloat;
    fn to_c(self) -> Self::C;
    fn from_c(c: Self::C) -> Self;
}

impl FloatElem for f32 {
    type C = f32;
    #[inline(always)]
    fn to_c(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_c(c: f32) -> f32 {
        c
    }
}

impl FloatElem for f64 {
    type C = f64;
    #[inline(always)]
    fn to_c(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_c(c: f64) -> f64 {
        c
    }
}

impl FloatElem for f16 {
    type C = f32;
    #[inline(always)]
    fn to_c(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_c(c: f32) -> f16 {
        f16::from_f32(c)
    }
}

impl FloatElem for bf16 {
    type C = f32;
    #[inline(always)]
    fn to_c(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_c(c: f32) -> bf16 {
        bf16::from_f32(c)
    }
}

/// Elements of rowwise work (with an `exp` each) below which it runs on one thread.
const ROWS_PARALLEL_MIN: usize = 1 << 13;

/// Runs `job(first_row, rows of out, the same rows of per_row)` over
/// blocks of whole rows of `out` (rows of `cols` elements; `per_row` has
/// one element per row), in parallel for large inputs.
fn for_row_blocks<T: Send, L: Send>(
    pool: &ThreadPool,
    out: &mut [T],
    cols: usize,
    per_row: &mut [L],
    job: impl Fn(usize, &mut [T], &mut [L]) + Sync,
) {
    if out.is_empty() || cols == 0 {
        return;
    }
    let rows = out.len() / cols;
    debug_assert_eq!(per_row.len(), rows);
    let threads = pool.num_threads();
    if threads <= 1 || out.len() < ROWS_PARALLEL_MIN {
        job(0, out, per_row);
        return;
    }
    let per = rows
        .div_ceil(threads * 4)
        .max(ROWS_PARALLEL_MIN.div_ceil(4 * cols))
        .max(1);
    // Pair each block of rows with its per-row slots, then shard the pairs.
    let mut blocks: Vec<(&mut [T], &mut [L])> = out
        .chunks_mut(per * cols)
        .zip(per_row.chunks_mut(per))
        .collect();
    par_chunks(pool, &mut blocks, 1, &|c, b| {
        let (o, l) = &mut b[0];
        job(c * per, o, l)
    });
}

/// Folds `x` with 8 independent accumulators (so the loop vectorizes).
#[inline(always)]
fn lanes<C: Copy>(x: &[C], id: C, f: impl Fn(C, C) -> C) -> C {
    let mut acc = [id; 8];
    let chunks = x.chunks_exact(8);
    let mut r = id;
    for &v in chunks.remainder() {
        r = f(r, v);
    }
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = f(*a, v);
        }
    }
    for a in acc {
        r = f(r, a);
    }
    r
}

/// The maximum of a row: -inf for an empty row; NaN elements are skipped
/// here and make the row NaN through the later arithmetic, as in Eigen.
#[inline(always)]
fn row_max<C: Float>(x: &[C]) -> C {
    lanes(x, C::neg_infinity(), |m, v| if v > m { v } else { m })
}

#[inline(always)]
fn row_sum<C: Float>(x: &[C]) -> C {
    lanes(x, C::zero(), |a, b| a + b)
}

/// Shifts a row of logits by its maximum and exponentiates it:
/// `shifted[j] = logit[j] - max`, `exps[j] = exp(shifted[j])`; returns
/// `sum(exps)`.
#[inline(always)]
fn shift_and_exp<C: ExpFloat>(shifted: &mut [C], exps: &mut [C]) -> C {
    let max = row_max(shifted);
    for (s, e) in shifted.iter_mut().zip(exps.iter_mut()) {
        *s = *s - max;
        *e = s.vexp();
    }
    row_sum(exps)
}

fn softmax_rows<T: FloatElem>(pool: &ThreadPool, x: &[T], out: &mut [T], cols: usize, log: bool) {
    let mut rows = vec![(); out.len().checked_div(cols).unwrap_or(0)];
    for_row_blocks(pool, out, cols, &mut rows, |r0, o, _| {
        let mut scratch: Vec<T::C> = vec![T::C::zero(); 2 * cols];
        let (shifted, exps) = scratch.split_at_mut(cols);
        for (k, orow) in o.chunks_mut(cols).enumerate() {
            let xrow = &x[(r0 + k) * cols..(r0 + k + 1) * cols];
            for (s, v) in shifted.iter_mut().zip(xrow) {
                *s = v.to_c();
            }
            let sum = shift_and_exp(shifted, exps);
            if log {
                // logsoftmax = shifted - log(sum(exp(shifted))).
                let ls = sum.ln();
                for (o, &s) in orow.iter_mut().zip(shifted.iter()) {
                    *o = T::from_c(s - ls);
                }
            } else {
                // softmax = exp(shifted) * (1 / sum).
                let inv = sum.recip();
                for (o, &e) in orow.iter_mut().zip(exps.iter()) {
                    *o = T::from_c(e * inv);
                }
            }
        }
    });
}

struct SoftmaxKernel {
    log: bool,
}

fn softmax_compute<T: FloatElem>(log: bool, ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let x = ctx.input(0).clone();
    let shape = x.shape().clone();
    let cols = shape.dims().last().copied().unwrap_or(0) as usize;
    let pool = ctx.thread_pool();
    ctx.allocate_output(0, shape)?;
    let out = ctx.output_mut(0)?;
    softmax_rows(pool, x.flat::<T>()?, out.flat_mut::<T>()?, cols, log);
    Ok(())
}

impl OpKernel for SoftmaxKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0);
        ensure!(
            x.rank() >= 1,
            InvalidArgument,
            "logits must have >= 1 dimension, got {}",
            fmt_shape(x.dims())
        );
        let dt = x.dtype();
        let log = self.log;
        dispatch!(dt, T => softmax_compute::<T>(log, ctx),
            [Float, Double, Half, BFloat16],
            Err(Status::unimplemented(format!("no softmax for {dt}"))))
    }
}

const FLOAT_TYPES: &[DataType] = &[
    DataType::Half,
    DataType::BFloat16,
    DataType::Float,
    DataType::Double,
];

register_kernel!(
    KernelDefBuilder::new("Softmax").type_constraint_list("T", FLOAT_TYPES),
    fn = |_| Ok(Box::new(SoftmaxKernel { log: false }))
);
register_kernel!(
    KernelDefBuilder::new("LogSoftmax").type_constraint_list("T", FLOAT_TYPES),
    fn = |_| Ok(Box::new(SoftmaxKernel { log: true }))
);

/// A rank-<=2 input broadcast to `[rows, cols]`: its padded dims.
#[derive(Clone, Copy)]
struct Bcast2 {
    rows: usize,
    cols: usize,
}

impl Bcast2 {
    fn new(dims: &[i64]) -> Bcast2 {
        let d = |i: usize| -> usize {
            let off = 2 - dims.len().min(2);
            if i < off {
                1
            } else {
                dims[i - off] as usize
            }
        };
        Bcast2 {
            rows: d(0),
            cols: d(1),
        }
    }

    #[inline(always)]
    fn row<'a, T>(&self, data: &'a [T], r: usize) -> &'a [T] {
        let r = if self.rows == 1 { 0 } else { r };
        &data[r * self.cols..(r + 1) * self.cols]
    }

    #[inline(always)]
    fn at<T: Copy>(&self, row: &[T], j: usize) -> T {
        if self.cols == 1 {
            row[0]
        } else {
            row[j]
        }
    }
}

/// One row of softmax cross entropy with dense labels: returns the loss
/// `sum(labels * (log(sum(exp(shifted))) - shifted))` and writes the
/// backprop `softmax - labels`. `scratch` holds `2 * cols` values.
#[inline(always)]
fn xent_row<T: FloatElem>(
    logit: impl Fn(usize) -> T::C,
    label: impl Fn(usize) -> T::C,
    cols: usize,
    scratch: &mut [T::C],
    back: &mut [T],
) -> T::C {
    let (shifted, exps) = scratch.split_at_mut(cols);
    for (j, s) in shifted.iter_mut().enumerate() {
        *s = logit(j);
    }
    let sum = shift_and_exp(shifted, exps);
    let log_sum = sum.ln();
    // Four partial losses break the dependency chain of the sum.
    let mut loss = [T::C::zero(); 4];
    for (j, (b, (&s, &e))) in back
        .iter_mut()
        .zip(shifted.iter().zip(exps.iter()))
        .enumerate()
    {
        let l = label(j);
        loss[j % 4] = loss[j % 4] + l * (log_sum - s);
        *b = T::from_c(e / sum - l);
    }
    (loss[0] + loss[1]) + (loss[2] + loss[3])
}

/// One row of sparse softmax cross entropy: the loss
/// `log(sum(exp(shifted))) - shifted[target]` and the backprop
/// `softmax - one_hot(target)`.
#[inline(always)]
fn sparse_xent_row<T: FloatElem>(
    logits: &[T],
    target: usize,
    scratch: &mut [T::C],
    back: &mut [T],
) -> T::C {
    let cols = logits.len();
    let (shifted, exps) = scratch.split_at_mut(cols);
    for (s, v) in shifted.iter_mut().zip(logits) {
        *s = v.to_c();
    }
    let sum = shift_and_exp(shifted, exps);
    for (b, &e) in back.iter_mut().zip(exps.iter()) {
        *b = T::from_c(e / sum);
    }
    back[target] = T::from_c(exps[target] / sum - T::C::one());
    sum.ln() - shifted[target]
}

struct XentKernel;

fn xent_compute<T: FloatElem>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let (logits, labels) = (ctx.input(0).clone(), ctx.input(1).clone());
    let shape: Vec<i64> = if logits.shape() == labels.shape() {
        logits.dims().to_vec()
    } else {
        broadcast_shapes(logits.dims(), labels.dims()).map_err(|_| {
            Status::invalid_argument(format!(
                "logits and labels must be broadcastable: logits_size={} labels_size={}",
                fmt_shape(logits.dims()),
                fmt_shape(labels.dims())
            ))
        })?
    };
    ensure!(
        shape.len() == 2,
        InvalidArgument,
        "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"
    );
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    let (bl, bt) = (Bcast2::new(logits.dims()), Bcast2::new(labels.dims()));
    let (lx, tx) = (logits.flat::<T>()?, labels.flat::<T>()?);
    let pool = ctx.thread_pool();
    let mut loss = vec![T::C::zero(); rows];
    ctx.allocate_output(1, TensorShape::new(&shape)?)?;
    let back = ctx.output_mut(1)?.flat_mut::<T>()?;
    for_row_blocks(pool, back, cols, &mut loss, |r0, b, loss| {
        let mut shifted = vec![T::C::zero(); 2 * cols];
        for (k, (brow, loss)) in b.chunks_mut(cols).zip(loss.iter_mut()).enumerate() {
            let (lrow, trow) = (bl.row(lx, r0 + k), bt.row(tx, r0 + k));
            *loss = xent_row::<T>(
                |j| bl.at(lrow, j).to_c(),
                |j| bt.at(trow, j).to_c(),
                cols,
                &mut shifted,
                brow,
            );
        }
    });
    set_loss_output::<T>(ctx, &loss)
}

impl OpKernel for XentKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        dispatch!(dt, T => xent_compute::<T>(ctx),
            [Float, Double, Half, BFloat16],
            Err(Status::unimplemented(format!("no cross entropy for {dt}"))))
    }
}

register_kernel!(
    KernelDefBuilder::new("SoftmaxCrossEntropyWithLogits").type_constraint_list("T", FLOAT_TYPES),
    fn = |_| Ok(Box::new(XentKernel))
);

/// Output 0 of the cross-entropy ops: the per-row losses, in `T`.
fn set_loss_output<T: FloatElem>(ctx: &mut OpKernelContext<'_>, loss: &[T::C]) -> Result<()> {
    ctx.allocate_output(0, TensorShape::vector(loss.len()))?;
    let out = ctx.output_mut(0)?.flat_mut::<T>()?;
    for (o, &l) in out.iter_mut().zip(loss) {
        *o = T::from_c(l);
    }
    Ok(())
}

struct SparseXentKernel;

fn sparse_xent_compute<T: FloatElem>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let (logits, labels) = (ctx.input(0).clone(), ctx.input(1).clone());
    ensure!(
        logits.rank() == 2,
        InvalidArgument,
        "logits must be 2-D, but got shape {}",
        fmt_shape(logits.dims())
    );
    ensure!(
        labels.rank() == 1,
        InvalidArgument,
        "labels must be 1-D, but got shape {}",
        fmt_shape(labels.dims())
    );
    ensure!(
        logits.dims()[0] == labels.dims()[0],
        InvalidArgument,
        "logits and labels must have the same first dimension, got logits shape {} and labels shape {}",
        fmt_shape(logits.dims()),
        fmt_shape(labels.dims())
    );
    ensure!(
        logits.dims()[1] > 0,
        InvalidArgument,
        "Must have at least one class, but got logits shape {}",
        fmt_shape(logits.dims())
    );
    let (rows, cols) = (logits.dims()[0] as usize, logits.dims()[1] as usize);
    let label_values = index_values(&labels, "labels")?;
    if let (Some(&lo), Some(&hi)) = (label_values.iter().min(), label_values.iter().max()) {
        if lo < 0 || hi >= cols as i64 {
            let bad = if lo < 0 { lo } else { hi };
            let all: Vec<String> = label_values.iter().map(i64::to_string).collect();
            return Err(Status::invalid_argument(format!(
                "Received a label value of {bad} which is outside the valid range of [0, {cols}).  \
                 Label values: {}",
                all.join(" ")
            )));
        }
    }
    let lx = logits.flat::<T>()?;
    let pool = ctx.thread_pool();
    let mut loss = vec![T::C::zero(); rows];
    ctx.allocate_output(1, logits.shape().clone())?;
    let back = ctx.output_mut(1)?.flat_mut::<T>()?;
    let labels = &label_values;
    for_row_blocks(pool, back, cols, &mut loss, |r0, b, loss| {
        let mut shifted = vec![T::C::zero(); 2 * cols];
        for (k, (brow, loss)) in b.chunks_mut(cols).zip(loss.iter_mut()).enumerate() {
            let r = r0 + k;
            let lrow = &lx[r * cols..(r + 1) * cols];
            *loss = sparse_xent_row::<T>(lrow, labels[r] as usize, &mut shifted, brow);
        }
    });
    set_loss_output::<T>(ctx, &loss)
}

impl OpKernel for SparseXentKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        dispatch!(dt, T => sparse_xent_compute::<T>(ctx),
            [Float, Double, Half, BFloat16],
            Err(Status::unimplemented(format!("no cross entropy for {dt}"))))
    }
}

register_kernel!(
    KernelDefBuilder::new("SparseSoftmaxCrossEntropyWithLogits")
        .type_constraint_list("T", FLOAT_TYPES)
        .type_constraint_list("Tlabels", &[DataType::Int32, DataType::Int64]),
    fn = |_| Ok(Box::new(SparseXentKernel))
);

// ---------------------------------------------------------------------------
// BiasAdd, BiasAddGrad
// ---------------------------------------------------------------------------

fn is_nchw(ctx: &OpKernelConstruction<'_>) -> Result<bool> {
    let format: String = ctx.get_attr("data_format")?;
    match format.as_str() {
        "NHWC" => Ok(false),
        "NCHW" => Ok(true),
        _ => Err(Status::invalid_argument(format!(
            "Invalid data format: '{format}' (expected 'NHWC' or 'NCHW')"
        ))),
    }
}

/// `[outer, channels, inner]` of a tensor whose channel dimension is `axis`.
fn around(dims: &[i64], axis: usize) -> [usize; 3] {
    let p = |d: &[i64]| d.iter().map(|&v| v as usize).product::<usize>();
    [p(&dims[..axis]), dims[axis] as usize, p(&dims[axis + 1..])]
}

struct BiasAddKernel {
    nchw: bool,
}

impl CreateKernel for BiasAddKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(BiasAddKernel {
            nchw: is_nchw(ctx)?,
        })
    }
}

#[inline(always)]
fn add<T: NumElem>(x: T, b: T) -> T {
    T::from_acc(x.to_acc().add(b.to_acc()))
}

fn bias_add_compute<T: NumElem>(ctx: &mut OpKernelContext<'_>, inner: usize) -> Result<()> {
    let shape = ctx.input(0).shape().clone();
    let bias: Vec<T> = ctx.input(1).flat::<T>()?.to_vec();
    let c = bias.len();
    let pool = ctx.thread_pool();
    // Units: rows of `c` (NHWC) or runs of `inner` sharing one bias (NCHW).
    let unit = if inner == 1 { c } else { inner };
    if unit == 0 {
        ctx.allocate_output(0, shape)?;
        return Ok(());
    }
    let bias = &bias;
    if ctx
        .forward_input_or_allocate_output(&[0], 0, &shape)?
        .is_some()
    {
        let out = ctx.output_mut(0)?.flat_mut::<T>()?;
        let mut units = vec![(); out.len() / unit];
        for_row_blocks(pool, out, unit, &mut units, |u0, o, _| {
            for (k, row) in o.chunks_mut(unit).enumerate() {
                if inner == 1 {
                    row.iter_mut().zip(bias).for_each(|(v, &b)| *v = add(*v, b));
                } else {
                    let b = bias[(u0 + k) % c];
                    row.iter_mut().for_each(|v| *v = add(*v, b));
                }
            }
        });
    } else {
        let (ins, out) = ctx.inputs_and_output(0)?;
        let x = ins[0].flat::<T>()?;
        let out = out.flat_mut::<T>()?;
        let mut units = vec![(); out.len() / unit];
        for_row_blocks(pool, out, unit, &mut units, |u0, o, _| {
            for (k, row) in o.chunks_mut(unit).enumerate() {
                let src = &x[(u0 + k) * unit..(u0 + k + 1) * unit];
                if inner == 1 {
                    for ((v, &s), &b) in row.iter_mut().zip(src).zip(bias) {
                        *v = add(s, b);
                    }
                } else {
                    let b = bias[(u0 + k) % c];
                    row.iter_mut().zip(src).for_each(|(v, &s)| *v = add(s, b));
                }
            }
        });
    }
    Ok(())
}

impl OpKernel for BiasAddKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (value, bias) = (ctx.input(0), ctx.input(1));
        ensure!(
            value.rank() >= 2,
            InvalidArgument,
            "Input tensor must be at least 2D: {}",
            fmt_shape(value.dims())
        );
        ensure!(
            bias.rank() == 1,
            InvalidArgument,
            "Biases must be 1D: {}",
            fmt_shape(bias.dims())
        );
        let axis = if self.nchw { 1 } else { value.rank() - 1 };
        ensure!(
            bias.dims()[0] == value.dims()[axis],
            InvalidArgument,
            "Must provide as many biases as the last dimension of the input tensor: {} vs. {}",
            fmt_shape(bias.dims()),
            fmt_shape(value.dims())
        );
        let [_, _, inner] = around(value.dims(), axis);
        let dt = value.dtype();
        dispatch!(dt, T => bias_add_compute::<T>(ctx, inner),
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
             Complex64, Complex128],
            Err(Status::unimplemented(format!("no BiasAdd for {dt}"))))
    }
}

struct BiasAddGradKernel {
    nchw: bool,
}

impl CreateKernel for BiasAddGradKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(BiasAddGradKernel {
            nchw: is_nchw(ctx)?,
        })
    }
}

fn bias_add_grad_compute<T: NumElem>(
    pool: &ThreadPool,
    x: &Tensor,
    dims: [usize; 3],
    out: &mut Tensor,
) -> Result<()> {
    reduce_into(
        pool,
        SumR::<T>::new(),
        x.flat::<T>()?,
        &dims,
        &[true, false, true],
        out.flat_mut::<T>()?,
    );
    Ok(())
}

impl OpKernel for BiasAddGradKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0).clone();
        ensure!(
            x.rank() >= 2,
            InvalidArgument,
            "Input tensor must be at least 2D: {}",
            fmt_shape(x.dims())
        );
        ensure!(
            x.num_elements() <= i32::MAX as usize,
            InvalidArgument,
            "BiasGrad requires tensor size <= int32 max"
        );
        let axis = if self.nchw { 1 } else { x.rank() - 1 };
        let dims = around(x.dims(), axis);
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, TensorShape::new(&[dims[1] as i64])?)?;
        let dt = x.dtype();
        dispatch!(dt, T => bias_add_grad_compute::<T>(pool, &x, dims, out),
            [Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
             Complex64, Complex128],
            Err(Status::unimplemented(format!("no BiasAddGrad for {dt}"))))
    }
}

register_kernel!(
    KernelDefBuilder::new("BiasAdd").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    BiasAddKernel
);
register_kernel!(
    KernelDefBuilder::new("BiasAddGrad").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    BiasAddGradKernel
);

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

/// TensorFlow's `_Relu6Grad` is `Relu6Grad(grad, relu6(x))`; that op does
/// not exist here, so its formula is composed: the gradient where
/// `0 < relu6(x) < 6`, else 0 (`SelectV2` on `Greater`/`Less`).
fn relu6_grad_fn(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None]);
    };
    let y = op.outputs[0];
    let dtype = o.dtype(y);
    let (zero, six) = (o.scalar(dtype, 0.0)?, o.scalar(dtype, 6.0)?);
    let above = o.op1("Greater", &[y, zero], &[])?;
    let below = o.op1("Less", &[y, six], &[])?;
    let inside = o.op1("LogicalAnd", &[above, below], &[])?;
    let zeros = o.zeros_like(g)?;
    Ok(vec![Some(o.op1("SelectV2", &[inside, g, zeros], &[])?)])
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
mod tests {
    use super::*;
    use num_complex::Complex;
    use opforge_core::Code;
    use opforge_ops_base::testutil::{assert_close, ctx, t};

    fn run1(op: &str, x: Tensor) -> Result<Tensor> {
        ctx().op(op).input(x).run1()
    }

    fn f32s(x: &Tensor) -> Vec<f32> {
        x.flat::<f32>().unwrap().to_vec()
    }

    #[test]
    fn opdefs_finalize() {
        for b in [
            relu(),
            relu_grad(),
            relu6(),
            softmax(),
            log_softmax(),
            softmax_cross_entropy_with_logits(),
            sparse_softmax_cross_entropy_with_logits(),
            bias_add(),
            bias_add_grad(),
        ] {
            assert!(OPS.contains(&b.finalize().unwrap().name.as_str()));
        }
    }

    #[test]
    fn vectorizable_exp_is_within_a_few_ulps() {
        let mut worst = 0.0f64;
        let mut x = -87.3f32;
        while x <= 88.0 {
            let got = x.vexp() as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
            x += 0.0137;
        }
        assert!(
            worst < 3.0 * f32::EPSILON as f64,
            "worst relative error {worst}"
        );
        assert_eq!(0.0f32.vexp(), 1.0);
        assert_eq!(f32::NEG_INFINITY.vexp(), 0.0);
        assert_eq!((-1000.0f32).vexp(), 0.0);
        assert!(f32::NAN.vexp().is_nan());
        assert_eq!(1.5f64.vexp(), 1.5f64.exp());
    }

    #[test]
    fn relu_family() {
        let y = run1("Relu", t(&[4], vec![-1.0f32, 0.0, 2.5, f32::NAN])).unwrap();
        let v = f32s(&y);
        assert_eq!(&v[..3], &[0.0, 0.0, 2.5]);
        assert!(v[3].is_nan());
        let y = run1("Relu", t(&[2], vec![-3i32, 4])).unwrap();
        assert_eq!(y.flat::<i32>().unwrap(), &[0, 4]);
        let y = run1("Relu", t(&[2], vec![0u8, 7])).unwrap();
        assert_eq!(y.flat::<u8>().unwrap(), &[0, 7]);
        let y = run1(
            "Relu",
            t(&[2], vec![f16::from_f32(-2.0), f16::from_f32(1.5)]),
        )
        .unwrap();
        assert_close(&y, &[2], &[0.0, 1.5], 0.0);
        let y = run1("Relu6", t(&[4], vec![-1.0f64, 3.0, 7.0, 6.0])).unwrap();
        assert_close(&y, &[4], &[0.0, 3.0, 6.0, 6.0], 0.0);
        let y = run1("Relu6", t(&[3], vec![-9i64, 5, 100])).unwrap();
        assert_eq!(y.flat::<i64>().unwrap(), &[0, 5, 6]);
        let y = run1(
            "Relu6",
            t(&[2], vec![bf16::from_f32(8.0), bf16::from_f32(0.5)]),
        )
        .unwrap();
        assert_close(&y, &[2], &[6.0, 0.5], 0.0);
        let y = run1("Relu", Tensor::zeros(DataType::Float, &[0, 2]).unwrap()).unwrap();
        assert_eq!(y.dims(), &[0, 2]);
        // Large inputs take the sharded path.
        let n = 100_000;
        let x: Vec<f32> = (0..n).map(|i| (i as f32) - 50_000.0).collect();
        let y = run1("Relu", t(&[n as i64], x.clone())).unwrap();
        assert!(f32s(&y).iter().zip(&x).all(|(&y, &x)| y == x.max(0.0)));
    }

    #[test]
    fn relu_grad_passes_gradients_where_features_are_positive() {
        let g = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
        let f = t(&[2, 2], vec![-1.0f32, 0.0, 0.5, 2.0]);
        let y = ctx().op("ReluGrad").input(g).input(f).run1().unwrap();
        assert_close(&y, &[2, 2], &[0.0, 0.0, 3.0, 4.0], 0.0);
        let y = ctx()
            .op("ReluGrad")
            .input(t(&[3], vec![5i32, -6, 7]))
            .input(t(&[3], vec![1i32, 2, -3]))
            .run1()
            .unwrap();
        assert_eq!(y.flat::<i32>().unwrap(), &[5, -6, 0]);
        let err = ctx()
            .op("ReluGrad")
            .input(t(&[3], vec![1.0f32; 3]))
            .input(t(&[1], vec![1.0f32]))
            .run1()
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("g and a must be the same size"),
            "{err}"
        );
    }

    // softmax([1, 2, 3]) and log_softmax([1, 2, 3]), from exp(k) / (e + e^2 + e^3).
    const SM123: [f64; 3] = [
        0.090_030_573_170_380_46,
        0.244_728_471_054_797_64,
        0.665_240_955_774_821_9,
    ];
    const LSM123: [f64; 3] = [
        -2.407_605_964_444_38,
        -1.407_605_964_444_38,
        -0.407_605_964_444_38,
    ];

    #[test]
    fn softmax_and_log_softmax() {
        let x = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 1001.0, 1002.0, 1003.0]);
        let y = run1("Softmax", x.clone()).unwrap();
        let want: Vec<f64> = SM123.iter().chain(&SM123).copied().collect();
        assert_close(&y, &[2, 3], &want, 1e-6);
        let y = run1("LogSoftmax", x).unwrap();
        let want: Vec<f64> = LSM123.iter().chain(&LSM123).copied().collect();
        assert_close(&y, &[2, 3], &want, 1e-6);
        // 1-D logits, double.
        let y = run1("Softmax", t(&[3], vec![1.0f64, 2.0, 3.0])).unwrap();
        assert_close(&y, &[3], &SM123, 1e-15);
        let y = run1("LogSoftmax", t(&[2], vec![0.0f64, 0.0])).unwrap();
        assert_close(&y, &[2], &[-std::f64::consts::LN_2; 2], 1e-15);
        // half and bfloat16 compute in f32.
        let h = t(&[3], [1.0f32, 2.0, 3.0].map(f16::from_f32).to_vec());
        assert_close(&run1("Softmax", h).unwrap(), &[3], &SM123, 1e-3);
        let b = t(&[3], [1.0f32, 2.0, 3.0].map(bf16::from_f32).to_vec());
        assert_close(&run1("LogSoftmax", b).unwrap(), &[3], &LSM123, 1e-2);
        // Empty inputs.
        let e = run1("Softmax", Tensor::zeros(DataType::Float, &[0, 4]).unwrap()).unwrap();
        assert_eq!(e.dims(), &[0, 4]);
        let e = run1(
            "LogSoftmax",
            Tensor::zeros(DataType::Float, &[3, 0]).unwrap(),
        )
        .unwrap();
        assert_eq!(e.dims(), &[3, 0]);
        let err = run1("Softmax", Tensor::scalar(1.0f32)).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .contains("logits must have >= 1 dimension, got []"),
            "{err}"
        );
        let err = run1("Softmax", t(&[1], vec![1i32])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
    }

    #[test]
    fn softmax_rows_sum_to_one_and_log_softmax_agrees() {
        let (a, b, c) = (4usize, 300usize, 37usize);
        let x: Vec<f32> = (0..a * b * c)
            .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0)
            .collect();
        let xt = t(&[a as i64, b as i64, c as i64], x.clone());
        let y = f32s(&run1("Softmax", xt.clone()).unwrap());
        let ly = f32s(&run1("LogSoftmax", xt).unwrap());
        for r in 0..a * b {
            let row = &y[r * c..(r + 1) * c];
            let s: f64 = row.iter().map(|&v| v as f64).sum();
            assert!((s - 1.0).abs() < 1e-5, "row {r} sums to {s}");
            // Against an independent f64 formula.
            let xr = &x[r * c..(r + 1) * c];
            let m = xr.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let z: f64 = xr.iter().map(|&v| (v as f64 - m).exp()).sum();
            for j in 0..c {
                let want = (xr[j] as f64 - m).exp() / z;
                assert!((row[j] as f64 - want).abs() < 1e-6, "({r}, {j})");
                let lwant = xr[j] as f64 - m - z.ln();
                assert!(
                    (ly[r * c + j] as f64 - lwant).abs() < 1e-5,
                    "log ({r}, {j})"
                );
            }
        }
    }

    fn xent(features: Tensor, labels: Tensor) -> Result<Vec<Tensor>> {
        ctx()
            .op("SoftmaxCrossEntropyWithLogits")
            .input(features)
            .input(labels)
            .run()
    }

    #[test]
    fn softmax_cross_entropy_against_hand_computed_values() {
        // Row 0: logits [1, 2, 3], one-hot label 2: loss = -log softmax[2].
        // Row 1: logits [0, 0, 0], labels [0.25, 0.25, 0.5]: loss = ln 3,
        // backprop = 1/3 - labels.
        let f = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let l = t(&[2, 3], vec![0.0f32, 0.0, 1.0, 0.25, 0.25, 0.5]);
        let out = xent(f, l).unwrap();
        assert_close(&out[0], &[2], &[-LSM123[2], 3f64.ln()], 1e-6);
        let third = 1.0 / 3.0;
        assert_close(
            &out[1],
            &[2, 3],
            &[
                SM123[0],
                SM123[1],
                SM123[2] - 1.0,
                third - 0.25,
                third - 0.25,
                third - 0.5,
            ],
            1e-6,
        );
        // Large logits stay finite.
        let out = xent(
            t(&[1, 2], vec![1000.0f64, 0.0]),
            t(&[1, 2], vec![0.0f64, 1.0]),
        )
        .unwrap();
        assert_close(&out[0], &[1], &[1000.0], 1e-12);
        assert_close(&out[1], &[1, 2], &[1.0, -1.0], 1e-12);
    }

    #[test]
    fn softmax_cross_entropy_broadcasts_labels_and_features() {
        let f = t(&[2, 3], vec![1.0f64, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let want_loss = [-LSM123[2]; 2];
        for labels in [
            t(&[3], vec![0.0f64, 0.0, 1.0]),
            t(&[1, 3], vec![0.0f64, 0.0, 1.0]),
        ] {
            let out = xent(f.clone(), labels).unwrap();
            assert_close(&out[0], &[2], &want_loss, 1e-12);
            assert_eq!(out[1].dims(), &[2, 3]);
        }
        // Features broadcast against labels.
        let out = xent(
            t(&[1, 3], vec![1.0f64, 2.0, 3.0]),
            t(&[2, 3], vec![1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0]),
        )
        .unwrap();
        assert_close(&out[0], &[2], &[-LSM123[0], -LSM123[1]], 1e-12);
        assert_close(
            &out[1],
            &[2, 3],
            &[
                SM123[0] - 1.0,
                SM123[1],
                SM123[2],
                SM123[0],
                SM123[1] - 1.0,
                SM123[2],
            ],
            1e-12,
        );
        // half.
        let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
        let out = xent(
            t(&[1, 3], h(vec![1.0, 2.0, 3.0])),
            t(&[1, 3], h(vec![0.0, 0.0, 1.0])),
        )
        .unwrap();
        assert_close(&out[0], &[1], &[-LSM123[2]], 1e-3);
        // Empty batch.
        let out = xent(
            Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
            Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (out[0].dims(), out[1].dims()),
            (&[0i64][..], &[0i64, 3][..])
        );
        let err = xent(t(&[2, 3], vec![0f32; 6]), t(&[4, 3], vec![0f32; 12])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains(
                "logits and labels must be broadcastable: logits_size=[2,3] labels_size=[4,3]"
            ),
            "{err}"
        );
        let err = xent(t(&[3], vec![0f32; 3]), t(&[3], vec![0f32; 3])).unwrap_err();
        assert!(
            err.message().contains(
                "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"
            ),
            "{err}"
        );
    }

    #[test]
    fn large_cross_entropy_matches_an_independent_formula() {
        let (rows, cols) = (700usize, 50usize);
        let f: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 31) % 97) as f32 / 9.0)
            .collect();
        let labels: Vec<i64> = (0..rows).map(|r| ((r * 13) % cols) as i64).collect();
        let dense: Vec<f32> = (0..rows * cols)
            .map(|i| {
                if labels[i / cols] as usize == i % cols {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        let ft = t(&[rows as i64, cols as i64], f.clone());
        let dense_out = xent(ft.clone(), t(&[rows as i64, cols as i64], dense)).unwrap();
        let sparse_out = ctx()
            .op("SparseSoftmaxCrossEntropyWithLogits")
            .input(ft)
            .input(t(&[rows as i64], labels.clone()))
            .run()
            .unwrap();
        let mut want_loss = Vec::new();
        let mut want_back = Vec::new();
        for r in 0..rows {
            let x = &f[r * cols..(r + 1) * cols];
            let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let z: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
            let target = labels[r] as usize;
            want_loss.push(z.ln() - (x[target] as f64 - m));
            for (j, &v) in x.iter().enumerate() {
                let p = (v as f64 - m).exp() / z;
                want_back.push(if j == target { p - 1.0 } else { p });
            }
        }
        for out in [&dense_out, &sparse_out] {
            assert_close(&out[0], &[rows as i64], &want_loss, 1e-5);
            assert_close(&out[1], &[rows as i64, cols as i64], &want_back, 1e-5);
        }
    }

    fn sparse(features: Tensor, labels: Tensor) -> Result<Vec<Tensor>> {
        ctx()
            .op("SparseSoftmaxCrossEntropyWithLogits")
            .input(features)
            .input(labels)
            .run()
    }

    #[test]
    fn sparse_softmax_cross_entropy() {
        let f = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]);
        let third = 1.0 / 3.0;
        for labels in [t(&[2], vec![2i32, 1]), t(&[2], vec![2i64, 1])] {
            let out = sparse(f.clone(), labels).unwrap();
            assert_close(&out[0], &[2], &[-LSM123[2], 3f64.ln()], 1e-6);
            assert_close(
                &out[1],
                &[2, 3],
                &[
                    SM123[0],
                    SM123[1],
                    SM123[2] - 1.0,
                    third,
                    third - 1.0,
                    third,
                ],
                1e-6,
            );
        }
        let b = t(&[1, 2], vec![bf16::from_f32(0.0), bf16::from_f32(0.0)]);
        let out = sparse(b, t(&[1], vec![0i64])).unwrap();
        assert_close(&out[0], &[1], &[std::f64::consts::LN_2], 1e-2);
        let out = sparse(
            Tensor::zeros(DataType::Double, &[0, 3]).unwrap(),
            Tensor::zeros(DataType::Int64, &[0]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (out[0].dims(), out[1].dims()),
            (&[0i64][..], &[0i64, 3][..])
        );
    }

    #[test]
    fn sparse_softmax_cross_entropy_errors() {
        let f = || t(&[2, 3], vec![0f32; 6]);
        let err = sparse(f(), t(&[2], vec![2i64, 5])).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains(
                "Received a label value of 5 which is outside the valid range of [0, 3).  Label values: 2 5"
            ),
            "{err}"
        );
        let err = sparse(f(), t(&[2], vec![-1i32, 7])).unwrap_err();
        assert!(
            err.message()
                .contains("Received a label value of -1 which is outside the valid range of [0, 3).  Label values: -1 7"),
            "{err}"
        );
        let err = sparse(t(&[3], vec![0f32; 3]), t(&[3], vec![0i64; 3])).unwrap_err();
        assert!(
            err.message()
                .contains("logits must be 2-D, but got shape [3]"),
            "{err}"
        );
        let err = sparse(f(), t(&[2, 1], vec![0i64; 2])).unwrap_err();
        assert!(
            err.message()
                .contains("labels must be 1-D, but got shape [2,1]"),
            "{err}"
        );
        let err = sparse(f(), t(&[3], vec![0i64; 3])).unwrap_err();
        assert!(
            err.message().contains(
                "logits and labels must have the same first dimension, got logits shape [2,3] and labels shape [3]"
            ),
            "{err}"
        );
        let err = sparse(
            Tensor::zeros(DataType::Float, &[2, 0]).unwrap(),
            t(&[2], vec![0i64; 2]),
        )
        .unwrap_err();
        assert!(
            err.message()
                .contains("Must have at least one class, but got logits shape [2,0]"),
            "{err}"
        );
    }

    fn bias_add_op(value: Tensor, bias: Tensor, format: &str) -> Result<Tensor> {
        ctx()
            .op("BiasAdd")
            .input(value)
            .input(bias)
            .attr("data_format", format)
            .run1()
    }

    fn bias_grad(x: Tensor, format: &str) -> Result<Tensor> {
        ctx()
            .op("BiasAddGrad")
            .input(x)
            .attr("data_format", format)
            .run1()
    }

    #[test]
    fn bias_add_nhwc_and_nchw() {
        let v = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = t(&[3], vec![10.0f32, 20.0, 30.0]);
        let want = [11.0, 22.0, 33.0, 14.0, 25.0, 36.0];
        assert_close(
            &bias_add_op(v.clone(), b.clone(), "NHWC").unwrap(),
            &[2, 3],
            &want,
            0.0,
        );
        // Rank 2 NCHW: the channel is dimension 1, the last one too.
        assert_close(&bias_add_op(v, b, "NCHW").unwrap(), &[2, 3], &want, 0.0);
        // [N=1, C=2, H=2, W=2]: the first four get +100, the last four +200.
        let v = t(&[1, 2, 2, 2], (0..8).map(|i| i as f64).collect());
        let y = bias_add_op(v.clone(), t(&[2], vec![100.0f64, 200.0]), "NCHW").unwrap();
        assert_close(
            &y,
            &[1, 2, 2, 2],
            &[100.0, 101.0, 102.0, 103.0, 204.0, 205.0, 206.0, 207.0],
            0.0,
        );
        // The same tensor as NHWC: channel = W.
        let y = bias_add_op(v, t(&[2], vec![100.0f64, 200.0]), "NHWC").unwrap();
        assert_close(
            &y,
            &[1, 2, 2, 2],
            &[100.0, 201.0, 102.0, 203.0, 104.0, 205.0, 106.0, 207.0],
            0.0,
        );
        let y = ctx()
            .op("BiasAdd")
            .input(t(&[2, 2], vec![1i32, 2, 3, i32::MAX]))
            .input(t(&[2], vec![-1i32, 1]))
            .run1()
            .unwrap();
        assert_eq!(y.flat::<i32>().unwrap(), &[0, 3, 2, i32::MIN]);
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let y = bias_add_op(
            t(&[1, 2], h(&[1.5, 2.0])),
            t(&[2], h(&[0.25, -2.0])),
            "NHWC",
        )
        .unwrap();
        assert_close(&y, &[1, 2], &[1.75, 0.0], 0.0);
        let c = |re: f32| Complex::new(re, 1.0);
        let y = bias_add_op(
            t(&[1, 2], vec![c(1.0), c(2.0)]),
            t(&[2], vec![c(3.0), c(4.0)]),
            "NHWC",
        )
        .unwrap();
        assert_eq!(
            y.flat::<Complex<f32>>().unwrap(),
            &[Complex::new(4.0, 2.0), Complex::new(6.0, 2.0)]
        );
        let e = bias_add_op(
            Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
            t(&[3], vec![1.0f32; 3]),
            "NHWC",
        )
        .unwrap();
        assert_eq!(e.dims(), &[0, 3]);
    }

    #[test]
    fn large_bias_add_matches_a_naive_loop() {
        for format in ["NHWC", "NCHW"] {
            let dims = [8usize, 16, 30, 40];
            let c = if format == "NHWC" { dims[3] } else { dims[1] };
            let n: usize = dims.iter().product();
            let x: Vec<f32> = (0..n).map(|i| (i % 101) as f32).collect();
            let bias: Vec<f32> = (0..c).map(|i| i as f32 * 1000.0).collect();
            let di: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            let y = bias_add_op(t(&di, x.clone()), t(&[c as i64], bias.clone()), format).unwrap();
            let want: Vec<f64> = (0..n)
                .map(|i| {
                    let ch = if format == "NHWC" {
                        i % dims[3]
                    } else {
                        (i / (dims[2] * dims[3])) % dims[1]
                    };
                    (x[i] + bias[ch]) as f64
                })
                .collect();
            assert_close(&y, &di, &want, 0.0);
            // BiasAddGrad sums everything but the channel.
            let g = bias_grad(t(&di, x.clone()), format).unwrap();
            let mut want = vec![0.0f64; c];
            for (i, &v) in x.iter().enumerate() {
                let ch = if format == "NHWC" {
                    i % dims[3]
                } else {
                    (i / (dims[2] * dims[3])) % dims[1]
                };
                want[ch] += v as f64;
            }
            assert_close(&g, &[c as i64], &want, 0.0);
        }
    }

    #[test]
    fn bias_add_errors() {
        let err =
            bias_add_op(t(&[2, 3], vec![0f32; 6]), t(&[4], vec![0f32; 4]), "NHWC").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains(
                "Must provide as many biases as the last dimension of the input tensor: [4] vs. [2,3]"
            ),
            "{err}"
        );
        let err = bias_add_op(
            t(&[2, 3, 4], vec![0f32; 24]),
            t(&[4], vec![0f32; 4]),
            "NCHW",
        )
        .unwrap_err();
        assert!(
            err.message().contains("Must provide as many biases"),
            "{err}"
        );
        let err = bias_add_op(t(&[3], vec![0f32; 3]), t(&[3], vec![0f32; 3]), "NHWC").unwrap_err();
        assert!(
            err.message()
                .contains("Input tensor must be at least 2D: [3]"),
            "{err}"
        );
        let err =
            bias_add_op(t(&[2, 3], vec![0f32; 6]), t(&[1, 3], vec![0f32; 3]), "NHWC").unwrap_err();
        assert!(err.message().contains("Biases must be 1D: [1,3]"), "{err}");
        let err =
            bias_add_op(t(&[2, 3], vec![0f32; 6]), t(&[3], vec![0f32; 3]), "NWHC").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        let err = bias_grad(t(&[3], vec![0f32; 3]), "NHWC").unwrap_err();
        assert!(
            err.message()
                .contains("Input tensor must be at least 2D: [3]"),
            "{err}"
        );
    }

    #[test]
    fn bias_add_grad_small_values() {
        let g = bias_grad(t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]), "NHWC").unwrap();
        assert_close(&g, &[3], &[5.0, 7.0, 9.0], 0.0);
        let g = bias_grad(t(&[1, 2, 2, 2], (0..8).collect::<Vec<i32>>()), "NCHW").unwrap();
        assert_eq!(g.flat::<i32>().unwrap(), &[6, 22]);
        let h = t(&[2, 1], vec![f16::from_f32(0.5), f16::from_f32(0.25)]);
        assert_close(&bias_grad(h, "NHWC").unwrap(), &[1], &[0.75], 0.0);
        let g = bias_grad(Tensor::zeros(DataType::Float, &[0, 3]).unwrap(), "NHWC").unwrap();
        assert_close(&g, &[3], &[0.0; 3], 0.0);
        let g = bias_grad(Tensor::zeros(DataType::Double, &[2, 0]).unwrap(), "NHWC").unwrap();
        assert_eq!(g.dims(), &[0]);
    }

    // ---- Shape functions ----

    mod shapes {
        use opforge_core::shape_inference::testutil::ShapeTestOp;
        use opforge_core::{infer_error, infer_ok};

        #[test]
        fn relu_family() {
            for op in ["Relu", "Relu6"] {
                let o = ShapeTestOp::new(op);
                infer_ok!(o, "?", "in0");
                infer_ok!(o, "[]", "in0");
                infer_ok!(o, "[2,?,3]", "in0");
            }
            let o = ShapeTestOp::new("ReluGrad");
            infer_ok!(o, "?;?", "in0");
            infer_ok!(o, "?;[2,?]", "in1");
            infer_ok!(o, "[2,?];?", "in0");
            infer_ok!(o, "[2,3];[2,3]", "in0");
            infer_ok!(o, "[2,?];[2,3]", "in1");
            infer_ok!(o, "[2,?];[?,3]", "[d0_0,d1_1]");
            infer_error!(o, "[2];[2,3]", "Shapes must be equal rank, but are 1 and 2");
            infer_error!(
                o,
                "[2,3];[2,4]",
                "Dimension 1 in both shapes must be equal, but are 3 and 4"
            );
        }

        #[test]
        fn softmax_family() {
            for op in ["Softmax", "LogSoftmax"] {
                let o = ShapeTestOp::new(op);
                infer_ok!(o, "?", "in0");
                infer_ok!(o, "[5]", "in0");
                infer_ok!(o, "[2,?,3]", "in0");
                infer_error!(o, "[]", "Shape must be at least rank 1 but is rank 0");
            }
        }

        #[test]
        fn softmax_cross_entropy() {
            let o = ShapeTestOp::new("SoftmaxCrossEntropyWithLogits");
            infer_ok!(o, "[2,3];[2,3]", "[d0_0];in0");
            infer_ok!(o, "[?,3];[2,3]", "[d1_0];in1");
            infer_ok!(o, "[?,3];[2,?]", "[d1_0];[d1_0,d0_1]");
            infer_ok!(o, "?;?", "[?];[?,?]");
            infer_ok!(o, "?;[2,3]", "[d1_0];in1");
            infer_ok!(o, "[2,3];?", "[d0_0];in0");
            // Not mergeable: TensorFlow 2.x broadcasts features and labels.
            infer_ok!(o, "[2,3];[3]", "[d0_0];[d0_0,d0_1]");
            infer_ok!(o, "[1,3];[4,3]", "[d1_0];[d1_0,d0_1]");
            infer_ok!(o, "[4,1];[4,3]", "[d0_0];[d0_0,d1_1]");
            infer_ok!(o, "[3];[2,3]", "[d1_0];[d1_0,d0_0]");
            infer_error!(o, "[2,3];[4]", "Dimensions must be equal, but are 3 and 4");
            infer_error!(
                o,
                "[3];[3]",
                "Shape must be broadcasted with rank 2, but is rank 1"
            );
            infer_error!(
                o,
                "[2,2,3];[2,2,3]",
                "Shape must be broadcasted with rank 2, but is rank 3"
            );
            infer_error!(
                o,
                "?;[3]",
                "Shape must be broadcasted with rank 2, but is rank is unknown."
            );
        }

        #[test]
        fn sparse_softmax_cross_entropy() {
            let o = ShapeTestOp::new("SparseSoftmaxCrossEntropyWithLogits");
            infer_ok!(o, "?;?", "[?];[?,?]");
            infer_ok!(o, "[2,3];?", "[d0_0];[d0_0,d0_1]");
            infer_ok!(o, "[2,3];[?]", "[d0_0];[d0_0,d0_1]");
            infer_ok!(o, "[?,3];[2]", "[d1_0];[d1_0,d0_1]");
            infer_ok!(o, "?;[2]", "[d1_0];[d1_0,?]");
            infer_error!(o, "[2,3];[3]", "Dimensions must be equal, but are 2 and 3");
            infer_error!(o, "[2];[2]", "Shape must be rank 2 but is rank 1");
            infer_error!(o, "[2,3];[2,1]", "Shape must be rank 1 but is rank 2");
        }

        #[test]
        fn bias_add() {
            let nhwc = ShapeTestOp::new("BiasAdd").attr("data_format", "NHWC");
            let nchw = ShapeTestOp::new("BiasAdd").attr("data_format", "NCHW");
            // A bare node (no data_format) is NHWC, as in TensorFlow.
            let bare = ShapeTestOp::new("BiasAdd");
            for o in [&nhwc, &bare] {
                infer_ok!(o, "?;?", "?");
                infer_ok!(o, "?;[3]", "?");
                infer_ok!(o, "[2,3];[3]", "[d0_0,d0_1]");
                infer_ok!(o, "[2,?];[3]", "[d0_0,d1_0]");
                infer_ok!(o, "[2,4,?];?", "[d0_0,d0_1,d0_2]");
                infer_ok!(o, "[2,4,5,3];[?]", "[d0_0,d0_1,d0_2,d0_3]");
                infer_error!(o, "[2];[2]", "Shape must be at least rank 2 but is rank 1");
                infer_error!(o, "[2,3];[4]", "Dimensions must be equal, but are 3 and 4");
                infer_error!(o, "[2,3];[3,1]", "Shape must be rank 1 but is rank 2");
            }
            infer_ok!(nchw, "?;[3]", "?");
            infer_ok!(nchw, "[2,3,4,5];[3]", "[d0_0,d0_1,d0_2,d0_3]");
            infer_ok!(nchw, "[2,?,4,5];[3]", "[d0_0,d1_0,d0_2,d0_3]");
            infer_ok!(nchw, "[2,?,4];?", "[d0_0,d0_1,d0_2]");
            infer_error!(
                nchw,
                "[2,3];[3]",
                "Shape must be at least rank 3 but is rank 2"
            );
            infer_error!(
                nchw,
                "[2,3,4,5];[5]",
                "Dimensions must be equal, but are 3 and 5"
            );
        }

        #[test]
        fn bias_add_grad() {
            let nhwc = ShapeTestOp::new("BiasAddGrad").attr("data_format", "NHWC");
            let nchw = ShapeTestOp::new("BiasAddGrad").attr("data_format", "NCHW");
            let bare = ShapeTestOp::new("BiasAddGrad");
            for o in [&nhwc, &bare] {
                infer_ok!(o, "?", "[?]");
                infer_ok!(o, "[2,3]", "[d0_1]");
                infer_ok!(o, "[2,4,5,?]", "[d0_3]");
                infer_error!(o, "[3]", "Shape must be at least rank 2 but is rank 1");
            }
            infer_ok!(nchw, "?", "[?]");
            infer_ok!(nchw, "[2,3,4,5]", "[d0_1]");
            // TensorFlow's BiasAddGradShape takes the third-to-last dim for NCHW.
            infer_ok!(nchw, "[2,3,4]", "[d0_0]");
            infer_error!(nchw, "[2,3]", "Shape must be at least rank 3 but is rank 2");
        }
    }

    // ---- Gradients ----

    mod grads {
        use opforge_core::attrs::IntoAttrValue;
        use opforge_core::autodiff::{compute_gradient, GradientTape, Ops, OpsExt, Sym, SymArg};
        use opforge_core::{Result, Tensor};
        use opforge_ops_base::testutil::{assert_close, ctx, t};

        use opforge_ops_base::testutil::{check_gradients as check, distinct_values as vals};

        /// Values on both sides of 0 (and of 6), away from the kinks.
        fn signed(n: usize) -> Vec<f64> {
            (0..n)
                .map(|i| [-2.5, 0.7, 3.1, 7.5, -0.4, 5.2, 1.3, -6.0][i % 8] + i as f64 * 0.013)
                .collect()
        }

        fn unary(op: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
            move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0]], &[])
        }

        #[test]
        fn activation_gradients() {
            for op in ["Relu", "Relu6", "Softmax", "LogSoftmax"] {
                check(&unary(op), &[t(&[2, 4], signed(8))]);
                check(&unary(op), &[t(&[3], signed(3))]);
                check(&unary(op), &[t(&[2, 1, 3], signed(6))]);
            }
        }

        #[test]
        fn relu_grad_gradient() {
            let f = |o: &mut dyn Ops, xs: &[Sym]| o.op1("ReluGrad", &[xs[0], xs[1]], &[]);
            check(&f, &[t(&[2, 3], vals(6, 0.4)), t(&[2, 3], signed(6))]);
        }

        #[test]
        fn hand_checked_activation_gradients() {
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[5], vec![-1.0f64, 0.5, 3.0, 6.5, 7.0]));
            let r6 = tape.op1("Relu6", &[x], &[]).unwrap();
            let g = tape.gradient_tensors(r6, &[x]).unwrap();
            assert_close(
                g[0].as_ref().unwrap(),
                &[5],
                &[0.0, 1.0, 1.0, 0.0, 0.0],
                0.0,
            );
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[3], vec![-1.0f64, 0.5, 3.0]));
            let r = tape.op1("Relu", &[x], &[]).unwrap();
            let g = tape.gradient_tensors(r, &[x]).unwrap();
            assert_close(g[0].as_ref().unwrap(), &[3], &[0.0, 1.0, 1.0], 0.0);
            // The gradient of sum(softmax) is 0; of log_softmax[0], e0 - softmax.
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[1, 2], vec![0.0f64, 2f64.ln()]));
            let s = tape.op1("Softmax", &[x], &[]).unwrap();
            let g = tape.gradient_tensors(s, &[x]).unwrap();
            assert_close(g[0].as_ref().unwrap(), &[1, 2], &[0.0, 0.0], 1e-15);
            let mut tape = GradientTape::new(ctx(), false);
            let x = tape.watch(t(&[1, 2], vec![0.0f64, 2f64.ln()]));
            let s = tape.op1("LogSoftmax", &[x], &[]).unwrap();
            let seed = tape.constant(t(&[1, 2], vec![1.0f64, 0.0])).unwrap();
            let records = tape.records_snapshot();
            let g =
                opforge_core::autodiff::backprop(&mut tape, &records, &[s], &[Some(seed)], &[x])
                    .unwrap()[0]
                    .unwrap();
            assert_close(
                tape.value(g),
                &[1, 2],
                &[1.0 - 1.0 / 3.0, -2.0 / 3.0],
                1e-15,
            );
        }

        fn xent(o: &mut dyn Ops, op: &str, f: Sym, l: Sym, out: usize) -> Result<Sym> {
            let outs = o.call(op, &[SymArg::One(f), SymArg::One(l)], &Default::default())?;
            Ok(outs[out])
        }

        #[test]
        fn softmax_cross_entropy_gradients() {
            let op = "SoftmaxCrossEntropyWithLogits";
            let features = t(&[2, 3], signed(6));
            let labels = t(&[2, 3], vec![0.2, 0.3, 0.5, 0.0, 1.0, 0.0]);
            // Loss with respect to features and labels.
            let loss = |o: &mut dyn Ops, xs: &[Sym]| xent(o, op, xs[0], xs[1], 0);
            check(&loss, &[features.clone(), labels.clone()]);
            // The backprop output (TensorFlow's grad_grad path), alone and with
            // the loss, with respect to the features. (TensorFlow's gradient
            // for the labels ignores the backprop output's gradient, so the
            // labels are constants here.)
            let lc = labels.clone();
            let backprop = move |o: &mut dyn Ops, xs: &[Sym]| {
                let l = like(o, &lc, xs[0])?;
                xent(o, op, xs[0], l, 1)
            };
            check(&backprop, std::slice::from_ref(&features));
            let both = move |o: &mut dyn Ops, xs: &[Sym]| {
                let l = like(o, &labels, xs[0])?;
                let outs = o.call(
                    op,
                    &[SymArg::One(xs[0]), SymArg::One(l)],
                    &Default::default(),
                )?;
                let axis = o_scalar(o, -1)?;
                let sq = o.mul(outs[1], outs[1])?;
                let s = o.op1("Sum", &[sq, axis], &[])?;
                o.add(outs[0], s)
            };
            check(&both, &[features]);
        }

        /// A float64 constant in `x`'s dtype.
        fn like(o: &mut dyn Ops, v: &Tensor, x: Sym) -> Result<Sym> {
            let c = o.constant(v.clone())?;
            let dtype = o.dtype(x);
            o.op1("Cast", &[c], &[("DstT", dtype.into_attr_value())])
        }

        fn o_scalar(o: &mut dyn Ops, v: i32) -> Result<Sym> {
            o.constant(Tensor::scalar(v))
        }

        #[test]
        fn sparse_softmax_cross_entropy_gradients() {
            let op = "SparseSoftmaxCrossEntropyWithLogits";
            for labels in [t(&[3], vec![2i64, 0, 1]), t(&[3], vec![1i32, 1, 0])] {
                let loss = move |o: &mut dyn Ops, xs: &[Sym]| {
                    let l = o.constant(labels.clone())?;
                    xent(o, op, xs[0], l, 0)
                };
                check(&loss, &[t(&[3, 4], signed(12))]);
            }
            // Hand-checked: d loss / d logits = softmax - onehot.
            let mut tape = GradientTape::new(ctx(), false);
            let f = tape.watch(t(&[1, 2], vec![0.0f64, 2f64.ln()]));
            let l = tape.constant(t(&[1], vec![1i64])).unwrap();
            let loss = xent(&mut tape, op, f, l, 0).unwrap();
            let g = tape.gradient(loss, &[f, l]).unwrap();
            assert!(g[1].is_none());
            assert_close(
                tape.value(g[0].unwrap()),
                &[1, 2],
                &[1.0 / 3.0, -1.0 / 3.0],
                1e-15,
            );
            // No second derivative through the backprop output, as in TensorFlow.
            let backprop = |o: &mut dyn Ops, xs: &[Sym]| {
                let l = o.constant(t(&[2], vec![0i64, 1]))?;
                xent(o, op, xs[0], l, 1)
            };
            let err = compute_gradient(ctx(), &backprop, &[t(&[2, 2], signed(4))]).unwrap_err();
            assert!(
                err.message()
                    .contains("no way to take the second derivative"),
                "{err}"
            );
        }

        fn bias_add(format: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
            move |o: &mut dyn Ops, xs: &[Sym]| {
                o.op1(
                    "BiasAdd",
                    &[xs[0], xs[1]],
                    &[("data_format", format.into_attr_value())],
                )
            }
        }

        fn bias_add_grad(format: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
            move |o: &mut dyn Ops, xs: &[Sym]| {
                o.op1(
                    "BiasAddGrad",
                    &[xs[0]],
                    &[("data_format", format.into_attr_value())],
                )
            }
        }

        #[test]
        fn bias_add_gradients() {
            check(
                &bias_add("NHWC"),
                &[t(&[2, 3], signed(6)), t(&[3], vals(3, 1.0))],
            );
            check(
                &bias_add("NHWC"),
                &[t(&[2, 2, 3], signed(12)), t(&[3], vals(3, 1.0))],
            );
            check(
                &bias_add("NCHW"),
                &[t(&[2, 3, 2, 2], signed(24)), t(&[3], vals(3, 1.0))],
            );
            let no_format = |o: &mut dyn Ops, xs: &[Sym]| o.op1("BiasAdd", &[xs[0], xs[1]], &[]);
            check(&no_format, &[t(&[2, 3], signed(6)), t(&[3], vals(3, 1.0))]);
            check(&bias_add_grad("NHWC"), &[t(&[2, 3], signed(6))]);
            check(&bias_add_grad("NHWC"), &[t(&[2, 2, 3], signed(12))]);
            check(&bias_add_grad("NCHW"), &[t(&[2, 3, 2, 2], signed(24))]);
            let no_format = |o: &mut dyn Ops, xs: &[Sym]| o.op1("BiasAddGrad", &[xs[0]], &[]);
            check(&no_format, &[t(&[4, 2], signed(8))]);
            // Hand-checked: the bias gets the column sums.
            let mut tape = GradientTape::new(ctx(), false);
            let v = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
            let b = tape.watch(t(&[2], vec![0.5f64, -0.5]));
            let y = tape.op1("BiasAdd", &[v, b], &[]).unwrap();
            let g = tape.gradient_tensors(y, &[v, b]).unwrap();
            assert_close(g[0].as_ref().unwrap(), &[2, 2], &[1.0; 4], 0.0);
            assert_close(g[1].as_ref().unwrap(), &[2], &[2.0, 2.0], 0.0);
        }
    }
}
