//! The quantized element types (read through a bitcast to the integer
//! type of the same layout) with TensorFlow's float conversions
//! (`quantization_utils.h`), and the CPU kernels of `QuantizedConcat` and
//! `QuantizedReshape` (quint8 and qint32, as TensorFlow registers them).

use crate::basic::ReshapeOp;
use opforge_core::kernel::{KernelDefBuilder, OpKernel, OpKernelContext};
use opforge_core::{
    ensure, register_kernel, DataType, Element, Result, Status, Tensor, TensorShape,
};
use opforge_ops_base::args::fmt_shape;
use opforge_ops_base::cpu::mover::layout::ConcatRows;
use opforge_ops_base::cpu::mover::move_to_output;
use opforge_ops_base::cpu::par::par_map;
use opforge_ops_base::types::{unsupported, INDEX_TYPES};

/// A quantized element type, as the integer type of its layout: `quint8`
/// as `u8`, `qint8` as `i8`, `quint16` as `u16`, `qint16` as `i16`,
/// `qint32` as `i32`.
pub(super) trait Quantized: Element {
    /// `std::numeric_limits<T>::lowest()`.
    const LOWEST: i64;
    /// `std::numeric_limits<T>::max()`.
    const HIGHEST: i64;
    /// The value as a float (C++'s conversion: rounded to nearest).
    fn to_f32(self) -> f32;
    /// The value of an int32 already clamped to the type's range.
    fn from_i32(v: i32) -> Self;
    /// The number of bits.
    const BITS: u32 = (std::mem::size_of::<Self>() * 8) as u32;
}

macro_rules! quantized {
    ($($t:ty),*) => {$(
        impl Quantized for $t {
            const LOWEST: i64 = <$t>::MIN as i64;
            const HIGHEST: i64 = <$t>::MAX as i64;
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
        }
    )*};
}
quantized!(u8, i8, u16, i16, i32);

/// Runs `$body` with `$T` bound to the layout type of the quantized dtype
/// `$dtype` (one of `[$variant, ...]`); any other dtype evaluates
/// `$fallback`.
macro_rules! quantized_dispatch {
    ($dtype:expr, $T:ident => $body:expr, [$($variant:ident),*], $fallback:expr) => {
        match $dtype {
            $(opforge_core::DataType::$variant => {
                #[allow(dead_code)]
                type $T = $crate::quantize::quantized::layout!($variant);
                $body
            })*
            #[allow(unreachable_patterns)]
            _ => $fallback,
        }
    };
}
pub(super) use quantized_dispatch;

/// The layout type of a quantized dtype variant name.
macro_rules! layout {
    (QUInt8) => {
        u8
    };
    (QInt8) => {
        i8
    };
    (QUInt16) => {
        u16
    };
    (QInt16) => {
        i16
    };
    (QInt32) => {
        i32
    };
}
pub(super) use layout;

/// The elements of a quantized tensor, as its layout type.
pub(super) fn view<T: Quantized>(t: &Tensor) -> Result<Tensor> {
    t.bitcast(T::DTYPE)
}

/// C++'s float-to-int32 conversion as x86 performs it (truncating): NaN
/// and values out of range give `i32::MIN` (x86's "integer indefinite").
#[inline(always)]
pub(super) fn f32_to_i32(v: f32) -> i32 {
    if v.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&v) {
        i32::MIN
    } else {
        v as i32
    }
}

/// TensorFlow's `QuantizedToFloatStruct` (MIN_FIRST dequantization):
/// `offset + x * scale`, in TensorFlow's float arithmetic.
#[derive(Clone, Copy, Debug)]
pub(super) struct MinFirstDequantizer {
    offset: f32,
    scale: f32,
}

impl MinFirstDequantizer {
    /// The dequantizer of `T` over `[min, max]`.
    pub(super) fn new<T: Quantized>(min: f32, max: f32) -> MinFirstDequantizer {
        let steps = (1u64 << T::BITS) as f64;
        let scale = (f64::from(max - min) / (steps - 1.0)) as f32;
        let min_rounded = if max == min {
            min
        } else {
            (min / scale).round() * scale
        };
        MinFirstDequantizer {
            offset: min_rounded - T::LOWEST as f32 * scale,
            scale,
        }
    }

