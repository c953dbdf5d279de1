//! The activations of TensorFlow's `nn_ops` beyond the `Relu` family:
//! `Elu`, `Selu`, `Softplus`, `Softsign`, `LeakyRelu` and their `*Grad`
//! ops, with TensorFlow 2.x's OpDefs, the formulas of its Eigen functors
//! (`relu_op_functor.h`, `softplus_op.h`, `softsign_op.h`), kernels for
//! the float types it registers (`half`, `bfloat16`, `float`, `double`)
//! and the gradients of its `nn_grad.py`.
//!
//! Each element is computed in [`Act::C`]: `f32` for `half`, `bfloat16` and
//! `float`, `f64` for `double`, and rounded once to the element type. The
//! constants (`Selu`'s scale, `LeakyRelu`'s `alpha`) are first rounded to
//! the element type, as TensorFlow's `static_cast<T>` does.

use super::defs::merge_both_inputs_shape;
use super::relu_family::same_size;
use super::*;
use half::{bf16, f16};
use opforge_ops_base::cpu::elem::COST_TRANSCENDENTAL;
use opforge_ops_base::float_types;
use opforge_ops_base::grad::attr_or;
use opforge_ops_base::types::FLOAT_TYPES;
use std::ops::{Add, Div, Mul, Neg, Sub};

// ---- OpDefs (TensorFlow's nn_ops.cc) ----

/// An activation `features -> activations` of the float types.
fn unary_def(name: &str, doc: &'static str) -> OpDefBuilder {
    OpDefBuilder::new(name)
        .input("features: T")
        .output("activations: T")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}}"))
        .set_shape_fn(common::unchanged_shape)
        .doc(doc)
}

/// An activation's gradient `(gradients, <second>) -> backprops`.
fn grad_def(name: &str, second: &str, doc: &'static str) -> OpDefBuilder {
    OpDefBuilder::new(name)
        .input("gradients: T")
        .input(format!("{second}: T"))
        .output("backprops: T")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}}"))
        .set_shape_fn(merge_both_inputs_shape)
        .doc(doc)
}

/// `Elu`.
pub fn elu() -> OpDefBuilder {
    unary_def(
        "Elu",
        "Computes the exponential linear function.\n\n\
         `activations = expm1(features)` where `features < 0`, `features` elsewhere.\n\n\
         See [Fast and Accurate Deep Network Learning by Exponential Linear Units (ELUs)\n\
         ](http://arxiv.org/abs/1511.07289)",
    )
}

/// `EluGrad`.
pub fn elu_grad() -> OpDefBuilder {
    grad_def(
        "EluGrad",
        "outputs",
        "Computes gradients for the exponential linear (Elu) operation.\n\n\
         `backprops = gradients * (outputs + 1)` where `outputs < 0`, `gradients`\n\
         elsewhere.\n\n\
         gradients: The backpropagated gradients to the corresponding Elu operation.\n\
         outputs: The outputs of the corresponding Elu operation.",
    )
}

/// `Selu`.
pub fn selu() -> OpDefBuilder {
    unary_def(
        "Selu",
        "Computes scaled exponential linear: `scale * alpha * (exp(features) - 1)`\n\
         if < 0, `scale * features` otherwise.\n\n\
         To be used together with\n\
         `initializer = tf.variance_scaling_initializer(factor=1.0, mode='FAN_IN')`.\n\
         For correct dropout, use `tf.contrib.nn.alpha_dropout`.\n\n\
         See [Self-Normalizing Neural Networks](https://arxiv.org/abs/1706.02515)",
    )
}

/// `SeluGrad`.
pub fn selu_grad() -> OpDefBuilder {
    grad_def(
        "SeluGrad",
        "outputs",
        "Computes gradients for the scaled exponential linear (Selu) operation.\n\n\
         `backprops = gradients * (outputs + scale * alpha)` where `outputs < 0`,\n\
         `scale * gradients` elsewhere.\n\n\
         gradients: The backpropagated gradients to the corresponding Selu operation.\n\
         outputs: The outputs of the corresponding Selu operation.",
    )
}

/// `Softplus`.
pub fn softplus() -> OpDefBuilder {
    unary_def(
        "Softplus",
        "Computes softplus: `log(exp(features) + 1)`.\n\n\
         Computed without overflow: `features` itself above `-log(epsilon) - 2`, and\n\
         `exp(features)` below `log(epsilon) + 2`.",
    )
}

