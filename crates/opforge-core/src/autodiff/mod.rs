//! Automatic differentiation. Gradient functions are written once against
//! [`Ops`], an op-calling interface whose values are opaque [`Sym`] handles;
//! a graph builder ([`gradients`]) and the eager [`GradientTape`] both
//! implement it, so the same gradient code builds gradient subgraphs and
//! computes gradients eagerly. Gradient computations are themselves ops, so
//! higher-order gradients work wherever the gradient functions are
//! differentiable.

mod backprop;
mod checker;
mod graph_grad;
mod tape;

pub use backprop::{backprop, Record};
pub use checker::{compute_gradient, compute_gradient_error, Jacobians};
pub use graph_grad::{gradients, GraphOps};
pub use tape::GradientTape;

use crate::attrs::{AttrMap, IntoAttrValue};
use crate::{DataType, Result, Status, Tensor};
use std::collections::HashMap;
use std::sync::{OnceLock, PoisonError, RwLock};

/// A value inside an [`Ops`] implementation: a graph output or an eager tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

/// An input argument of a call: one value or a list.
#[derive(Clone, Debug, PartialEq)]
pub enum SymArg {
    /// A single tensor.
    One(Sym),
    /// A list of tensors.
    List(Vec<Sym>),
}

/// The op-calling interface gradient functions use.
pub trait Ops {
    /// Calls `op` on `inputs` with `attrs`; its outputs.
    fn call(&mut self, op: &str, inputs: &[SymArg], attrs: &AttrMap) -> Result<Vec<Sym>>;
    /// The dtype of a value.
    fn dtype(&self, s: Sym) -> DataType;
    /// What is known of a value's shape (`None` = unknown rank, `-1` = unknown dim).
    fn shape(&self, s: Sym) -> Option<Vec<i64>>;
    /// A constant.
    fn constant(&mut self, t: Tensor) -> Result<Sym>;
}

/// Convenience calls on any [`Ops`].
pub trait OpsExt: Ops {
    /// Calls an op with single-tensor inputs and returns its only output.
    fn op1(
        &mut self,
        op: &str,
        inputs: &[Sym],
        attrs: &[(&str, crate::proto::AttrValue)],
    ) -> Result<Sym> {
        let args: Vec<SymArg> = inputs.iter().map(|&s| SymArg::One(s)).collect();
        let attrs: AttrMap = attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let mut outs = self.call(op, &args, &attrs)?;
        match outs.len() {
            1 => Ok(outs.pop().expect("one output")),
            n => Err(Status::internal(format!("{op} has {n} outputs, not 1"))),
        }
    }
    /// `a + b` (broadcasting).
    fn add(&mut self, a: Sym, b: Sym) -> Result<Sym> {
        self.op1("AddV2", &[a, b], &[])
    }
    /// `a - b`.
    fn sub(&mut self, a: Sym, b: Sym) -> Result<Sym> {
        self.op1("Sub", &[a, b], &[])
    }
    /// `a * b`.
    fn mul(&mut self, a: Sym, b: Sym) -> Result<Sym> {
        self.op1("Mul", &[a, b], &[])
    }
    /// `a / b`.
    fn div(&mut self, a: Sym, b: Sym) -> Result<Sym> {
        self.op1("RealDiv", &[a, b], &[])
    }
    /// `-a`.
    fn neg(&mut self, a: Sym) -> Result<Sym> {
        self.op1("Neg", &[a], &[])
    }
    /// The sum of several values of one shape.
    fn add_n(&mut self, xs: &[Sym]) -> Result<Sym> {
        match xs {
            [one] => Ok(*one),
            _ => {
                let mut outs = self.call("AddN", &[SymArg::List(xs.to_vec())], &AttrMap::new())?;
                outs.pop()
                    .ok_or_else(|| Status::internal("AddN has no output"))
            }
        }
    }
    /// A scalar constant of `dtype` with value `v`.
    fn scalar(&mut self, dtype: DataType, v: f64) -> Result<Sym> {
        let t = crate::dispatch!(dtype, T => Tensor::scalar(num_cast::<T>(v)), [Float, Double, Half, BFloat16, Int32, Int64],
            return Err(Status::unimplemented(format!("a {dtype} scalar constant"))));
        self.constant(t)
    }
    /// `zeros_like(x)`.
    fn zeros_like(&mut self, x: Sym) -> Result<Sym> {
        self.op1("ZerosLike", &[x], &[])
    }
    /// `ones_like(x)`.
    fn ones_like(&mut self, x: Sym) -> Result<Sym> {
        self.op1("OnesLike", &[x], &[])
    }
    /// `shape(x)` as int32.
    fn shape_of(&mut self, x: Sym) -> Result<Sym> {
        self.op1(
            "Shape",
            &[x],
            &[("out_type", DataType::Int32.into_attr_value())],
        )
    }
    /// `reshape(x, shape)`.
    fn reshape(&mut self, x: Sym, shape: Sym) -> Result<Sym> {
        self.op1("Reshape", &[x, shape], &[])
    }
    /// An int32 vector constant.
    fn int_vector(&mut self, v: &[i32]) -> Result<Sym> {
        self.constant(Tensor::from_slice(&[v.len() as i64], v)?)
    }
}