    /// The float value of `x`.
    #[inline(always)]
    pub(super) fn apply<T: Quantized>(&self, x: T) -> f32 {
        self.offset + x.to_f32() * self.scale
    }
}

/// TensorFlow's `FloatToQuantizedStruct` with `QUANTIZE_WITH_EIGEN`.
#[derive(Clone, Copy, Debug)]
struct Quantizer {
    scale: f32,
    shift: f32,
    lower: f32,
    upper: f32,
}

impl Quantizer {
    fn new<T: Quantized>(min: f32, max: f32) -> Quantizer {
        let steps = (1u64 << T::BITS) as f64;
        let scale = if max == min {
            0.0
        } else {
            ((steps - 1.0) / f64::from(max - min)) as f32
        };
        let lowest = T::LOWEST as f32;
        let min_scaled = (min * scale).round();
        let (lower, upper) = (T::LOWEST as f32, T::HIGHEST as f32);
        Quantizer {
            scale,
            shift: min_scaled - lowest,
            lower: if lower < -2_147_483_648.0 {
                -2_147_483_648.0
            } else {
                lower
            },
            upper: if 2_147_483_520.0 < upper {
                2_147_483_520.0
            } else {
                upper
            },
        }
    }

    #[inline(always)]
    fn apply<T: Quantized>(&self, v: f32) -> T {
        let q = (v * self.scale).round() - self.shift;
        let q = if q < self.lower { self.lower } else { q };
        let q = if self.upper < q { self.upper } else { q };
        T::from_i32(f32_to_i32(q))
    }
}

// ---------------------------------------------------------------------------
// QuantizedConcat
// ---------------------------------------------------------------------------

/// `QuantizedConcat`: every input requantized to the union of the input
/// ranges (where its range differs), then concatenated.
struct QuantizedConcatOp;

/// TensorFlow's `IsLegacyScalar`: rank 0, or one element in rank 1.
fn is_legacy_scalar(dims: &[i64]) -> bool {
    dims.is_empty() || dims == [1]
}

impl OpKernel for QuantizedConcatOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = (ctx.num_inputs() - 1) / 3;
        let dim_t = ctx.input(0);
        ensure!(
            dim_t.rank() == 0,
            InvalidArgument,
            "Concat dim tensor should be a scalar integer, but got shape {}",
            fmt_shape(dim_t.dims())
        );
        let concat_dim = dim_t.scalar_value::<i32>()?;
        let inputs = ctx.inputs().to_vec();
        let dtype = inputs[1].dtype();
        let (values, mins, maxes) = (&inputs[1..=n], &inputs[n + 1..=2 * n], &inputs[2 * n + 1..]);
        let first = values[0].dims().to_vec();
        let input_dims = first.len();
        ensure!(
            concat_dim >= 0 && (concat_dim as usize) < input_dims,
            InvalidArgument,
            "ConcatOp : Expected concatenating dimensions in the range [0, {input_dims}), but got {concat_dim}"
        );
        let axis = concat_dim as usize;
        let mut ranges = Vec::with_capacity(n);
        let (mut out_min, mut out_max) = (f32::MAX, f32::MIN);
        for i in 0..n {
            for (t, what) in [(&mins[i], "input_mins"), (&maxes[i], "input_maxes")] {
                ensure!(
                    t.num_elements() == 1,
                    InvalidArgument,
                    "{what} each tensor's num elements must be 1, given num elements {} in index {i}",
                    t.num_elements()
                );
            }
            let (lo, hi) = (mins[i].flat::<f32>()?[0], maxes[i].flat::<f32>()?[0]);
            ranges.push((lo, hi));
            // std::min / std::max.
            out_min = if lo < out_min { lo } else { out_min };
            out_max = if out_max < hi { hi } else { out_max };
        }
        if dtype == DataType::QInt32 {
            // A signed type: a range symmetric around 0.
            let largest = {
                let (a, b) = (out_min.abs(), out_max.abs());
                if a < b {
                    b
                } else {
                    a
                }
            };
            (out_min, out_max) = (-largest, largest);
        }
        let outer: i64 = first[..axis].iter().product();
        let mut out_concat: i64 = 0;
        let mut row_lens = Vec::with_capacity(n);
        for (i, v) in values.iter().enumerate() {
            let dims = v.dims();
            let shapes = || {
                format!(
                    "shape[0] = {} vs. shape[{i}] = {}",
                    fmt_shape(&first),
                    fmt_shape(dims)
                )
            };
            ensure!(
                dims.len() == input_dims || (is_legacy_scalar(&first) && is_legacy_scalar(dims)),
                InvalidArgument,
                "ConcatOp : Ranks of all input tensors should match: {}",
                shapes()
            );
            for (j, d) in first.iter().enumerate() {
                ensure!(
                    j == axis || dims.get(j) == Some(d),
                    InvalidArgument,
                    "ConcatOp : Dimensions of inputs should match: {}",
                    shapes()
                );
            }
            let elements = v.num_elements() as i64;
            row_lens.push(if elements > 0 {
                (elements / outer) as usize
            } else {
                0
            });
            let d = if dims.is_empty() { 1 } else { dims[axis] };
            out_concat = out_concat
                .checked_add(d)
                .ok_or_else(|| Status::invalid_argument("ConcatOp : the output is too large"))?;
        }
        let mut out_dims = first.clone();
        out_dims[axis] = out_concat;
        let shape = TensorShape::new(&out_dims)?;
        let mut srcs = Vec::with_capacity(n);
        for (v, &(lo, hi)) in values.iter().zip(&ranges) {
            if (lo == out_min && hi == out_max) || v.num_elements() == 0 {
                srcs.push(v.clone());
                continue;
            }
            let requantized = quantized_dispatch!(dtype, T => requantize::<T>(ctx, v, (lo, hi), (out_min, out_max))?,
                [QUInt8, QInt32], return Err(unsupported(ctx, dtype)));
            srcs.push(requantized);
        }
        let refs: Vec<&Tensor> = srcs.iter().collect();
        move_to_output(
            ctx,
            0,
            &refs,
            shape,
            &ConcatRows {
                row_lens: &row_lens,
            },
        )?;
        ctx.set_output(1, Tensor::scalar(out_min))?;
        ctx.set_output(2, Tensor::scalar(out_max))
    }
}