/// `SoftplusGrad`.
pub fn softplus_grad() -> OpDefBuilder {
    grad_def(
        "SoftplusGrad",
        "features",
        "Computes softplus gradients for a softplus operation.\n\n\
         `backprops = gradients / (1 + exp(-features))`.\n\n\
         gradients: The backpropagated gradients to the corresponding softplus operation.\n\
         features: The features passed as input to the corresponding softplus operation.",
    )
}

/// `Softsign`.
pub fn softsign() -> OpDefBuilder {
    unary_def(
        "Softsign",
        "Computes softsign: `features / (abs(features) + 1)`.",
    )
}

/// `SoftsignGrad`.
pub fn softsign_grad() -> OpDefBuilder {
    grad_def(
        "SoftsignGrad",
        "features",
        "Computes softsign gradients for a softsign operation.\n\n\
         `backprops = gradients / (1 + abs(features)) ** 2`.\n\n\
         gradients: The backpropagated gradients to the corresponding softsign operation.\n\
         features: The features passed as input to the corresponding softsign operation.",
    )
}

/// `LeakyRelu`.
pub fn leaky_relu() -> OpDefBuilder {
    OpDefBuilder::new("LeakyRelu")
        .input("features: T")
        .output("activations: T")
        .attr("alpha: float = 0.2")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}} = DT_FLOAT"))
        .set_shape_fn(common::unchanged_shape)
        .doc(
            "Computes rectified linear with a leak: `features` where `features > 0`,\n\
             `alpha * features` elsewhere.",
        )
}

/// `LeakyReluGrad`.
pub fn leaky_relu_grad() -> OpDefBuilder {
    OpDefBuilder::new("LeakyReluGrad")
        .input("gradients: T")
        .input("features: T")
        .output("backprops: T")
        .attr("alpha: float = 0.2")
        .attr(format!("T: {{{NN_FLOAT_SPEC}}} = DT_FLOAT"))
        .set_shape_fn(merge_both_inputs_shape)
        .doc(
            "Computes rectified linear gradients for a LeakyRelu operation.\n\n\
             `backprops = gradients` where `features > 0`, `alpha * gradients` elsewhere.\n\n\
             gradients: The backpropagated gradients to the corresponding LeakyRelu operation.\n\
             features: The features passed as input to the corresponding LeakyRelu operation,\n\
             OR the outputs of that operation (both work equivalently).",
        )
}

register_op!(elu());
register_op!(elu_grad());
register_op!(selu());
register_op!(selu_grad());
register_op!(softplus());
register_op!(softplus_grad());
register_op!(softsign());
register_op!(softsign_grad());
register_op!(leaky_relu());
register_op!(leaky_relu_grad());

// ---- Element math ----

/// The type an activation computes in: `f32` or `f64`.
pub(super) trait Calc:
    Copy
    + PartialOrd
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// `e^self - 1`, accurate near 0.
    fn exp_m1(self) -> Self;
    /// `ln(1 + self)`, accurate near 0.
    fn ln_1p(self) -> Self;
    /// `|self|`.
    fn abs(self) -> Self;
}

macro_rules! calc_impls {
    ($($t:ty),*) => {$(
        impl Calc for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn exp(self) -> Self { <$t>::exp(self) }
            #[inline(always)]
            fn exp_m1(self) -> Self { <$t>::exp_m1(self) }
            #[inline(always)]
            fn ln_1p(self) -> Self { <$t>::ln_1p(self) }
            #[inline(always)]
            fn abs(self) -> Self { <$t>::abs(self) }
        }
    )*};
}
calc_impls!(f32, f64);

/// An element type of the activations: its compute type and its machine
/// epsilon (Eigen's `NumTraits<T>::epsilon()`, which places `Softplus`'s
/// thresholds).
pub(super) trait Act: RealFloat {
    /// The compute type.
    type C: Calc;
    /// The distance from 1 to the next value of the element type.
    const EPSILON: f64;
    /// The value in the compute type (exact).
    fn up(self) -> Self::C;
    /// A computed value rounded to the element type.
    fn down(c: Self::C) -> Self;
    /// `v` rounded to the element type (TensorFlow's `static_cast<T>`), in
    /// the compute type.
    #[inline(always)]
    fn konst(v: f64) -> Self::C {
        <Self as Float>::from_f64(v).up()
    }
}

