//! The FakeQuant family's CPU kernels (TensorFlow's `fake_quant_ops.cc`):
//! `FakeQuantWithMinMaxArgs`, `FakeQuantWithMinMaxVars` and
//! `FakeQuantWithMinMaxVarsPerChannel`, their `*Gradient` ops, and the
//! gradients `array_ops.py` registers for the three forward ops (the
//! `*Gradient` ops, which are themselves not differentiable, as in
//! `array_grad.py`).
//!
//! Every op quantizes with one [`Nudged`] range per tensor or channel:
//! TensorFlow's `Nudge`, which moves `[min, max]` so that 0.0 falls on the
//! integer grid `[quant_min, quant_max]`, in TensorFlow's float arithmetic
//! (so outputs match bit for bit).

use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::{GradientContext, Ops, SymArg};
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::param::Parameter;
use opforge_core::{
    ensure, register_gradient, register_kernel, register_not_differentiable, Result, Status,
    Tensor, TensorShape,
};
use opforge_ops_base::args::{fmt_float, fmt_shape};
use opforge_ops_base::cpu::par::{chunks_in_shards, elementwise_shards, par_map, par_zip};
use opforge_ops_base::grad::set_input_grads;

/// The attrs of the FakeQuant ops whose range is an input
/// (`FakeQuantWithMinMaxVars`, `FakeQuantWithMinMaxVarsPerChannel` and
/// their gradient ops): their OpDefs' attrs and what their kernels read.
#[derive(Parameter, Clone, Copy, Debug)]
pub(super) struct GridParams {
    /// The bit width of the quantization: values are rounded to
    /// `2^num_bits` levels.
    #[param(default = 8, lower_bound = 2, upper_bound = 16)]
    num_bits: i32,
    /// Whether the lowest level is left out (levels `[1, 2^num_bits - 1]`).
    #[param(default = false)]
    narrow_range: bool,
}

/// The attrs of `FakeQuantWithMinMaxArgs` and its gradient op: the range
/// and the grid.
#[derive(Parameter, Clone, Copy, Debug)]
pub(super) struct ArgsParams {
    /// The low end of the range (nudged so that 0.0 is on the grid).
    #[param(default = -6.0)]
    min: f32,
    /// The high end of the range.
    #[param(default = 6.0)]
    max: f32,
    /// `num_bits` and `narrow_range`.
    #[param(flatten)]
    grid: GridParams,
}

/// The integer grid of a FakeQuant op: `[quant_min, quant_max]`, from its
/// `num_bits` and `narrow_range` attrs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Grid {
    quant_min: i32,
    quant_max: i32,
}

impl Grid {
    /// The grid of `num_bits` (in `[2, 16]`, which the parameter structs
    /// check) and `narrow_range`.
    fn new(num_bits: i32, narrow_range: bool) -> Grid {
        Grid {
            quant_min: i32::from(narrow_range),
            quant_max: (1 << num_bits.clamp(2, 16)) - 1,
        }
    }
}

/// A range nudged onto a [`Grid`] (TensorFlow's `Nudge`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Nudged {
    min: f32,
    max: f32,
    scale: f32,
    /// `quant_min - zero_point`: the level of the nudged min.
    min_level: f32,
    /// `(quant_max - quant_min) / (max - min)`: the inverse scale
    /// `FakeQuantWithMinMaxArgs` multiplies by.
    inv_scale: f32,
    /// Whether the range is `[0, 0]`, whose every output TensorFlow 2.21
    /// makes 0 (the zero point `0 / 0` is undefined).
    zeros: bool,
}

impl Nudged {
    /// Nudges `[min, max]` so that 0.0 is exactly representable, as
    /// TensorFlow does: the zero point is `quant_min - min / scale`
    /// rounded (half away from zero) into `[quant_min, quant_max]`.
    pub(super) fn new(min: f32, max: f32, grid: Grid) -> Nudged {
        let (qmin, qmax) = (grid.quant_min as f32, grid.quant_max as f32);
        let scale = (max - min) / (qmax - qmin);
        let zero_point_from_min = qmin - min / scale;
        let zero_point = if zero_point_from_min < qmin {
            qmin
        } else if zero_point_from_min > qmax {
            qmax
        } else {
            zero_point_from_min.round()
        };
        if zero_point.is_nan() && scale == 0.0 {
            return Nudged {
                min: 0.0,
                max: 0.0,
                scale,
                min_level: 0.0,
                inv_scale: 0.0,
                zeros: true,
            };
        }
        Nudged {
            min: (qmin - zero_point) * scale,
            max: (qmax - zero_point) * scale,
            scale,
            min_level: qmin - zero_point,
            inv_scale: (qmax - qmin) / (max - min),
            zeros: false,
        }
    }

