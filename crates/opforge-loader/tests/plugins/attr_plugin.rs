//! A test op library (built by tests/attr_values.rs with a nested cargo):
//! `AttrProbe` has a `value: tensor` and an `f: func` attr, read by its
//! kernel at creation and by its shape function.
//!
//! - `y: float`: the tensor attr's elements as f32 (numeric dtypes), or the
//!   byte length of each element (`DT_STRING`); shape: the tensor's dims,
//!   which the shape function sets from the attr.
//! - `info: string` (shape `[3]`): the tensor's dtype number, the function's
//!   name, and its attr names joined with `,`. The shape function sets
//!   `[3]` only if the function's name is not empty and fails with
//!   `InvalidArgument` naming `f` otherwise.
//!
//! Attr values the plugin gives the host, in gradients:
//!
//! - `CubeLib` (`y = x^3`, float or double) has a declarative gradient
//!   holding a `Const` node (a `tensor` attr, 3.0), `Cast` to `$T`,
//!   `Square`, two `Mul`s, and a `PlaceholderWithDefault` whose `shape`
//!   attr is `[?, ?]`: `dx = dy * 3 * x^2`, for matrices only (a graph
//!   gradient of another rank fails in that node's shape function).
//! - `Polyval` (`y = sum_k coeffs[k] x^k`, a `list(float)` attr) has a
//!   gradient function that calls `Polyval` with the derivative's
//!   coefficients (a `list(float)` value): `dx = dy * p'(x)`.

use opforge_plugin::prelude::*;
use opforge_plugin::{FuncAttr, KernelDef, ShapeAttr, TensorAttr};

/// `AttrProbe`'s declaration.
pub const ATTR_PROBE: OpDefBuilder = OpDefBuilder::new("AttrProbe")
    .attr("value: tensor")
    .attr("f: func")
    .output("y: float")
    .output("info: string")
    .set_shape_fn(attr_probe_shape)
    .doc("Echoes its tensor and func attrs.");

fn attr_probe_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let value: TensorAttr = c.get_attr("value")?;
    let f: FuncAttr = c.get_attr("f")?;
    ensure!(
        !f.name.is_empty(),
        InvalidArgument,
        "AttrProbe: f names no function"
    );
    let y = c.make_partial_shape(Some(&value.dims))?;
    c.set_output(0, y)?;
    let info = c.vector(3)?;
    c.set_output(1, info)
}

/// The kernel: what it read at creation.
pub struct AttrProbeKernel {
    values: Vec<f32>,
    dims: Vec<i64>,
    info: [Vec<u8>; 3],
}

fn elements(t: &TensorAttr) -> Result<Vec<f32>> {
    Ok(match t.dtype {
        DataType::Float => t.values::<f32>()?,
        DataType::Int32 => t.values::<i32>()?.into_iter().map(|v| v as f32).collect(),
        DataType::Int64 => t.values::<i64>()?.into_iter().map(|v| v as f32).collect(),
        DataType::String => t.strings.iter().map(|s| s.len() as f32).collect(),
        other => {
            return Err(Status::unimplemented(format!(
                "AttrProbe does not read {other} tensors"
            )))
        }
    })
}

impl CreateKernel for AttrProbeKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        let value: TensorAttr = init.get_attr("value")?;
        let f: FuncAttr = init.get_attr("f")?;
        Ok(AttrProbeKernel {
            values: elements(&value)?,
            dims: value.dims.clone(),
            info: [
                value.dtype.0.to_string().into_bytes(),
                f.name.into_bytes(),
                f.attr_names.join(",").into_bytes(),
            ],
        })
    }
}

impl OpKernel for AttrProbeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ctx.set_output_from_vec(0, &self.dims, self.values.clone())?;
        let info: Vec<&[u8]> = self.info.iter().map(Vec::as_slice).collect();
        ctx.set_output_strings(1, &[3], &info)
    }
}

/// `AttrProbe`'s kernel definition.
pub const ATTR_PROBE_KERNEL: KernelDef =
    KernelDefBuilder::new("AttrProbe").build::<AttrProbeKernel>();

/// `CubeLib`'s declaration: `y = x^3`.
pub const CUBE: OpDefBuilder = OpDefBuilder::new("CubeLib")
    .attr("T: {float, double}")
    .input("x: T")
    .output("y: T")
    .set_shape_fn(shape::unchanged_shape);

/// `Polyval`'s declaration: `y = sum_k coeffs[k] * x^k`.
pub const POLYVAL: OpDefBuilder = OpDefBuilder::new("Polyval")
    .attr("T: {float, double}")
    .attr("coeffs: list(float)")
    .input("x: T")
    .output("y: T")
    .set_shape_fn(shape::unchanged_shape);

