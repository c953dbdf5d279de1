//! Automatic differentiation. Gradient functions (one form:
//! `fn(&mut GradientContext<'_>) -> Result<()>`) are written once against
//! [`Ops`], an op-calling interface whose values are opaque [`Sym`] handles
//! and which the [`GradientContext`] implements; a graph builder
//! ([`gradients`]) and the eager [`GradientTape`] both implement it, so the
//! same gradient code builds gradient subgraphs and computes gradients
//! eagerly. Gradient computations are themselves ops, so
//! higher-order gradients work wherever the gradient functions are
//! differentiable.

mod backprop;
mod checker;
mod context;
mod graph_grad;
mod tape;

pub use backprop::{backprop, Record, Syms};
pub use checker::{compute_gradient, compute_gradient_error, Jacobians};
pub use context::GradientContext;
pub use graph_grad::{gradients, GraphOps};
pub use tape::GradientTape;

use crate::attrs::{AttrMap, IntoAttrValue};
use crate::op_attr::OpAttr;
use crate::registry::Registry;
use crate::{DataType, Result, Status, Tensor};
use std::sync::Arc;

/// A value inside an [`Ops`] implementation: a graph output or an eager
/// tensor. It carries the id of the scope (the tape or gradient builder)
/// that handed it out, so a handle from another scope is rejected instead
/// of naming some other value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym {
    scope: u32,
    index: u32,
}

impl Sym {
    /// Value `index` of scope `scope` (for [`Ops`] implementations; get a
    /// scope id from [`Sym::new_scope`]).
    pub fn new(scope: u32, index: u32) -> Sym {
        Sym { scope, index }
    }

    /// A fresh scope id, distinct from every other in this process.
    pub fn new_scope() -> u32 {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The scope that handed the value out.
    pub fn scope(self) -> u32 {
        self.scope
    }

    /// The value's index in its scope.
    pub fn index(self) -> u32 {
        self.index
    }

    /// The index if the handle belongs to `scope` and is below `len`;
    /// otherwise `InvalidArgument` naming `what` (a tape, a graph).
    #[inline]
    pub fn check(self, scope: u32, len: usize, what: &str) -> Result<usize> {
        let i = self.index as usize;
        if self.scope != scope || i >= len {
            return Err(self.check_error(scope, len, what));
        }
        Ok(i)
    }

    #[cold]
    #[inline(never)]
    fn check_error(self, scope: u32, len: usize, what: &str) -> Status {
        if self.scope != scope {
            Status::invalid_argument(format!(
                "value handle {self:?} belongs to another {what}: use handles only with the {what} that made them"
            ))
        } else {
            Status::invalid_argument(format!(
                "value handle {self:?} is not a value of this {what} (it has {len} values)"
            ))
        }
    }
}

/// An input argument of a call: one value or a list.
#[derive(Clone, Debug, PartialEq)]
pub enum SymArg {
    /// A single tensor.
    One(Sym),
    /// A list of tensors.
    List(Vec<Sym>),
}

/// The op-calling interface gradient functions use.
///
/// A [`Sym`] that the implementation did not hand out (forged, or from
/// another graph or tape) never panics: [`call`](Self::call) rejects it
/// with `InvalidArgument`, [`dtype`](Self::dtype) answers
/// `DataType::Invalid` and [`shape`](Self::shape) `None`.
pub trait Ops {
    /// Calls `op` on `inputs` with `attrs`; its outputs.
    fn call(&mut self, op: &str, inputs: &[SymArg], attrs: &AttrMap) -> Result<Vec<Sym>>;
    /// The dtype of a value (`DataType::Invalid` for an unknown handle).
    fn dtype(&self, s: Sym) -> DataType;
    /// What is known of a value's shape (`None` = unknown rank, `-1` = unknown dim).
    fn shape(&self, s: Sym) -> Option<Vec<i64>>;
    /// A constant.
    fn constant(&mut self, t: Tensor) -> Result<Sym>;
    /// The registry whose ops (and gradients) the calls use.
    fn registry(&self) -> &Registry;
    /// The value of `s` when it is known now (an eager tape's tensors);
    /// `None` for symbolic values (a graph's) and unknown handles. Lets a
    /// gradient written against values (a Python function) run eagerly.
    fn value_of(&self, s: Sym) -> Option<&Tensor> {
        let _ = s;
        None
    }
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

/// A gradient function (TensorFlow's gradient function, opforge's one
/// form): it reads the forward op and the gradients of its outputs from the
/// [`GradientContext`] and sets the gradients of its inputs there. Any
/// closure: a Rust function, a plugin's callback, a Python callable.
pub type GradFunction = dyn Fn(&mut GradientContext<'_>) -> Result<()> + Send + Sync;

/// What is registered for an op's differentiation: the value of its
/// [`Gradient`] attribute.
#[derive(Clone)]
pub enum GradientFn {
    /// A gradient function.
    Fn(Arc<GradFunction>),
    /// The op is not differentiable: no gradient flows through it.
    NotDifferentiable,
}

impl GradientFn {
    /// A gradient function from a closure.
    pub fn from_fn(
        f: impl Fn(&mut GradientContext<'_>) -> Result<()> + Send + Sync + 'static,
    ) -> GradientFn {
        GradientFn::Fn(Arc::new(f))
    }

    /// Whether this declares the op not differentiable.
    pub fn is_not_differentiable(&self) -> bool {
        matches!(self, GradientFn::NotDifferentiable)
    }
}

impl std::fmt::Debug for GradientFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GradientFn::Fn(_) => f.write_str("GradientFn::Fn(..)"),
            GradientFn::NotDifferentiable => f.write_str("GradientFn::NotDifferentiable"),
        }
    }
}

/// The per-op attribute holding an op's gradient (TensorFlow's
/// `REGISTER_OP_GRADIENT` / `RegisterGradient`):
/// `registry.attr::<Gradient>("Tanh")`.
pub struct Gradient;

impl OpAttr for Gradient {
    type Value = GradientFn;
    const NAME: &'static str = "Gradient";