impl Act for f32 {
    type C = f32;
    const EPSILON: f64 = f32::EPSILON as f64;
    #[inline(always)]
    fn up(self) -> f32 {
        self
    }
    #[inline(always)]
    fn down(c: f32) -> f32 {
        c
    }
}

impl Act for f64 {
    type C = f64;
    const EPSILON: f64 = f64::EPSILON;
    #[inline(always)]
    fn up(self) -> f64 {
        self
    }
    #[inline(always)]
    fn down(c: f64) -> f64 {
        c
    }
}

macro_rules! half_act {
    ($($t:ty),*) => {$(
        impl Act for $t {
            type C = f32;
            const EPSILON: f64 = <$t>::EPSILON.to_f64_const();
            #[inline(always)]
            fn up(self) -> f32 { self.to_f32() }
            #[inline(always)]
            fn down(c: f32) -> Self { <$t>::from_f32(c) }
        }
    )*};
}
half_act!(f16, bf16);

/// `Selu`'s scale (TensorFlow's constant).
pub(super) const SELU_SCALE: f64 = 1.050_700_987_355_480_5;
/// `Selu`'s `scale * alpha` (TensorFlow's constant).
pub(super) const SELU_SCALE_ALPHA: f64 = 1.758_099_340_847_376_9;

/// `x < 0 ? expm1(x) : x`.
#[inline(always)]
fn elu_of<C: Calc>(x: C) -> C {
    if x < C::ZERO {
        x.exp_m1()
    } else {
        x
    }
}

/// `y < 0 ? g * (y + 1) : g`.
#[inline(always)]
fn elu_grad_of<C: Calc>(g: C, y: C) -> C {
    if y < C::ZERO {
        (y + C::ONE) * g
    } else {
        g
    }
}

/// `x < 0 ? scale_alpha * expm1(x) : scale * x`.
#[inline(always)]
fn selu_of<C: Calc>(x: C, scale: C, scale_alpha: C) -> C {
    if x < C::ZERO {
        scale_alpha * x.exp_m1()
    } else {
        scale * x
    }
}

/// `y < 0 ? g * (y + scale_alpha) : g * scale`.
#[inline(always)]
fn selu_grad_of<C: Calc>(g: C, y: C, scale: C, scale_alpha: C) -> C {
    if y < C::ZERO {
        g * (y + scale_alpha)
    } else {
        g * scale
    }
}

/// TensorFlow's stable softplus: `x` above `-threshold`, `exp(x)` below
/// `threshold`, `log1p(exp(x))` between (`threshold = log(epsilon) + 2`).
#[inline(always)]
fn softplus_of<C: Calc>(x: C, threshold: C) -> C {
    if x > -threshold {
        x
    } else if x < threshold {
        x.exp()
    } else {
        x.exp().ln_1p()
    }
}

/// `g / (exp(-x) + 1)`, i.e. `g * sigmoid(x)`.
#[inline(always)]
fn softplus_grad_of<C: Calc>(g: C, x: C) -> C {
    g / ((-x).exp() + C::ONE)
}

/// `x / (|x| + 1)`.
#[inline(always)]
fn softsign_of<C: Calc>(x: C) -> C {
    x / (x.abs() + C::ONE)
}

/// `g / (|x| + 1)^2`.
#[inline(always)]
fn softsign_grad_of<C: Calc>(g: C, x: C) -> C {
    let d = x.abs() + C::ONE;
    g / (d * d)
}

/// `x > 0 ? x : x * alpha`.
#[inline(always)]
fn leaky_relu_of<C: Calc>(x: C, alpha: C) -> C {
    if x > C::ZERO {
        x
    } else {
        x * alpha
    }
}

/// `x > 0 ? g : g * alpha`.
#[inline(always)]
fn leaky_relu_grad_of<C: Calc>(g: C, x: C, alpha: C) -> C {
    if x > C::ZERO {
        g
    } else {
        g * alpha
    }
}

// ---- Kernels ----

/// The activation ops with kernels here.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum ActOp {
    Elu,
    EluGrad,
    Selu,
    SeluGrad,
    Softplus,
    SoftplusGrad,
    Softsign,
    SoftsignGrad,
    LeakyRelu,
    LeakyReluGrad,
}

/// An activation kernel (`alpha` is `LeakyRelu`'s, read at construction).
struct ActKernel {
    op: ActOp,
    alpha: f32,
}

