//! `Dequantize`: TensorFlow's CPU kernel (`dequantize_op.cc`): qint8,
//! quint8, qint16, quint16 and qint32 to float or bfloat16, in the modes
//! MIN_COMBINED, MIN_FIRST and SCALED, per tensor or per slice along
//! `axis`. TensorFlow registers no gradient for it.

use super::quantized::{f32_to_i32, quantized_dispatch, view, MinFirstDequantizer, Quantized};
use opforge_core::half::bf16;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::{ensure, register_kernel, DataType, Result, Status};
use opforge_ops_base::args::dims_product;
use opforge_ops_base::cpu::par::{chunks_in_shards, elementwise_shards, par_map};
use opforge_ops_base::types::unsupported;

/// The `mode` attr.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    MinCombined,
    MinFirst,
    Scaled,
}

/// `Dequantize`.
struct DequantizeOp {
    mode: Mode,
    narrow_range: bool,
    axis: i32,
}

impl CreateKernel for DequantizeOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let mode: String = ctx.get_attr("mode")?;
        let out = ctx.output_types()[0];
        ensure!(
            out == DataType::Float || out == DataType::BFloat16,
            InvalidArgument,
            "Output type must be bfloat16 or float, is '{out}'"
        );
        ensure!(
            out == DataType::Float || mode == "MIN_COMBINED",
            InvalidArgument,
            "When output type is bfloat16, Mode string must be 'MIN_COMBINED', is '{mode}'"
        );
        let mode = match mode.as_str() {
            "MIN_COMBINED" => Mode::MinCombined,
            "MIN_FIRST" => Mode::MinFirst,
            "SCALED" => Mode::Scaled,
            _ => {
                return Err(Status::invalid_argument(format!(
                    "Mode string must be 'MIN_COMBINED', 'MIN_FIRST', or 'SCALED', is '{mode}'"
                )))
            }
        };
        Ok(DequantizeOp {
            mode,
            narrow_range: ctx.get_attr("narrow_range")?,
            axis: ctx.get_attr("axis")?,
        })
    }
}

/// How one range dequantizes: `x * scale + offset` (MIN_COMBINED and
/// SCALED, in TensorFlow's order of operations) or TensorFlow's
/// `QuantizedToFloatStruct` (MIN_FIRST).
#[derive(Clone, Copy, Debug)]
enum Dequantizer {
    /// `(x + half_range) * scale + min`.
    Combined {
        half_range: f32,
        scale: f32,
        min: f32,
    },
    /// `offset + x * scale`.
    MinFirst(MinFirstDequantizer),
    /// `x * scale`; `via_int`: `x` converted to float, to int32 and back
    /// to float first (TensorFlow's per-tensor path, where qint32 values
    /// that round to 2^31 become -2^31).
    Scaled { scale: f32, via_int: bool },
}

impl Dequantizer {
    fn new<T: Quantized>(
        mode: Mode,
        narrow_range: bool,
        per_tensor: bool,
        min: f32,
        max: f32,
    ) -> Dequantizer {
        let (lowest, highest) = (T::LOWEST, T::HIGHEST);
        match mode {
            Mode::MinCombined => {
                let half_range = if lowest == 0 {
                    0.0
                } else {
                    (highest as f32 - lowest as f32 + 1.0) / 2.0
                };
                Dequantizer::Combined {
                    half_range,
                    scale: (max - min) / (highest as f32 - lowest as f32),
                    min,
                }
            }
            Mode::MinFirst => Dequantizer::MinFirst(MinFirstDequantizer::new::<T>(min, max)),
            Mode::Scaled => {
                let min_output = (lowest + i64::from(narrow_range)) as f32;
                let from_max = max / highest as f32;
                let scale = if lowest == 0 {
                    from_max
                } else {
                    let from_min = min / min_output;
                    // std::max
                    if from_min < from_max {
                        from_max
                    } else {
                        from_min
                    }
                };
                Dequantizer::Scaled {
                    scale,
                    via_int: per_tensor,
                }
            }
        }
    }

    #[inline(always)]
    fn apply<T: Quantized>(&self, x: T) -> f32 {
        match *self {
            Dequantizer::Combined {
                half_range,
                scale,
                min,
            } => (x.to_f32() + half_range) * scale + min,
            Dequantizer::MinFirst(d) => d.apply(x),
            Dequantizer::Scaled { scale, via_int } => {
                let v = x.to_f32();
                let v = if via_int { f32_to_i32(v) as f32 } else { v };
                v * scale
            }
        }
    }
}

