//! `QuantizeAndDequantize` (V1, deprecated) and `QuantizeAndDequantizeV2`:
//! TensorFlow's CPU kernels (`quantize_and_dequantize_op.cc`, float and
//! double), one engine for both, and their pass-through gradients
//! (`array_grad.py`).

use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::{dispatch, ensure, register_gradient, register_kernel, Element};
use opforge_core::{Result, Status};
use opforge_ops_base::args::{dims_product, fmt_float};
use opforge_ops_base::cpu::par::{chunks_in_shards, elementwise_shards, par_map};
use opforge_ops_base::grad::identity_grad;
use opforge_ops_base::types::{unsupported, FLOAT_DOUBLE_TYPES};
use std::ops::{Div, Mul};

/// The element types of the kernels (float and double): what the
/// quantization range and the rounding need.
trait QdqFloat:
    Element + PartialOrd + Mul<Output = Self> + Div<Output = Self> + std::fmt::Display
{
    /// `std::numeric_limits<T>::max()`.
    const MAX: Self;
    /// `std::numeric_limits<T>::lowest()`.
    const LOWEST: Self;
    /// Zero.
    const ZERO: Self;
    /// The integer `v`, rounded to the type.
    fn from_i64(v: i64) -> Self;
    /// An attr's `float` value.
    fn from_f32(v: f32) -> Self;
    /// Rounds to the nearest integer, ties to even.
    fn round_half_to_even(self) -> Self;
    /// `floor(self + 0.5)`.
    fn round_half_up(self) -> Self;
    /// The value as TensorFlow prints it.
    fn fmt_tf(self) -> String;
}

macro_rules! qdq_float {
    ($t:ty, $single:expr) => {
        impl QdqFloat for $t {
            const MAX: Self = <$t>::MAX;
            const LOWEST: Self = <$t>::MIN;
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn round_half_to_even(self) -> Self {
                self.round_ties_even()
            }
            #[inline(always)]
            fn round_half_up(self) -> Self {
                (self + 0.5).floor()
            }
            fn fmt_tf(self) -> String {
                fmt_float(self as f64, $single)
            }
        }
    };
}

qdq_float!(f32, true);
qdq_float!(f64, false);

/// The `round_mode` attr.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RoundMode {
    HalfToEven,
    HalfUp,
}

/// How a kernel quantizes: TensorFlow's `signed_input`, `num_bits`,
/// `range_given`, `round_mode` and `narrow_range`.
#[derive(Clone, Copy, Debug)]
struct Quantizer {
    signed_input: bool,
    num_bits: u32,
    range_given: bool,
    round_mode: RoundMode,
    narrow_range: bool,
}

/// One scale: the clamping range (adjusted to the grid), the scale and
/// its inverse (TensorFlow's `ComputeQuantizationRange`).
#[derive(Clone, Copy, Debug)]
struct Scale<T> {
    min: T,
    max: T,
    scale: T,
    inverse: T,
}

impl Quantizer {
    /// Reads and checks `signed_input` and `num_bits` (as TensorFlow's
    /// kernels do, in `[1, 62)` signed or `[1, 63)` unsigned).
    fn new(
        ctx: &OpKernelConstruction<'_>,
        num_bits: i64,
        round_mode: RoundMode,
        narrow_range: bool,
    ) -> Result<Quantizer> {
        let signed_input: bool = ctx.get_attr("signed_input")?;
        ensure!(
            num_bits > 0 && num_bits < if signed_input { 62 } else { 63 },
            InvalidArgument,
            "num_bits is out of range: {num_bits} with signed_input_ {}",
            signed_input as i32
        );
        Ok(Quantizer {
            signed_input,
            num_bits: num_bits as u32,
            range_given: ctx.get_attr("range_given")?,
            round_mode,
            narrow_range,
        })
    }

    /// The largest scale that keeps `[min, max]` within the integer grid
    /// and 0 at 0; the side that does not decide the scale is moved to
    /// the grid's end.
    fn scale<T: QdqFloat>(&self, mut min: T, mut max: T) -> Scale<T> {
        let half = 1i64 << (self.num_bits - 1);
        let (min_q, max_q) = if self.signed_input {
            (if self.narrow_range { 1 - half } else { -half }, half - 1)
        } else {
            (0, (1i64 << self.num_bits) - 1)
        };
        let (min_q, max_q) = (T::from_i64(min_q), T::from_i64(max_q));
        let from_min = if min_q * min > T::ZERO {
            min_q / min
        } else {
            T::MAX
        };
        let from_max = if max_q * max > T::ZERO {
            max_q / max
        } else {
            T::MAX
        };
        if from_min < from_max {
            let inverse = min / min_q;
            max = max_q * inverse;
            Scale {
                min,
                max,
                scale: from_min,
                inverse,
            }
        } else {
            let inverse = max / max_q;
            min = min_q * inverse;
            Scale {
                min,
                max,
                scale: from_max,
                inverse,
            }
        }
    }