impl ActKernel {
    fn create(op: ActOp, ctx: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
        let alpha = match op {
            ActOp::LeakyRelu | ActOp::LeakyReluGrad => ctx.get_attr::<f32>("alpha")?,
            _ => 0.0,
        };
        Ok(Box::new(ActKernel { op, alpha }))
    }
}

fn act_compute<T: Act>(op: ActOp, alpha: f32, ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let cost = COST_TRANSCENDENTAL;
    let (scale, scale_alpha) = (T::konst(SELU_SCALE), T::konst(SELU_SCALE_ALPHA));
    let alpha = T::konst(alpha as f64);
    match op {
        ActOp::Elu => unary_same::<T>(ctx, cost, |x| T::down(elu_of(x.up()))),
        ActOp::Selu => unary_same::<T>(ctx, cost, move |x| {
            T::down(selu_of(x.up(), scale, scale_alpha))
        }),
        ActOp::Softplus => {
            let threshold = T::konst(T::EPSILON.ln() + 2.0);
            unary_same::<T>(ctx, cost, move |x| T::down(softplus_of(x.up(), threshold)))
        }
        ActOp::Softsign => unary_same::<T>(ctx, cost, |x| T::down(softsign_of(x.up()))),
        ActOp::LeakyRelu => unary_same::<T>(ctx, CHEAP_COST, move |x| {
            T::down(leaky_relu_of(x.up(), alpha))
        }),
        ActOp::EluGrad => {
            same_size(ctx, "outputs")?;
            binary_same::<T>(ctx, CHEAP_COST, |g, y| T::down(elu_grad_of(g.up(), y.up())))
        }
        ActOp::SeluGrad => {
            same_size(ctx, "outputs")?;
            binary_same::<T>(ctx, CHEAP_COST, move |g, y| {
                T::down(selu_grad_of(g.up(), y.up(), scale, scale_alpha))
            })
        }
        ActOp::SoftplusGrad => {
            same_size(ctx, "features")?;
            binary_same::<T>(ctx, cost, |g, x| T::down(softplus_grad_of(g.up(), x.up())))
        }
        ActOp::SoftsignGrad => {
            same_size(ctx, "features")?;
            binary_same::<T>(ctx, cost, |g, x| T::down(softsign_grad_of(g.up(), x.up())))
        }
        ActOp::LeakyReluGrad => {
            same_size(ctx, "features")?;
            binary_same::<T>(ctx, CHEAP_COST, move |g, x| {
                T::down(leaky_relu_grad_of(g.up(), x.up(), alpha))
            })
        }
    }
}

impl OpKernel for ActKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        let (op, alpha) = (self.op, self.alpha);
        float_types!(dt, T => act_compute::<T>(op, alpha, ctx),
            Err(Status::unimplemented(format!("{} has no CPU kernel for {dt}", ctx.op_def().name))))
    }
}

macro_rules! register_activations {
    ($($name:literal => $op:ident),* $(,)?) => {$(
        register_kernel!(
            KernelDefBuilder::new($name).type_constraint_list("T", FLOAT_TYPES),
            fn = |ctx| ActKernel::create(ActOp::$op, ctx)
        );
    )*};
}

register_activations!(
    "Elu" => Elu,
    "EluGrad" => EluGrad,
    "Selu" => Selu,
    "SeluGrad" => SeluGrad,
    "Softplus" => Softplus,
    "SoftplusGrad" => SoftplusGrad,
    "Softsign" => Softsign,
    "SoftsignGrad" => SoftsignGrad,
    "LeakyRelu" => LeakyRelu,
    "LeakyReluGrad" => LeakyReluGrad,
);

// ---- Gradients (TensorFlow's nn_grad.py) ----

/// The attrs of a call of `grad_op`: `LeakyRelu`'s `alpha` for
/// `LeakyReluGrad`, none for the others.
fn grad_op_attrs(
    ctx: &GradientContext<'_>,
    grad_op: &str,
) -> Result<Vec<(&'static str, opforge_core::proto::AttrValue)>> {
    if grad_op != "LeakyReluGrad" {
        return Ok(Vec::new());
    }
    let alpha: f32 = attr_or(ctx, "alpha", 0.2f32)?;
    Ok(vec![("alpha", alpha.into_attr_value())])
}