/// `v` (of `T`'s quantized dtype) dequantized from `from` and quantized
/// into `to`, as TensorFlow's `RequantizeCopier` does.
fn requantize<T: Quantized>(
    ctx: &OpKernelContext<'_>,
    v: &Tensor,
    from: (f32, f32),
    to: (f32, f32),
) -> Result<Tensor> {
    let mut out = ctx.allocate_temp(T::DTYPE, v.shape().clone())?;
    let src = view::<T>(v)?;
    let (dq, q) = (
        MinFirstDequantizer::new::<T>(from.0, from.1),
        Quantizer::new::<T>(to.0, to.1),
    );
    par_map(
        ctx.thread_pool(),
        src.flat::<T>()?,
        out.flat_mut::<T>()?,
        8,
        |x| q.apply::<T>(dq.apply(x)),
    );
    out.bitcast(v.dtype())
}

register_kernel!(
    KernelDefBuilder::new("QuantizedConcat")
        .type_constraint_list("T", &[DataType::QUInt8, DataType::QInt32])
        .host_memory("concat_dim"),
    fn = |_| Ok(Box::new(QuantizedConcatOp))
);

// ---------------------------------------------------------------------------
// QuantizedReshape
// ---------------------------------------------------------------------------

/// `QuantizedReshape`: `Reshape`'s kernel for the data, the range passed
/// through.
struct QuantizedReshapeOp;

impl OpKernel for QuantizedReshapeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ReshapeOp.compute(ctx)?;
        for (i, what) in [(2, "input_min"), (3, "input_max")] {
            let t = ctx.input(i);
            ensure!(
                t.num_elements() == 1 && t.rank() <= 1,
                InvalidArgument,
                "{what} must be a scalar or a vector of 1 element"
            );
            let v = t.flat::<f32>()?[0];
            ctx.set_output(i - 1, Tensor::scalar(v))?;
        }
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("QuantizedReshape")
        .type_constraint_list("T", &[DataType::QUInt8, DataType::QInt32])
        .type_constraint_list("Tshape", INDEX_TYPES)
        .host_memory("shape"),
    fn = |_| Ok(Box::new(QuantizedReshapeOp))
);