impl<O: Ops + ?Sized> OpsExt for O {}

fn num_cast<T: crate::Element + num_traits_lite::FromF64>(v: f64) -> T {
    T::from_f64(v)
}

/// Minimal f64 → element conversions for constants in gradients.
mod num_traits_lite {
    /// Converts from f64.
    pub trait FromF64 {
        /// The value.
        fn from_f64(v: f64) -> Self;
    }
    impl FromF64 for f32 {
        fn from_f64(v: f64) -> Self {
            v as f32
        }
    }
    impl FromF64 for f64 {
        fn from_f64(v: f64) -> Self {
            v
        }
    }
    impl FromF64 for i32 {
        fn from_f64(v: f64) -> Self {
            v as i32
        }
    }
    impl FromF64 for i64 {
        fn from_f64(v: f64) -> Self {
            v as i64
        }
    }
    impl FromF64 for half::f16 {
        fn from_f64(v: f64) -> Self {
            half::f16::from_f64(v)
        }
    }
    impl FromF64 for half::bf16 {
        fn from_f64(v: f64) -> Self {
            half::bf16::from_f64(v)
        }
    }
}

/// The forward op a gradient function differentiates.
pub struct GradOp<'a> {
    /// The op's name.
    pub op: &'a str,
    /// The node's attrs.
    pub attrs: &'a AttrMap,
    /// The op's flat inputs.
    pub inputs: &'a [Sym],
    /// The op's flat outputs.
    pub outputs: &'a [Sym],
}

impl GradOp<'_> {
    /// Attr `name` as a `T`.
    pub fn attr<T: crate::attrs::FromAttrValue>(&self, name: &str) -> Result<T> {
        crate::attrs::get_attr(self.op, self.attrs, name)
    }
}

/// A gradient function: given the forward op and the gradients of its
/// outputs (`None` where no gradient flows), the gradients of its flat
/// inputs (`None` for inputs without one, such as integer indices).
pub type GradFn = fn(&mut dyn Ops, &GradOp<'_>, &[Option<Sym>]) -> Result<Vec<Option<Sym>>>;

/// What is registered for an op's differentiation.
#[derive(Clone, Copy)]
pub enum Gradient {
    /// A gradient function.
    Fn(GradFn),
    /// The op is not differentiable: no gradient flows through it.
    NotDifferentiable,
}

/// One static gradient registration (see [`register_gradient!`](crate::register_gradient)).
pub struct StaticGradient {
    op: &'static str,
    gradient: Gradient,
}

impl StaticGradient {
    /// A registration.
    pub const fn new(op: &'static str, gradient: Gradient) -> StaticGradient {
        StaticGradient { op, gradient }
    }
}

inventory::collect!(StaticGradient);

/// Registers a gradient function for an op: `register_gradient!("Tanh", tanh_grad);`
#[macro_export]
macro_rules! register_gradient {
    ($op:expr, $f:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::autodiff::StaticGradient::new($op, $crate::autodiff::Gradient::Fn($f))
        }
    };
}

/// Declares an op not differentiable (TensorFlow's `NotDifferentiable`).
#[macro_export]
macro_rules! register_not_differentiable {
    ($($op:expr),+ $(,)?) => {
        $(
            $crate::inventory::submit! {
                $crate::autodiff::StaticGradient::new($op, $crate::autodiff::Gradient::NotDifferentiable)
            }
        )+
    };
}

/// The gradients registered per op (static ones, plus run-time registrations).
pub struct GradientRegistry {
    map: RwLock<HashMap<String, Gradient>>,
}

impl GradientRegistry {
    /// The process-wide registry.
    pub fn global() -> &'static GradientRegistry {
        static G: OnceLock<GradientRegistry> = OnceLock::new();
        G.get_or_init(|| {
            let map = inventory::iter::<StaticGradient>()
                .map(|s| (s.op.to_string(), s.gradient))
                .collect();
            GradientRegistry {
                map: RwLock::new(map),
            }
        })
    }

    /// Registers (or replaces) the gradient of `op`.
    pub fn register(&self, op: &str, gradient: Gradient) {
        self.map
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(op.to_string(), gradient);
    }

    /// The gradient of `op`, if registered.
    pub fn get(&self, op: &str) -> Option<Gradient> {
        self.map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(op)
            .copied()
    }
}

/// Whether gradients flow through values of `dtype` (floating and complex types).
pub fn is_differentiable_dtype(dtype: DataType) -> bool {
    dtype.is_floating() || dtype.is_complex()
}