/// `<grad op>(dy, y)` (`Relu`, `Relu6`, `Elu`, `Selu`) or `(dy, x)`
/// (`Softplus`, `Softsign`, `LeakyRelu`).
pub(super) fn activation_grad(
    grad_op: &'static str,
    of_output: bool,
) -> impl Fn(&mut GradientContext<'_>) -> Result<()> + Send + Sync + 'static {
    move |ctx: &mut GradientContext<'_>| {
        let g = ctx.grad()?;
        let second = if of_output {
            ctx.output(0)
        } else {
            ctx.input(0)
        };
        let attrs = grad_op_attrs(ctx, grad_op)?;
        let dx = ctx.op1(grad_op, &[g, second], &attrs)?;
        ctx.set_input_grad(0, dx)
    }
}

/// TensorFlow's `_EluGradGrad` and `_SeluGradGrad`: `<grad op>(grad, y)`
/// for the gradients, `where(y < 0, grad * dy, 0)` for the outputs.
fn exp_linear_grad_grad(
    grad_op: &'static str,
) -> impl Fn(&mut GradientContext<'_>) -> Result<()> + Send + Sync + 'static {
    move |ctx: &mut GradientContext<'_>| {
        let (g, dy, y) = (ctx.grad()?, ctx.input(0), ctx.input(1));
        let ddy = ctx.op1(grad_op, &[g, y], &[])?;
        let dtype = ctx.dtype(y);
        let zero = ctx.scalar(dtype, 0.0)?;
        let negative = ctx.op1("Less", &[y, zero], &[])?;
        let g_dy = ctx.mul(g, dy)?;
        let zeros = ctx.zeros_like(y)?;
        let dy_out = ctx.op1("SelectV2", &[negative, g_dy, zeros], &[])?;
        ctx.set_input_grad(0, ddy)?;
        ctx.set_input_grad(1, dy_out)
    }
}

/// TensorFlow's `_SoftplusGradGrad`: `SoftplusGrad(grad, x)` for the
/// gradients, `grad * dy / (exp(-x) + 2 + exp(x))` for the features.
fn softplus_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, dy, x) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let ddy = ctx.op1("SoftplusGrad", &[g, x], &[])?;
    let neg_x = ctx.neg(x)?;
    let exp_neg = ctx.op1("Exp", &[neg_x], &[])?;
    let exp_pos = ctx.op1("Exp", &[x], &[])?;
    let dtype = ctx.dtype(x);
    let two = ctx.scalar(dtype, 2.0)?;
    let denom = ctx.add(exp_neg, two)?;
    let denom = ctx.add(denom, exp_pos)?;
    let num = ctx.mul(g, dy)?;
    let d2x = ctx.div(num, denom)?;
    ctx.set_input_grad(0, ddy)?;
    ctx.set_input_grad(1, d2x)
}

/// TensorFlow's `_ReluGradGrad`, `_Relu6GradGrad` and `_LeakyReluGradGrad`:
/// `<grad op>(grad, features)` (with `LeakyRelu`'s `alpha`) for the
/// gradients, zeros for the features.
pub(super) fn piecewise_linear_grad_grad(
    grad_op: &'static str,
) -> impl Fn(&mut GradientContext<'_>) -> Result<()> + Send + Sync + 'static {
    move |ctx: &mut GradientContext<'_>| {
        let (g, x) = (ctx.grad()?, ctx.input(1));
        let attrs = grad_op_attrs(ctx, grad_op)?;
        let gg = ctx.op1(grad_op, &[g, x], &attrs)?;
        let zeros = ctx.zeros_like(x)?;
        ctx.set_input_grad(0, gg)?;
        ctx.set_input_grad(1, zeros)
    }
}

register_gradient!("Elu", activation_grad("EluGrad", true));
register_gradient!("Selu", activation_grad("SeluGrad", true));
register_gradient!("Softplus", activation_grad("SoftplusGrad", false));
register_gradient!("Softsign", activation_grad("SoftsignGrad", false));
register_gradient!("LeakyRelu", activation_grad("LeakyReluGrad", false));
register_gradient!("EluGrad", exp_linear_grad_grad("EluGrad"));
register_gradient!("SeluGrad", exp_linear_grad_grad("SeluGrad"));
register_gradient!("SoftplusGrad", softplus_grad_grad);
register_gradient!("LeakyReluGrad", piecewise_linear_grad_grad("LeakyReluGrad"));