/// The element types of `CubeLib` and `Polyval`.
trait Real: Element + core::ops::Mul<Output = Self> + core::ops::Add<Output = Self> {
    fn from_f32(v: f32) -> Self;
}
impl Real for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
}
impl Real for f64 {
    fn from_f32(v: f32) -> Self {
        f64::from(v)
    }
}

/// Output 0 (declared like input 0) is `f` of input 0, elementwise.
fn map<T: Real>(ctx: &mut OpKernelContext<'_>, f: impl Fn(T) -> T) -> Result<()> {
    let (ins, mut out) = ctx.inputs_and_output(0)?;
    for (y, &x) in out.flat_mut::<T>()?.iter_mut().zip(ins[0].flat::<T>()?) {
        *y = f(x);
    }
    Ok(())
}

/// `CubeLib`'s kernel.
pub struct CubeKernel;

impl CreateKernel for CubeKernel {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(CubeKernel)
    }
}

impl OpKernel for CubeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dtype = ctx.input(0)?.dtype();
        dispatch!(dtype, T => map::<T>(ctx, |x| x * x * x), [f32, f64])
    }
}

/// `Polyval`'s kernel (Horner's rule).
pub struct PolyvalKernel {
    coeffs: Vec<f32>,
}

impl CreateKernel for PolyvalKernel {
    fn create(init: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(PolyvalKernel {
            coeffs: init.get_attr("coeffs")?,
        })
    }
}

impl OpKernel for PolyvalKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dtype = ctx.input(0)?.dtype();
        dispatch!(dtype, T => {
            let c: Vec<T> = self.coeffs.iter().map(|&c| T::from_f32(c)).collect();
            map::<T>(ctx, |x| c.iter().rev().fold(T::from_f32(0.0), |acc, &k| acc * x + k))
        }, [f32, f64])
    }
}

/// `dx = dy * 3 * x^2` as data, for matrices (see the module doc).
fn cube_grad() -> GradientFunction {
    let mut g = GradientFunction::new();
    let three = g.node(
        "Const",
        vec![],
        vec![
            ("value", NodeAttr::Value(TensorAttr::scalar(3.0f32).into())),
            ("dtype", NodeAttr::Value(DataType::Float.into())),
        ],
    );
    let node = |n: usize| GradArg::one(GradSource::Node(n, ArgRef::flat(0)));
    let three_t = g.node(
        "Cast",
        vec![node(three)],
        vec![("DstT", NodeAttr::Placeholder("T".into()))],
    );
    let x2 = g.node(
        "Square",
        vec![GradArg::one(GradSource::Input(ArgRef::arg("x")))],
        vec![],
    );
    let slope = g.node("Mul", vec![node(x2), node(three_t)], vec![]);
    let dx = g.node(
        "Mul",
        vec![
            GradArg::one(GradSource::OutputGrad(ArgRef::arg("y"))),
            node(slope),
        ],
        vec![],
    );
    let matrix = g.node(
        "PlaceholderWithDefault",
        vec![node(dx)],
        vec![
            ("dtype", NodeAttr::Placeholder("T".into())),
            ("shape", NodeAttr::Value(ShapeAttr(Some(vec![-1, -1])).into())),
        ],
    );
    g.input_grads(vec![node(matrix)]);
    g
}

/// `dx = dy * p'(x)`, `p'` another `Polyval`.
fn polyval_grad(g: &mut GradientContext<'_>) -> Result<()> {
    let dy = g.grad()?;
    let coeffs: Vec<f32> = g.get_attr("coeffs")?;
    let derivative: Vec<f32> = coeffs
        .iter()
        .enumerate()
        .skip(1)
        .map(|(k, &c)| k as f32 * c)
        .collect();
    let x = g.input(0);
    let slope = g.op1("Polyval", &[x], &[("coeffs", derivative.into())])?;
    let dx = g.op1("Mul", &[dy, slope], &[])?;
    g.set_input_grad(0, dx)
}

opforge_plugin::export! {
    name: "attr_plugin",
    version: "0.1.0",
    ops: [ATTR_PROBE, CUBE, POLYVAL],
    kernels: [
        ATTR_PROBE_KERNEL,
        KernelDefBuilder::new("CubeLib")
            .type_constraint_list("T", &[DataType::Float, DataType::Double])
            .output_like(0, 0)
            .build::<CubeKernel>(),
        KernelDefBuilder::new("Polyval")
            .type_constraint_list("T", &[DataType::Float, DataType::Double])
            .output_like(0, 0)
            .build::<PolyvalKernel>(),
    ],
    gradients: [
        GradientDef::nodes("CubeLib", cube_grad),
        GradientDef::new("Polyval", polyval_grad),
    ],
}