    /// Quantizes and dequantizes one value (clamped first if the range is
    /// given).
    #[inline(always)]
    fn apply<T: QdqFloat>(&self, s: &Scale<T>, x: T) -> T {
        let x = if self.range_given {
            let x = if s.max < x { s.max } else { x };
            if x < s.min {
                s.min
            } else {
                x
            }
        } else {
            x
        };
        let y = x * s.scale;
        let y = match self.round_mode {
            RoundMode::HalfToEven => y.round_half_to_even(),
            RoundMode::HalfUp => y.round_half_up(),
        };
        y * s.inverse
    }

    /// Quantizes `x` (viewed as `[pre, depth, post]`, one range per
    /// `depth` slice; `ranges` holds them if given) into `out`.
    fn run<T: QdqFloat>(
        &self,
        pool: &ThreadPool,
        x: &[T],
        ranges: Option<(&[T], &[T])>,
        depth: usize,
        post: usize,
        out: &mut [T],
    ) {
        // An empty input may still have a huge `depth` (a zero elsewhere in
        // its shape): nothing to quantize, and no range per slice to make.
        if x.is_empty() {
            return;
        }
        let scales: Vec<Scale<T>> = (0..depth)
            .map(|c| {
                let (min, max) = match ranges {
                    Some((mins, maxs)) => (mins[c], maxs[c]),
                    None => min_max(x, c, depth, post),
                };
                self.scale(min, max)
            })
            .collect();
        if let [s] = scales.as_slice() {
            return par_map(pool, x, out, 4, |v| self.apply(s, v));
        }
        let shards = elementwise_shards(pool, out.len(), 4);
        let post = post.max(1);
        chunks_in_shards(pool, out, post, shards, &|off, o| {
            let x = &x[off..off + o.len()];
            for (i, (o, &v)) in o.iter_mut().zip(x).enumerate() {
                *o = self.apply(&scales[((off + i) / post) % depth], v);
            }
        });
    }
}

/// The min and max of slice `c` of `x` viewed as `[pre, depth, post]`, as
/// Eigen's reductions compute them (from the type's highest and lowest
/// values; a NaN never replaces the running value).
fn min_max<T: QdqFloat>(x: &[T], c: usize, depth: usize, post: usize) -> (T, T) {
    let (mut lo, mut hi) = (T::MAX, T::LOWEST);
    if post == 0 || depth == 0 {
        return (lo, hi);
    }
    for row in x.chunks(depth * post) {
        for &v in &row[c * post..(c + 1) * post] {
            if v < lo {
                lo = v;
            }
            if v > hi {
                hi = v;
            }
        }
    }
    (lo, hi)
}

// ---------------------------------------------------------------------------
// QuantizeAndDequantize (V1): the range is in attrs.
// ---------------------------------------------------------------------------

/// `QuantizeAndDequantize`: one scale for the whole tensor, from the
/// attrs' range (`range_given`, values clamped to it) or the input's min
/// and max, rounding half to even, not narrow range.
struct QuantizeAndDequantizeOp {
    q: Quantizer,
    input_min: f32,
    input_max: f32,
}

impl CreateKernel for QuantizeAndDequantizeOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let num_bits: i32 = ctx.get_attr("num_bits")?;
        let q = Quantizer::new(ctx, i64::from(num_bits), RoundMode::HalfToEven, false)?;
        let input_min: f32 = ctx.get_attr("input_min")?;
        let input_max: f32 = ctx.get_attr("input_max")?;
        if q.range_given {
            ensure!(
                input_min <= input_max,
                InvalidArgument,
                "Invalid range: input_min {} > input_max {}",
                fmt_float(f64::from(input_min), true),
                fmt_float(f64::from(input_max), true)
            );
        }
        Ok(QuantizeAndDequantizeOp {
            q,
            input_min,
            input_max,
        })
    }
}