    fn same(a: &Arc<GradientFn>, b: &Arc<GradientFn>) -> bool {
        match (&**a, &**b) {
            (GradientFn::NotDifferentiable, GradientFn::NotDifferentiable) => true,
            (GradientFn::Fn(x), GradientFn::Fn(y)) => Arc::ptr_eq(x, y),
            _ => Arc::ptr_eq(a, b),
        }
    }
}

/// Registers a gradient function for an op, next to its code:
/// `register_gradient!("Tanh", tanh_grad);`, where `tanh_grad` is a
/// `fn(&mut GradientContext<'_>) -> Result<()>` (or a closure without
/// captures of that form). It becomes the op's [`Gradient`] attribute in
/// [`Registry::global`](crate::registry::Registry::global).
#[macro_export]
macro_rules! register_gradient {
    ($op:expr, $f:expr $(,)?) => {
        $crate::register_op_attr!(
            $crate::autodiff::Gradient,
            $op,
            ::std::sync::Arc::new($crate::autodiff::GradientFn::from_fn($f))
        );
    };
}

/// Declares ops not differentiable (TensorFlow's `NotDifferentiable`).
#[macro_export]
macro_rules! register_not_differentiable {
    ($($op:expr),+ $(,)?) => {
        $(
            $crate::register_op_attr!(
                $crate::autodiff::Gradient,
                $op,
                ::std::sync::Arc::new($crate::autodiff::GradientFn::NotDifferentiable)
            );
        )+
    };
}

/// The ops autodiff itself calls (seeding, summing contributions, the
/// `Ops` helpers): [`backprop`] checks them when it is used, so a
/// selective build that leaves them out fails its first gradient call
/// with `FailedPrecondition` naming them, not somewhere inside a gradient.
pub const AUTODIFF_OPS: &[&str] = &[
    "AddN",
    "AddV2",
    "Const",
    "Mul",
    "Neg",
    "OnesLike",
    "RealDiv",
    "Reshape",
    "Shape",
    "Sub",
    "ZerosLike",
];

/// Whether gradients flow through values of `dtype` (floating and complex types).
pub fn is_differentiable_dtype(dtype: DataType) -> bool {
    dtype.is_floating() || dtype.is_complex()
}