impl DequantizeOp {
    /// Dequantizes `x` (viewed as `[pre, slices, post]`, one range per
    /// slice) into `out`.
    fn run<T: Quantized>(
        &self,
        ctx: &OpKernelContext<'_>,
        x: &[T],
        ranges: &[(f32, f32)],
        post: usize,
        out: &mut [f32],
    ) {
        let pool = ctx.thread_pool();
        let d: Vec<Dequantizer> = ranges
            .iter()
            .map(|&(lo, hi)| {
                Dequantizer::new::<T>(self.mode, self.narrow_range, ranges.len() == 1, lo, hi)
            })
            .collect();
        if let [d] = d.as_slice() {
            return par_map(pool, x, out, 4, |v| d.apply(v));
        }
        let (slices, post) = (d.len().max(1), post.max(1));
        let shards = elementwise_shards(pool, out.len(), 4);
        chunks_in_shards(pool, out, post, shards, &|off, o| {
            let x = &x[off..off + o.len()];
            for (i, (o, &v)) in o.iter_mut().zip(x).enumerate() {
                *o = d[((off + i) / post) % slices].apply(v);
            }
        });
    }
}

impl OpKernel for DequantizeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let (min_t, max_t) = (ctx.input(1).clone(), ctx.input(2).clone());
        let (axis, rank) = (self.axis, input.rank());
        ensure!(
            i64::from(axis) < rank as i64,
            InvalidArgument,
            "Axis must be less than input dimension({rank}), got {axis}"
        );
        // An axis below -1 dequantizes per tensor, as in TensorFlow.
        let per_slice = axis > -1;
        let slices = if per_slice {
            input.dims()[axis as usize]
        } else {
            1
        };
        for (t, what) in [(&min_t, "input_min_tensor"), (&max_t, "input_max_tensor")] {
            ensure!(
                t.num_elements() as i64 == slices,
                InvalidArgument,
                "{what} must have as many elements as input on the dequantization axis ({axis}), got {}, expected {slices}",
                t.num_elements()
            );
        }
        let (mins, maxs) = (min_t.flat::<f32>()?, max_t.flat::<f32>()?);
        let post = if slices == 1 {
            input.num_elements()
        } else {
            ensure!(
                self.mode != Mode::MinFirst,
                Unimplemented,
                "MIN_FIRST mode is not implemented for Dequantize with axis != -1."
            );
            // TensorFlow reads the ranges as vectors (and aborts otherwise).
            for (t, what) in [(&min_t, "min_range"), (&max_t, "max_range")] {
                ensure!(
                    t.rank() == 1,
                    InvalidArgument,
                    "{what} must be rank 1 when axis is {axis}, but is rank {}",
                    t.rank()
                );
            }
            // Saturates only for an empty input (nothing to dequantize).
            dims_product(&input.dims()[axis as usize + 1..]) as usize
        };
        let ranges: Vec<(f32, f32)> = mins.iter().copied().zip(maxs.iter().copied()).collect();
        let dtype = input.dtype();
        let out_type = ctx.output_type(0);
        let mut out = ctx.allocate_temp(DataType::Float, input.shape().clone())?;
        quantized_dispatch!(dtype, T => {
            let src = view::<T>(&input)?;
            self.run::<T>(ctx, src.flat::<T>()?, &ranges, post, out.flat_mut::<f32>()?);
        }, [QUInt8, QInt8, QUInt16, QInt16, QInt32], return Err(unsupported(ctx, dtype)));
        if out_type == DataType::BFloat16 {
            let pool = ctx.thread_pool();
            let narrow = ctx.allocate_output(0, input.shape().clone())?;
            par_map(
                pool,
                out.flat::<f32>()?,
                narrow.flat_mut::<bf16>()?,
                2,
                bf16::from_f32,
            );
            Ok(())
        } else {
            ctx.set_output(0, out)
        }
    }
}

register_kernel!(
    KernelDefBuilder::new("Dequantize")
        .type_constraint_list(
            "T",
            &[
                DataType::QUInt8,
                DataType::QInt8,
                DataType::QUInt16,
                DataType::QInt16,
                DataType::QInt32,
            ],
        )
        .type_constraint_list("dtype", &[DataType::Float, DataType::BFloat16]),
    DequantizeOp
);