    /// `x` clamped to the nudged range, less the nudged min.
    #[inline(always)]
    fn shifted(&self, x: f32) -> f32 {
        let clamped = if self.max < x { self.max } else { x };
        let clamped = if clamped < self.min {
            self.min
        } else {
            clamped
        };
        clamped - self.min
    }

    /// `FakeQuantWithMinMaxVars`' rounding: the level `x` rounds to
    /// (dividing by the scale), times the scale. TensorFlow 2.21 scales
    /// the level relative to the zero point (`(level - zero_point) *
    /// scale`), not `level * scale + nudged_min`, whose rounding differs.
    #[inline(always)]
    fn quantize(&self, x: f32) -> f32 {
        if self.zeros {
            return 0.0;
        }
        ((self.shifted(x) / self.scale + 0.5).floor() + self.min_level) * self.scale
    }

    /// `FakeQuantWithMinMaxArgs`' rounding: as [`Self::quantize`],
    /// multiplying by the inverse scale instead of dividing by the scale.
    #[inline(always)]
    fn quantize_inv(&self, x: f32) -> f32 {
        ((self.shifted(x) * self.inv_scale + 0.5).floor() + self.min_level) * self.scale
    }

    /// 1.0 where `x` is in the nudged range, else 0.0 (the gradient mask;
    /// multiplied in, so an infinite or NaN gradient gives NaN as in
    /// TensorFlow).
    #[inline(always)]
    fn inside(&self, x: f32) -> f32 {
        if x >= self.min && x <= self.max {
            1.0
        } else {
            0.0
        }
    }

    /// 1.0 where `x` is below the nudged range.
    #[inline(always)]
    fn below(&self, x: f32) -> f32 {
        if x < self.min {
            1.0
        } else {
            0.0
        }
    }

    /// 1.0 where `x` is above the nudged range.
    #[inline(always)]
    fn above(&self, x: f32) -> f32 {
        if x > self.max {
            1.0
        } else {
            0.0
        }
    }
}

/// The value of a rank-0 range input (`` `min` must be rank 0 but is rank 1 ``).
fn scalar_range(t: &Tensor, name: &str) -> Result<f32> {
    ensure!(
        t.rank() == 0,
        InvalidArgument,
        "`{name}` must be rank 0 but is rank {}",
        t.rank()
    );
    t.scalar_value::<f32>()
}

/// The values of a per-channel range input: rank 1, `depth` values.
fn channel_ranges<'a>(t: &'a Tensor, name: &str, depth: i64) -> Result<&'a [f32]> {
    ensure!(
        t.rank() == 1,
        InvalidArgument,
        "`{name}` must be rank 1 but is rank {}",
        t.rank()
    );
    ensure!(
        t.dims()[0] == depth,
        InvalidArgument,
        "{name} has incorrect size, expected {depth} was {}",
        t.dims()[0]
    );
    t.flat::<f32>()
}

/// The last dimension of a per-channel op's `inputs` (which TensorFlow reads
/// without checking the rank; a scalar is rejected here).
fn depth_of(input: &Tensor, op: &str) -> Result<i64> {
    input.dims().last().copied().ok_or_else(|| {
        Status::invalid_argument(format!(
            "{op}: `inputs` must be at least rank 1 but is rank 0"
        ))
    })
}

/// Checks that `gradients` and `inputs` have the same shape.
fn same_size(gradient: &Tensor, input: &Tensor) -> Result<()> {
    ensure!(
        gradient.shape() == input.shape(),
        InvalidArgument,
        "gradient and input must be the same size"
    );
    Ok(())
}

/// The nudged range of each channel.
fn nudge_channels(min: &[f32], max: &[f32], grid: Grid) -> Vec<Nudged> {
    min.iter()
        .zip(max)
        .map(|(&lo, &hi)| Nudged::new(lo, hi, grid))
        .collect()
}

/// Fills `out` with `f(range, x)` over the channels-last `x`, `range`
/// being the nudged range of the element's channel (one range: the whole
/// tensor's), in parallel.
fn map_channels(
    pool: &ThreadPool,
    nudged: &[Nudged],
    x: &[f32],
    out: &mut [f32],
    f: impl Fn(&Nudged, f32) -> f32 + Sync + Copy,
) {
    if let [n] = nudged {
        return par_map(pool, x, out, 4, |v| f(n, v));
    }
    let depth = nudged.len().max(1);
    let shards = elementwise_shards(pool, out.len(), 4);
    chunks_in_shards(pool, out, depth, shards, &|off, o| {
        let x = &x[off..off + o.len()];
        for (row_o, row_x) in o.chunks_mut(depth).zip(x.chunks(depth)) {
            for ((o, &v), n) in row_o.iter_mut().zip(row_x).zip(nudged) {
                *o = f(n, v);
            }
        }
    });
}