impl OpKernel for QuantizeAndDequantizeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let dt = input.dtype();
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, input.shape().clone())?;
        dispatch!(dt, T => {
            let range = [T::from_f32(self.input_min), T::from_f32(self.input_max)];
            let ranges = self.q.range_given.then(|| (&range[..1], &range[1..]));
            self.q.run::<T>(pool, input.flat::<T>()?, ranges, 1, input.num_elements(), out.flat_mut::<T>()?);
        }, [Float, Double], return Err(unsupported(ctx, dt)));
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("QuantizeAndDequantize").type_constraint_list("T", FLOAT_DOUBLE_TYPES),
    QuantizeAndDequantizeOp
);

// ---------------------------------------------------------------------------
// QuantizeAndDequantizeV2: the range is an input, per tensor or per slice
// along `axis`.
// ---------------------------------------------------------------------------

/// `QuantizeAndDequantizeV2`.
struct QuantizeAndDequantizeV2Op {
    q: Quantizer,
    axis: i32,
}

impl CreateKernel for QuantizeAndDequantizeV2Op {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let axis: i32 = ctx.get_attr("axis")?;
        let num_bits: i32 = ctx.get_attr("num_bits")?;
        let mode: String = ctx.get_attr("round_mode")?;
        let round_mode = match mode.as_str() {
            "HALF_TO_EVEN" => RoundMode::HalfToEven,
            "HALF_UP" => RoundMode::HalfUp,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "Round mode string must be 'HALF_UP' or 'HALF_TO_EVEN', is '{mode}'"
                )))
            }
        };
        let narrow_range: bool = ctx.get_attr("narrow_range")?;
        let q = Quantizer::new(ctx, i64::from(num_bits), round_mode, narrow_range)?;
        Ok(QuantizeAndDequantizeV2Op { q, axis })
    }
}

impl OpKernel for QuantizeAndDequantizeV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let axis = self.axis;
        ensure!(
            axis >= -1,
            InvalidArgument,
            "Axis must be at least -1. Found {axis}"
        );
        let rank = input.rank();
        ensure!(
            axis == -1 || (axis as usize) < rank,
            InvalidArgument,
            "Shape must be at least rank {} but is rank {rank}",
            i64::from(axis) + 1
        );
        let dims = input.dims();
        let (depth, post) = if axis == -1 {
            (1, input.num_elements())
        } else {
            let a = axis as usize;
            // Saturates only for an empty input, which `run` skips.
            let post = dims_product(&dims[a + 1..]);
            (dims[a] as usize, post as usize)
        };
        let (min_t, max_t) = (ctx.input(1).clone(), ctx.input(2).clone());
        if self.q.range_given {
            // TensorFlow 2.21 requires scalars here whatever the axis, and
            // then rank 1 when an axis is given: a given range only works
            // per tensor.
            ensure!(
                min_t.rank() == 0,
                InvalidArgument,
                "input_min must be a scalar."
            );
            ensure!(
                max_t.rank() == 0,
                InvalidArgument,
                "input_max must be a scalar."
            );
            ensure!(
                axis == -1,
                InvalidArgument,
                "Shape must be rank 1 for input_min_tensor when the axis is specified"
            );
        }
        let dt = input.dtype();
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, input.shape().clone())?;
        dispatch!(dt, T => {
            let ranges = if self.q.range_given {
                let (min, max) = (min_t.scalar_value::<T>()?, max_t.scalar_value::<T>()?);
                ensure!(
                    min <= max,
                    InvalidArgument,
                    "Invalid range: input_min {} > input_max {}",
                    min.fmt_tf(),
                    max.fmt_tf()
                );
                Some((min_t.flat::<T>()?, max_t.flat::<T>()?))
            } else {
                None
            };
            self.q.run::<T>(pool, input.flat::<T>()?, ranges, depth, post, out.flat_mut::<T>()?);
        }, [Float, Double], return Err(unsupported(ctx, dt)));
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("QuantizeAndDequantizeV2").type_constraint_list("T", FLOAT_DOUBLE_TYPES),
    QuantizeAndDequantizeV2Op
);

// The gradient passes through to the input (array_grad.py's
// `_QuantizeAndDequantizeGrad` and `_QuantizeAndDequantizeV2Grad`; none
// for V2's range inputs).
register_gradient!("QuantizeAndDequantize", identity_grad);
register_gradient!("QuantizeAndDequantizeV2", identity_grad);