/// The three outputs of a `*Vars*Gradient` op over channels-last
/// `gradients` (input 0) and `inputs` (input 1): the input backprop (the
/// gradient where the input is in range) and, per channel, the sums of the
/// gradient where the input is below and above the range (outputs of
/// shape `range_shape`).
fn backprop(
    ctx: &mut OpKernelContext<'_>,
    nudged: &[Nudged],
    range_shape: TensorShape,
) -> Result<()> {
    let (gradient, input) = (ctx.input(0).clone(), ctx.input(1).clone());
    let (g, x) = (gradient.flat::<f32>()?, input.flat::<f32>()?);
    let pool = ctx.thread_pool();
    let depth = nudged.len();
    let out = ctx.allocate_output(0, input.shape().clone())?;
    let out = out.flat_mut::<f32>()?;
    if let [n] = nudged {
        par_zip(pool, g, x, out, 2, |g, x| g * n.inside(x));
    } else {
        let shards = elementwise_shards(pool, out.len(), 2);
        chunks_in_shards(pool, out, depth.max(1), shards, &|off, o| {
            let (g, x) = (&g[off..off + o.len()], &x[off..off + o.len()]);
            for (i, o) in o.iter_mut().enumerate() {
                *o = g[i] * nudged[(off + i) % depth].inside(x[i]);
            }
        });
    }
    let (mut below, mut above) = (vec![0f32; depth], vec![0f32; depth]);
    if depth > 0 {
        for (row_g, row_x) in g.chunks(depth).zip(x.chunks(depth)) {
            for (c, n) in nudged.iter().enumerate() {
                below[c] += row_g[c] * n.below(row_x[c]);
                above[c] += row_g[c] * n.above(row_x[c]);
            }
        }
    }
    ctx.allocate_output(1, range_shape.clone())?
        .flat_mut::<f32>()?
        .copy_from_slice(&below);
    ctx.allocate_output(2, range_shape)?
        .flat_mut::<f32>()?
        .copy_from_slice(&above);
    Ok(())
}

// ---------------------------------------------------------------------------
// FakeQuantWithMinMaxArgs and its gradient op: the range is in attrs.
// ---------------------------------------------------------------------------

/// The nudged range of `FakeQuantWithMinMaxArgs` and its gradient op,
/// from the attrs (`min < max`), computed once at construction.
fn args_range(ctx: &OpKernelConstruction<'_>) -> Result<Nudged> {
    let p: ArgsParams = ctx.params()?;
    ensure!(
        p.min < p.max,
        InvalidArgument,
        "min has to be smaller than max, was: {} >= {}",
        fmt_float(f64::from(p.min), true),
        fmt_float(f64::from(p.max), true)
    );
    Ok(Nudged::new(
        p.min,
        p.max,
        Grid::new(p.grid.num_bits, p.grid.narrow_range),
    ))
}

/// `FakeQuantWithMinMaxArgs`.
struct FakeQuantArgs(Nudged);

impl CreateKernel for FakeQuantArgs {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        args_range(ctx).map(FakeQuantArgs)
    }
}

impl OpKernel for FakeQuantArgs {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, input.shape().clone())?;
        let n = self.0;
        par_map(pool, input.flat::<f32>()?, out.flat_mut::<f32>()?, 4, |x| {
            n.quantize_inv(x)
        });
        Ok(())
    }
}

/// `FakeQuantWithMinMaxArgsGradient`.
struct FakeQuantArgsGradient(Nudged);

impl CreateKernel for FakeQuantArgsGradient {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        args_range(ctx).map(FakeQuantArgsGradient)
    }
}

impl OpKernel for FakeQuantArgsGradient {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (gradient, input) = (ctx.input(0).clone(), ctx.input(1).clone());
        // TensorFlow's `BinaryElementWiseOp` check.
        ensure!(
            gradient.shape() == input.shape(),
            InvalidArgument,
            "Inputs to operation {} of type {} must have the same size and shape.  Input 0: {} != input 1: {}",
            ctx.node_name(),
            ctx.op_def().name,
            fmt_shape(gradient.dims()),
            fmt_shape(input.dims())
        );
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, input.shape().clone())?;
        let n = self.0;
        par_zip(
            pool,
            gradient.flat::<f32>()?,
            input.flat::<f32>()?,
            out.flat_mut::<f32>()?,
            2,
            |g, x| g * n.inside(x),
        );
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("FakeQuantWithMinMaxArgs"),
    FakeQuantArgs
);
register_kernel!(
    KernelDefBuilder::new("FakeQuantWithMinMaxArgsGradient"),
    FakeQuantArgsGradient
);

// ---------------------------------------------------------------------------
// FakeQuantWithMinMaxVars and FakeQuantWithMinMaxVarsPerChannel, and their
// gradient ops: the ranges are inputs.
// ---------------------------------------------------------------------------

/// The kernels whose range is an input: `FakeQuantWithMinMaxVars`,
/// `FakeQuantWithMinMaxVarsPerChannel` and their gradient ops.
struct FakeQuantVarsOp {
    grid: Grid,
    per_channel: bool,
    gradient: bool,
}

impl FakeQuantVarsOp {
    fn create(ctx: &OpKernelConstruction<'_>, per_channel: bool, gradient: bool) -> Result<Self> {
        let p: GridParams = ctx.params()?;
        Ok(FakeQuantVarsOp {
            grid: Grid::new(p.num_bits, p.narrow_range),
            per_channel,
            gradient,
        })
    }

    /// The nudged range of each channel (one for the whole tensor), from
    /// the range inputs `first` and `first + 1`, and the shape of the
    /// gradient op's range outputs.
    fn ranges(
        &self,
        ctx: &OpKernelContext<'_>,
        first: usize,
    ) -> Result<(Vec<Nudged>, TensorShape)> {
        let (input, min, max) = (ctx.input(first - 1), ctx.input(first), ctx.input(first + 1));
        if self.per_channel {
            let depth = depth_of(input, &ctx.op_def().name)?;
            let min = channel_ranges(min, "min", depth)?;
            let max = channel_ranges(max, "max", depth)?;
            Ok((
                nudge_channels(min, max, self.grid),
                TensorShape::new(&[depth])?,
            ))
        } else {
            let min = scalar_range(min, "min")?;
            let max = scalar_range(max, "max")?;
            Ok((
                vec![Nudged::new(min, max, self.grid)],
                TensorShape::scalar(),
            ))
        }
    }
}

impl OpKernel for FakeQuantVarsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        if self.gradient {
            same_size(ctx.input(0), ctx.input(1))?;
            let (nudged, range_shape) = self.ranges(ctx, 2)?;
            return backprop(ctx, &nudged, range_shape);
        }
        let (nudged, _) = self.ranges(ctx, 1)?;
        let input = ctx.input(0).clone();
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, input.shape().clone())?;
        let (x, out) = (input.flat::<f32>()?, out.flat_mut::<f32>()?);
        map_channels(pool, &nudged, x, out, Nudged::quantize);
        Ok(())
    }
}

/// Registers one of the `*Vars*` kernels.
macro_rules! vars_kernel {
    ($op:literal, $per_channel:expr, $gradient:expr) => {
        register_kernel!(
            KernelDefBuilder::new($op),
            fn = |ctx| Ok(Box::new(FakeQuantVarsOp::create(ctx, $per_channel, $gradient)?))
        );
    };
}

vars_kernel!("FakeQuantWithMinMaxVars", false, false);
vars_kernel!("FakeQuantWithMinMaxVarsGradient", false, true);
vars_kernel!("FakeQuantWithMinMaxVarsPerChannel", true, false);
vars_kernel!("FakeQuantWithMinMaxVarsPerChannelGradient", true, true);

// ---------------------------------------------------------------------------
// Gradients (array_ops.py): each forward op's gradient is its `*Gradient`
// op; the `*Gradient` ops are not differentiable (array_grad.py).
// ---------------------------------------------------------------------------

/// The gradient of a FakeQuant op: its `*Gradient` op on the incoming
/// gradient and the op's inputs, with the op's quantization attrs.
fn fake_quant_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let grad = ctx.grad()?;
    let mut attrs = AttrMap::new();
    // The attrs of `ArgsParams` (the range and `GridParams`'), those the
    // op has.
    for field in ArgsParams::fields() {
        let name = field.name;
        if let Some(v) = ctx.attrs().get(name) {
            attrs.insert(name.to_string(), v.clone());
        }
    }
    let args: Vec<SymArg> = std::iter::once(grad)
        .chain(ctx.inputs().iter().copied())
        .map(SymArg::One)
        .collect();
    let outs = ctx.call(&format!("{}Gradient", ctx.op_name()), &args, &attrs)?;
    set_input_grads(ctx, outs)
}

register_gradient!("FakeQuantWithMinMaxArgs", fake_quant_grad);
register_gradient!("FakeQuantWithMinMaxVars", fake_quant_grad);
register_gradient!("FakeQuantWithMinMaxVarsPerChannel", fake_quant_grad);
register_not_differentiable!(
    "FakeQuantWithMinMaxArgsGradient",
    "FakeQuantWithMinMaxVarsGradient",
    "FakeQuantWithMinMaxVarsPerChannelGradient"
);
