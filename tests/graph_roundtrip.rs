//! Graph round trips (build -> GraphDef -> import -> run) give eager's
//! results for every standard op.
//!
//! Each case of `cases()` (an op, its input tensors and its attrs) runs
//! eagerly, then in graphs whose inputs are `Const` nodes, or fed
//! `Placeholder`s of known shape, of known rank only, or of unknown shape
//! (`Inputs`). Each graph runs as built, after a binary GraphDef round trip,
//! and after a text-format one written as TensorFlow may write it (`Trip`).
//! Every output of the op, fetched directly and through an `Identity`
//! reading it, must equal the eager output bit for bit: dtype, shape and
//! bytes (so NaN == NaN and -0.0 != 0.0). The graph's static output dtypes
//! and inferred shapes must agree with the eager outputs too. Known
//! differences are listed in `EXPECTED_FAILURES`.
//!
//! The stateful variable ops and `Placeholder` itself have dedicated tests
//! at the end. `every_op_with_a_cpu_kernel_has_a_case` fails when an op has
//! a CPU kernel but no case: add one to `cases()` when adding an op. (Ops
//! with only an OpDef cannot run and need none.)
//!
//! No op with a CPU kernel is random or otherwise nondeterministic, so every
//! comparison is exact.

use opforge::attrs::{summarize_attrs, AttrMap, IntoAttrValue};
use opforge::eager::{Arg, EagerContext};
use opforge::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use opforge::half::{bf16, f16};
use opforge::kernel::KernelRegistry;
use opforge::num_complex::Complex;
use opforge::proto::{self, attr_value::Value, GraphDef};
use opforge::{Code, DataType, Element, OpRegistry, Tensor, TensorShape};
use std::collections::BTreeSet;

// ---- Tensors -------------------------------------------------------------

/// Floats with the special values kernels must carry through.
const FLOATS: [f64; 12] = [
    -2.5,
    0.5,
    1.0,
    -0.0,
    3.75,
    f64::NAN,
    0.0,
    f64::INFINITY,
    -1.25,
    10.0,
    f64::NEG_INFINITY,
    1e-40,
];
/// Finite floats (for ops whose interesting path is not NaN handling).
const FINITE: [f64; 7] = [-2.5, 0.5, 1.0, 3.75, -1.25, 0.0, 2.0];
const INTS: [i64; 9] = [-3, 0, 2, 7, -1, 5, 1, -8, 4];
/// Non-zero integers (divisors).
const NONZERO: [i64; 5] = [3, -2, 1, 5, -7];

fn n_of(dims: &[i64]) -> usize {
    dims.iter().product::<i64>() as usize
}

/// A tensor of shape `dims` cycling through `pattern` (from offset `skip`).
fn cycle<T: Element>(dims: &[i64], pattern: &[T], skip: usize) -> Tensor {
    let v: Vec<T> = pattern
        .iter()
        .cycle()
        .skip(skip)
        .take(n_of(dims))
        .copied()
        .collect();
    Tensor::from_vec(dims, v).unwrap()
}

fn conv<A: Copy, T>(pattern: &[A], f: impl Fn(A) -> T) -> Vec<T> {
    pattern.iter().map(|&v| f(v)).collect()
}

fn f32s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, |v| v as f32), 0)
}
/// Other float values of the same shape (a second operand).
fn f32b(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, |v| v as f32), 5)
}
fn fin32(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FINITE, |v| v as f32), 0)
}
fn f64s(dims: &[i64]) -> Tensor {
    cycle(dims, &FLOATS, 2)
}
fn f64b(dims: &[i64]) -> Tensor {
    cycle(dims, &FLOATS, 7)
}
fn fin64(dims: &[i64]) -> Tensor {
    cycle(dims, &FINITE, 3)
}
fn f16s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, f16::from_f64), 0)
}
/// Finite half-precision floats (`Maximum` then meets NaN on one side only).
fn fin16(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FINITE, f16::from_f64), 1)
}
fn bf16s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, bf16::from_f64), 1)
}
fn c64s(dims: &[i64]) -> Tensor {
    let v = conv(&FINITE, |v| Complex::new(v as f32, (1.5 - v) as f32));
    cycle(dims, &v, 0)
}
fn i32s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&INTS, |v| v as i32), 0)
}
fn i32nz(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&NONZERO, |v| v as i32), 0)
}
fn i64s(dims: &[i64]) -> Tensor {
    cycle(dims, &INTS, 3)
}
fn i64nz(dims: &[i64]) -> Tensor {
    cycle(dims, &NONZERO, 1)
}
fn u8s(dims: &[i64]) -> Tensor {
    cycle(dims, &[0u8, 7, 200, 1, 255, 3], 0)
}
fn bools(dims: &[i64]) -> Tensor {
    cycle(dims, &[true, false, false, true, true], 0)
}
fn bools_b(dims: &[i64]) -> Tensor {
    cycle(dims, &[true, false, false, true, true], 2)
}
/// `INTS` cast to `dtype` (wrapping around for unsigned types).
fn ints_as(dtype: DataType, dims: &[i64]) -> Tensor {
    let v: Vec<i64> = INTS.iter().cycle().take(n_of(dims)).copied().collect();
    let x = Tensor::from_vec(dims, v).unwrap();
    let ctx = EagerContext::default_cpu();
    ctx.op("Cast").input(x).attr("DstT", dtype).run1().unwrap()
}
/// Resource handles of two variables.
fn handles(dims: &[i64]) -> Tensor {
    let h = |name: &str, dt: DataType| opforge::resource::ResourceHandle {
        device: "/job:localhost/replica:0/task:0/device:CPU:0".into(),
        container: "c".into(),
        name: name.into(),
        type_name: "Var".into(),
        dtypes_and_shapes: vec![(dt, shape(&[2, 1]))],
    };
    let pattern = [h("v0", DataType::Float), h("v1", DataType::Int64)];
    let v = pattern.iter().cycle().take(n_of(dims)).cloned().collect();
    Tensor::from_resource_handles(dims, v).unwrap()
}
/// Strings, including empty, non-ASCII, NUL and invalid UTF-8 ones.
fn strs(dims: &[i64]) -> Tensor {
    let words: [&[u8]; 7] = [
        b"a",
        b"",
        b"bc",
        "d\u{e9}f".as_bytes(),
        b"\0x",
        b"\xff\xfe\\\"",
        b"gh",
    ];
    let v = words.iter().cycle().take(n_of(dims));
    Tensor::from_strings(dims, v.map(|w| w.to_vec()).collect()).unwrap()
}
fn str_list(dims: &[i64], words: &[&str]) -> Tensor {
    Tensor::from_strings(dims, words.iter().map(|w| w.as_bytes().to_vec()).collect()).unwrap()
}
/// A tensor of exactly these values.
fn t<T: Element>(dims: &[i64], v: &[T]) -> Tensor {
    Tensor::from_slice(dims, v).unwrap()
}
fn s<T: Element>(v: T) -> Tensor {
    Tensor::scalar(v)
}
fn shape(dims: &[i64]) -> proto::TensorShapeProto {
    TensorShape::new(dims).unwrap().to_proto()
}
fn unknown_shape() -> proto::TensorShapeProto {
    proto::TensorShapeProto {
        unknown_rank: true,
        ..Default::default()
    }
}

// ---- Cases ---------------------------------------------------------------

/// One call of an op: its input arguments and the attrs given (the rest are
/// inferred or defaulted, in eager and graph mode alike).
#[derive(Clone)]
struct Case {
    op: &'static str,
    args: Vec<Arg>,
    attrs: AttrMap,
}

fn op(name: &'static str) -> Case {
    Case {
        op: name,
        args: Vec::new(),
        attrs: AttrMap::new(),
    }
}

impl Case {
    /// Adds a single-tensor input argument.
    fn i(mut self, t: Tensor) -> Self {
        self.args.push(Arg::One(t));
        self
    }
    /// Adds a list input argument.
    fn l(mut self, ts: Vec<Tensor>) -> Self {
        self.args.push(Arg::List(ts));
        self
    }
    /// Sets an attr.
    fn a(mut self, name: &str, v: impl IntoAttrValue) -> Self {
        self.attrs.insert(name.to_string(), v.into_attr_value());
        self
    }
    /// `Op(float[2,3], [int32[], int32[]]) [attrs]`, for failure messages.
    fn describe(&self) -> String {
        let ty = |t: &Tensor| format!("{}{:?}", t.dtype(), t.dims());
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match a {
                Arg::One(t) => ty(t),
                Arg::List(l) => format!("[{}]", l.iter().map(ty).collect::<Vec<_>>().join(", ")),
            })
            .collect();
        format!(
            "{}({}) {}",
            self.op,
            args.join(", "),
            summarize_attrs(&self.attrs)
        )
    }
}

/// Unary cases of `ops` on each input.
fn unary(ops: &[&'static str], inputs: &[Tensor]) -> Vec<Case> {
    ops.iter()
        .flat_map(|&o| inputs.iter().map(move |x| op(o).i(x.clone())))
        .collect()
}

/// Binary cases of `ops` on each pair of inputs.
fn binary(ops: &[&'static str], pairs: &[(Tensor, Tensor)]) -> Vec<Case> {
    ops.iter()
        .flat_map(|&o| {
            pairs
                .iter()
                .map(move |(x, y)| op(o).i(x.clone()).i(y.clone()))
        })
        .collect()
}

/// Reduction cases of `ops` (input, axes, keep_dims).
fn reductions(ops: &[&'static str], calls: &[(Tensor, Tensor, bool)]) -> Vec<Case> {
    ops.iter()
        .flat_map(|&o| {
            calls.iter().map(move |(x, axes, keep)| {
                op(o).i(x.clone()).i(axes.clone()).a("keep_dims", *keep)
            })
        })
        .collect()
}

/// Every round-trip case, one per line (hence no rustfmt). Families share
/// inputs through the helpers above.
#[rustfmt::skip]
fn cases() -> Vec<Case> {
    let mut c = Vec::new();
    // Element-wise unary math, including NaN, infinities and -0.
    c.extend(unary(
        &["Ceil", "Floor", "Cos", "Exp", "Log", "Log1p", "Rsqrt", "Sigmoid", "Sin", "Sqrt", "Tanh"],
        &[f32s(&[2, 6]), f64s(&[5]), f16s(&[4])],
    ));
    c.extend(unary(&["Exp", "Sqrt", "Tanh", "Sigmoid", "Log"], &[c64s(&[3])]));
    c.extend(unary(&["Floor", "Sigmoid"], &[bf16s(&[2, 3])]));
    c.extend(unary(
        &["Abs", "Neg", "Sign", "Square", "Round", "Relu", "Relu6"],
        &[f32s(&[2, 6]), f64s(&[3, 1]), i32s(&[9]), i64s(&[3, 3]), f16s(&[4])],
    ));
    c.extend(unary(&["Reciprocal"], &[f32s(&[2, 6]), f64s(&[4]), i32nz(&[5]), i64nz(&[2, 2])]));
    c.extend(unary(&["Square", "Relu"], &[u8s(&[6])]));
    c.extend(unary(&["Neg", "Sign", "Square", "Reciprocal"], &[c64s(&[2, 2])]));
    c.extend(unary(&["Round"], &[t(&[6], &[0.5f32, 1.5, 2.5, -0.5, -1.5, 2.4999])]));
    c.extend(unary(&["LogicalNot"], &[bools(&[2, 3]), s(true)]));
    c.extend(unary(&["Softmax", "LogSoftmax"], &[fin32(&[2, 3]), fin64(&[4]), f32s(&[1, 6])]));
    // Gradient helpers: (y, dy).
    c.extend(binary(
        &["ReciprocalGrad", "RsqrtGrad", "SigmoidGrad", "SqrtGrad", "TanhGrad"],
        &[(f32s(&[2, 3]), f32b(&[2, 3])), (fin64(&[4]), f64b(&[4]))],
    ));
    c.extend(binary(
        &["ReluGrad"],
        &[(f32b(&[2, 3]), f32s(&[2, 3])), (i32s(&[5]), i32nz(&[5])), (fin64(&[3]), f64s(&[3]))],
    ));
    // Element-wise binary math with broadcasting and several dtypes.
    let arith = [
        "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "FloorDiv", "FloorMod", "Maximum", "Minimum",
        "SquaredDifference",
    ];
    c.extend(binary(
        &arith,
        &[
            (f32s(&[2, 3]), f32b(&[3])),
            (f64s(&[2, 1]), f64b(&[1, 3])),
            (i32s(&[2, 3]), i32nz(&[2, 3])),
            (i64s(&[4]), s(-3i64)),
        ],
    ));
    c.extend(binary(&["Pow"], &[(f32s(&[2, 3]), f32b(&[3])), (fin64(&[2, 1]), fin64(&[1, 3]))]));
    c.extend(binary(
        &["Pow"],
        &[(i32s(&[2, 3]), t(&[3], &[0i32, 1, 3])), (i64s(&[4]), s(2i64))],
    ));
    c.extend(binary(&["Add", "AddV2", "Sub", "Mul", "Div"], &[(c64s(&[2, 2]), c64s(&[2]))]));
    c.extend(binary(&["Add", "Mul", "Maximum"], &[(f16s(&[2, 2]), fin16(&[2]))]));
    c.extend(binary(&["AddV2", "Mul", "Minimum"], &[(bf16s(&[3]), bf16s(&[1]))]));
    c.extend(binary(&["Add", "AddV2", "Mul", "Maximum"], &[(u8s(&[2, 3]), u8s(&[3]))]));
    c.extend(binary(&["Add"], &[(strs(&[2, 3]), str_list(&[3], &["x", "", "yz"]))]));
    // Comparisons and logic.
    let cmp = ["Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual"];
    c.extend(binary(
        &cmp,
        &[
            (f32s(&[2, 6]), f32b(&[2, 6])),
            (f64s(&[2, 1]), f64b(&[3])),
            (i32s(&[3, 3]), s(1i32)),
            (i64s(&[4]), i64nz(&[4])),
            (u8s(&[6]), u8s(&[1])),
        ],
    ));
    c.extend(binary(
        &["Equal", "NotEqual"],
        &[(bools(&[2, 3]), bools_b(&[3])), (strs(&[2, 3]), strs(&[1, 3])), (c64s(&[3]), c64s(&[1]))],
    ));
    for o in ["Equal", "NotEqual"] {
        c.push(op(o).i(i32s(&[2])).i(i32s(&[3])).a("incompatible_shape_error", false));
        c.push(op(o).i(f32s(&[2, 3])).i(f32s(&[3])).a("incompatible_shape_error", false));
    }
    c.extend(binary(&["LogicalAnd", "LogicalOr"], &[(bools(&[2, 1]), bools_b(&[3])), (s(true), bools(&[4]))]));
    // Lists of inputs.
    c.push(op("AddN").l(vec![f32s(&[2, 2]), f32b(&[2, 2]), fin32(&[2, 2])]));
    c.push(op("AddN").l(vec![i64s(&[3]), i64nz(&[3])]));
    c.push(op("AddN").l(vec![f64s(&[2])]));
    c.push(op("AddN").l(vec![c64s(&[2]), c64s(&[2])]));
    // Selection.
    c.push(op("Select").i(t(&[3], &[true, false, true])).i(f32s(&[3, 2])).i(f32b(&[3, 2])));
    c.push(op("Select").i(bools(&[2, 2])).i(i64s(&[2, 2])).i(i64nz(&[2, 2])));
    c.push(op("Select").i(s(false)).i(strs(&[3])).i(strs(&[3])));
    c.push(op("SelectV2").i(bools(&[2, 1])).i(f32s(&[1, 3])).i(s(7.5f32)));
    c.push(op("SelectV2").i(s(true)).i(strs(&[2])).i(strs(&[2, 2])));
    c.push(op("SelectV2").i(bools(&[3])).i(i32s(&[2, 3])).i(i32nz(&[3])));
    // Reductions.
    let red = ["Sum", "Mean", "Max", "Min", "Prod"];
    c.extend(reductions(
        &red,
        &[
            (f32s(&[2, 3, 2]), t(&[2], &[0i32, 2]), true),
            (fin32(&[2, 3, 2]), t(&[2], &[0i32, 2]), false),
            (fin64(&[2, 3]), s(-1i32), false),
            (i32s(&[3, 3]), t(&[1], &[0i64]), true),
            (i64s(&[2, 2]), t::<i32>(&[0], &[]), false),
            (fin32(&[0, 3]), s(0i32), false),
        ],
    ));
    c.extend(reductions(&["Sum", "Mean", "Prod"], &[(c64s(&[2, 2]), s(1i32), false)]));
    c.extend(reductions(
        &["All", "Any"],
        &[(bools(&[2, 3]), s(1i32), false), (bools(&[2, 3]), t(&[2], &[0i64, 1]), true), (bools(&[0]), s(0i32), false)],
    ));
    for o in ["ArgMax", "ArgMin"] {
        c.push(op(o).i(f32s(&[2, 6])).i(s(1i32)));
        c.push(op(o).i(i32s(&[3, 3])).i(s(0i64)).a("output_type", DataType::Int32));
        c.push(op(o).i(bools(&[5])).i(s(0i32)));
        c.push(op(o).i(fin64(&[2, 3])).i(s(-1i32)));
    }
    // Matrix products.
    c.push(op("MatMul").i(fin32(&[2, 3])).i(fin32(&[3, 4])));
    c.push(op("MatMul").i(f32s(&[2, 3])).i(f32b(&[3, 2])));
    c.push(op("MatMul").i(fin64(&[3, 2])).i(fin64(&[3, 4])).a("transpose_a", true));
    c.push(op("MatMul").i(i32s(&[2, 3])).i(i32s(&[4, 3])).a("transpose_b", true));
    c.push(op("MatMul").i(i64s(&[1, 2])).i(i64s(&[1, 2])).a("transpose_a", true).a("transpose_b", false));
    c.push(op("MatMul").i(c64s(&[2, 2])).i(c64s(&[2, 2])));
    c.push(op("BatchMatMulV2").i(fin32(&[2, 2, 3])).i(fin32(&[3, 2])));
    c.push(op("BatchMatMulV2").i(fin64(&[2, 3, 2])).i(fin64(&[1, 3, 4])).a("adj_x", true));
    c.push(op("BatchMatMulV2").i(i32s(&[2, 2, 2])).i(i32s(&[2, 2, 2])).a("adj_y", true));
    c.push(op("BatchMatMulV2").i(c64s(&[1, 2, 2])).i(c64s(&[2, 2])).a("adj_x", true));
    // Neural-network ops.
    c.push(op("BiasAdd").i(f32s(&[2, 3])).i(f32b(&[3])));
    c.push(op("BiasAdd").i(fin64(&[2, 3, 2])).i(fin64(&[3])).a("data_format", "NCHW"));
    c.push(op("BiasAdd").i(i32s(&[2, 2, 2])).i(i32nz(&[2])));
    c.push(op("BiasAddGrad").i(f32s(&[2, 3])));
    c.push(op("BiasAddGrad").i(fin64(&[2, 3, 2])).a("data_format", "NCHW"));
    c.push(op("BiasAddGrad").i(fin32(&[2, 3, 2, 2])).a("data_format", "NCHW"));
    c.push(op("BiasAddGrad").i(i32s(&[1, 2, 3, 2, 2])).a("data_format", "NCHW"));
    c.push(op("BiasAddGrad").i(i64s(&[4, 2])));
    c.push(op("SoftmaxCrossEntropyWithLogits").i(fin32(&[2, 3])).i(t(&[2, 3], &[0.0f32, 1.0, 0.0, 0.25, 0.25, 0.5])));
    c.push(op("SoftmaxCrossEntropyWithLogits").i(fin64(&[2, 3])).i(t(&[3], &[0.0, 0.0, 1.0])));
    c.push(op("SoftmaxCrossEntropyWithLogits").i(fin32(&[1, 3])).i(t(&[2, 3], &[1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0])));
    c.push(op("SoftmaxCrossEntropyWithLogits").i(f32s(&[2, 3])).i(f32b(&[2, 3])));
    c.push(op("SparseSoftmaxCrossEntropyWithLogits").i(fin32(&[2, 3])).i(t(&[2], &[2i64, 0])));
    c.push(op("SparseSoftmaxCrossEntropyWithLogits").i(fin64(&[3, 4])).i(t(&[3], &[3i32, 1, 0])));
    // Casts.
    for (x, dst) in [
        (f32s(&[2, 6]), DataType::Int32),
        (f32s(&[2, 6]), DataType::UInt8),
        (f32s(&[2, 6]), DataType::Double),
        (f32s(&[2, 6]), DataType::Half),
        (f32s(&[2, 6]), DataType::Bool),
        (f64s(&[5]), DataType::Float),
        (i32s(&[4]), DataType::Double),
        (i64s(&[4]), DataType::Bool),
        (bools(&[3]), DataType::Float),
        (u8s(&[6]), DataType::Int8),
        (f16s(&[4]), DataType::BFloat16),
        (c64s(&[2]), DataType::Float),
        (strs(&[2]), DataType::String),
    ] {
        c.push(op("Cast").i(x).a("DstT", dst));
    }
    c.push(op("Cast").i(fin64(&[3])).a("DstT", DataType::Float).a("Truncate", true));
    c.push(op("Cast").i(fin32(&[3])).a("DstT", DataType::BFloat16).a("Truncate", true));
    // Shapes and broadcasting helpers.
    for (a, b) in [(t(&[3], &[2i32, 1, 3]), t(&[2], &[4i32, 1])), (t(&[2], &[5i64, 1]), t(&[3], &[1i64, 1, 6]))] {
        c.push(op("BroadcastArgs").i(a.clone()).i(b.clone()));
        c.push(op("BroadcastGradientArgs").i(a).i(b));
    }
    c.push(op("BroadcastGradientArgs").i(t(&[2], &[2i32, 3])).i(t::<i32>(&[0], &[])));
    c.push(op("BroadcastTo").i(f32s(&[3])).i(t(&[2], &[2i32, 3])));
    c.push(op("BroadcastTo").i(strs(&[2, 1])).i(t(&[3], &[2i64, 2, 2])));
    c.push(op("BroadcastTo").i(s(true)).i(t(&[1], &[4i32])));
    for x in [f32s(&[2, 3, 1]), strs(&[4]), s(1i64), bools(&[0, 2])] {
        c.push(op("Shape").i(x.clone()));
        c.push(op("Size").i(x.clone()));
        c.push(op("Rank").i(x));
    }
    c.push(op("Shape").i(f64s(&[1, 2])).a("out_type", DataType::Int64));
    c.push(op("Size").i(f64s(&[1, 2])).a("out_type", DataType::Int64));
    c.push(op("ShapeN").l(vec![f32s(&[2, 3]), f32s(&[4])]).a("out_type", DataType::Int64));
    c.push(op("ShapeN").l(vec![strs(&[1]), strs(&[]), strs(&[2, 0, 1])]));
    c.push(op("Reshape").i(f32s(&[2, 3])).i(t(&[2], &[3i32, -1])));
    c.push(op("Reshape").i(strs(&[2, 3])).i(t(&[1], &[6i64])));
    c.push(op("Reshape").i(s(4i64)).i(t::<i32>(&[0], &[])));
    c.push(op("ExpandDims").i(f32s(&[2, 3])).i(s(1i32)));
    c.push(op("ExpandDims").i(strs(&[2])).i(s(-1i64)));
    c.push(op("ExpandDims").i(s(true)).i(s(0i32)));
    c.push(op("Squeeze").i(f32s(&[1, 2, 1, 3])));
    c.push(op("Squeeze").i(i32s(&[1, 2, 1, 3])).a("squeeze_dims", vec![2i64]));
    c.push(op("Squeeze").i(strs(&[1, 1])).a("squeeze_dims", vec![-1i64, 0]));
    c.push(op("Fill").i(t(&[2], &[2i32, 3])).i(s(1.5f32)));
    c.push(op("Fill").i(t(&[1], &[3i64])).i(str_list(&[], &["fill"])));
    c.push(op("Fill").i(t(&[2], &[0i32, 2])).i(s(true)));
    c.push(op("Fill").i(t::<i32>(&[0], &[])).i(s(f64::NAN)));
    c.push(op("Range").i(s(0i32)).i(s(10i32)).i(s(3i32)));
    c.push(op("Range").i(s(1.0f32)).i(s(-2.0f32)).i(s(-0.75f32)));
    c.push(op("Range").i(s(5i64)).i(s(5i64)).i(s(1i64)));
    c.push(op("Range").i(s(0.5f64)).i(s(2.0f64)).i(s(0.1f64)));
    c.push(op("InvertPermutation").i(t(&[4], &[2i32, 0, 3, 1])));
    c.push(op("InvertPermutation").i(t(&[3], &[1i64, 2, 0])));
    // Pass-through ops.
    for x in [f32s(&[2, 6]), strs(&[3]), bools(&[2]), c64s(&[1])] {
        c.push(op("Identity").i(x.clone()));
        c.push(op("StopGradient").i(x));
    }
    c.push(op("IdentityN").l(vec![f32s(&[2, 3]), i32s(&[1]), strs(&[2]), s(false)]));
    c.push(op("IdentityN").l(vec![f64s(&[4])]));
    c.push(op("PlaceholderWithDefault").i(f32s(&[2])).a("dtype", DataType::Float).a("shape", shape(&[2])));
    c.push(op("PlaceholderWithDefault").i(strs(&[])).a("dtype", DataType::String).a("shape", shape(&[])));
    c.push(op("PlaceholderWithDefault").i(i64s(&[2, 3])).a("dtype", DataType::Int64).a("shape", unknown_shape()));
    c.push(op("ZeroOut").i(i32s(&[2, 2])));
    c.push(op("ZeroOut").i(f32s(&[2, 3])).a("preserve_index", 5i64));
    c.push(op("ZeroOut").i(s(9u8)));
    c.push(op("ZerosLike").i(f32s(&[2, 3])));
    c.push(op("ZerosLike").i(strs(&[2])));
    c.push(op("ZerosLike").i(bools(&[3])));
    c.push(op("ZerosLike").i(c64s(&[2])));
    c.push(op("OnesLike").i(f32s(&[2, 3])));
    c.push(op("OnesLike").i(i64s(&[4])));
    c.push(op("OnesLike").i(bools(&[1, 2])));
    c.push(op("OnesLike").i(bf16s(&[2])));
    // Constants and nodes without outputs.
    let empty = Tensor::zeros(DataType::Int64, &[0, 3]).unwrap();
    for v in [f32s(&[2, 6]), strs(&[2, 2]), bools(&[3]), empty, f16s(&[3]), s(-0.0f64), c64s(&[2]), handles(&[2])] {
        let dtype = v.dtype();
        c.push(op("Const").a("value", &v).a("dtype", dtype));
    }
    c.push(op("NoOp"));
    // Concatenation, packing and splitting.
    c.push(op("ConcatV2").l(vec![f32s(&[2, 2]), f32b(&[2, 1])]).i(s(1i32)));
    c.push(op("ConcatV2").l(vec![strs(&[1, 2]), strs(&[2, 2]), strs(&[0, 2])]).i(s(0i64)));
    c.push(op("ConcatV2").l(vec![bools(&[2, 1]), bools_b(&[2, 3])]).i(s(-1i32)));
    c.push(op("ConcatV2").l(vec![i64s(&[3]), i64nz(&[0])]).i(s(0i32)));
    c.push(op("Pack").l(vec![f32s(&[2]), f32b(&[2]), fin32(&[2])]).a("axis", 1i64));
    c.push(op("Pack").l(vec![strs(&[2, 1]), strs(&[2, 1])]));
    c.push(op("Pack").l(vec![s(1i64), s(2i64), s(3i64), s(4i64)]));
    c.push(op("Pack").l(vec![i32s(&[2, 2]), i32nz(&[2, 2])]).a("axis", -1i64));
    c.push(op("Unpack").i(f32s(&[3, 2])).a("num", 3i64));
    c.push(op("Unpack").i(i32s(&[2, 2, 3])).a("num", 2i64).a("axis", 1i64));
    c.push(op("Unpack").i(strs(&[2, 3])).a("num", 3i64).a("axis", -1i64));
    c.push(op("Unpack").i(bools(&[1])).a("num", 1i64));
    c.push(op("Split").i(s(0i32)).i(f32s(&[4, 2])).a("num_split", 2i64));
    c.push(op("Split").i(s(-1i32)).i(i64s(&[2, 6])).a("num_split", 3i64));
    c.push(op("Split").i(s(1i32)).i(strs(&[1, 2])).a("num_split", 2i64));
    c.push(op("Split").i(s(0i32)).i(bools(&[3])).a("num_split", 1i64));
    // Slicing, gathering, padding, tiling and permuting.
    c.push(op("Slice").i(f32s(&[3, 4])).i(t(&[2], &[1i32, 0])).i(t(&[2], &[2i32, -1])));
    c.push(op("Slice").i(strs(&[4])).i(t(&[1], &[1i64])).i(t(&[1], &[2i64])));
    c.push(op("Slice").i(c64s(&[2, 2])).i(t(&[2], &[0i32, 1])).i(t(&[2], &[2i32, 0])));
    c.push(strided(f32s(&[4, 3]), &[1, 0], &[4, 3], &[2, 1], [0, 0, 0]));
    c.push(strided(i64s(&[3, 4]), &[-1, 3], &[0, 0], &[-1, -2], [0, 2, 0]));
    c.push(strided(f64s(&[2, 3, 4]), &[1, 0], &[2, 0], &[1, 1], [0, 2, 1]));
    c.push(strided(strs(&[5]), &[1], &[4], &[2], [0, 0, 0]));
    c.push(strided(bools(&[2, 3]), &[0, 0, 1], &[0, 0, 3], &[1, 1, 1], [2, 3, 0]).a("new_axis_mask", 1i64));
    c.push(strided(i32s(&[3, 2, 2]), &[0, 1], &[0, 2], &[1, 1], [1, 1, 2]).a("ellipsis_mask", 1i64));
    c.push(
        op("StridedSliceGrad")
            .i(t(&[2], &[2i32, 3]))
            .i(t(&[2], &[0i32, 2]))
            .i(t(&[2], &[2i32, 3]))
            .i(t(&[2], &[1i32, 1]))
            .i(f32s(&[2, 1])),
    );
    c.push(
        op("StridedSliceGrad")
            .i(t(&[2], &[3i64, 4]))
            .i(t(&[2], &[-1i64, 3]))
            .i(t(&[2], &[0i64, 0]))
            .i(t(&[2], &[-1i64, -2]))
            .i(fin64(&[3, 2]))
            .a("end_mask", 1i64)
            .a("shrink_axis_mask", 0i64)
            .a("begin_mask", 0i64)
            .a("ellipsis_mask", 0i64)
            .a("new_axis_mask", 0i64),
    );
    c.push(op("GatherV2").i(f32s(&[3, 2])).i(t(&[2], &[2i32, 0])).i(s(0i32)));
    c.push(op("GatherV2").i(i64s(&[2, 3])).i(t(&[2, 2], &[0i32, 2, 1, 1])).i(s(1i32)).a("batch_dims", 1i64));
    c.push(op("GatherV2").i(strs(&[4])).i(t(&[2, 2], &[3i64, 0, 1, 1])).i(s(0i64)));
    c.push(op("GatherV2").i(bools(&[2, 3])).i(t(&[1], &[1i16])).i(s(-1i32)));
    c.push(op("OneHot").i(t(&[4], &[0i64, 2, -1, 1])).i(s(3i32)).i(s(5.0f32)).i(s(-0.0f32)));
    c.push(op("OneHot").i(t(&[2, 2], &[0i32, 1, 1, 3])).i(s(2i32)).i(s(1i64)).i(s(0i64)).a("axis", 0i64));
    c.push(op("OneHot").i(t(&[2], &[1u8, 5])).i(s(2i32)).i(str_list(&[], &["on"])).i(str_list(&[], &["off"])));
    c.push(op("OneHot").i(t(&[3], &[0i8, 1, 2])).i(s(0i32)).i(s(true)).i(s(false)));
    c.push(op("Pad").i(f32s(&[2, 3])).i(t(&[2, 2], &[1i32, 0, 0, 2])));
    c.push(op("Pad").i(strs(&[2])).i(t(&[1, 2], &[2i64, 1])));
    c.push(op("Pad").i(s(3i32)).i(t::<i32>(&[0, 2], &[])));
    c.push(op("PadV2").i(f64s(&[2, 2])).i(t(&[2, 2], &[0i32, 1, 1, 1])).i(s(f64::NAN)));
    c.push(op("PadV2").i(bools(&[2])).i(t(&[1, 2], &[1i32, 1])).i(s(true)));
    c.push(op("PadV2").i(strs(&[1, 1])).i(t(&[2, 2], &[1i64, 0, 0, 1])).i(str_list(&[], &["pad"])));
    c.push(op("Tile").i(f32s(&[2, 1])).i(t(&[2], &[1i32, 3])));
    c.push(op("Tile").i(strs(&[2])).i(t(&[1], &[2i64])));
    c.push(op("Tile").i(i32s(&[1, 2, 1])).i(t(&[3], &[2i32, 0, 2])));
    c.push(op("Transpose").i(f32s(&[2, 3, 2])).i(t(&[3], &[2i32, 0, 1])));
    c.push(op("Transpose").i(strs(&[2, 3])).i(t(&[2], &[1i64, 0])));
    c.push(op("Transpose").i(c64s(&[2, 1])).i(t(&[2], &[1i32, 0])));
    c.push(op("Reverse").i(f32s(&[2, 3])).i(t(&[2], &[true, false])));
    c.push(op("Reverse").i(strs(&[2, 2])).i(t(&[2], &[true, true])));
    c.push(op("Reverse").i(i64s(&[3])).i(t(&[1], &[false])));
    c.push(op("ReverseV2").i(f32s(&[2, 3, 2])).i(t(&[2], &[0i32, 2])));
    c.push(op("ReverseV2").i(i64s(&[2, 3])).i(t(&[1], &[-1i64])));
    c.push(op("ReverseV2").i(strs(&[3])).i(t::<i32>(&[0], &[])));
    // Every other storable dtype, through ops that take any type.
    use DataType::{Complex128, Float8E4M3FN, Float8E5M2, Int16, Int8, QInt8, QUInt8, UInt16, UInt32, UInt64};
    for dtype in [Int8, Int16, UInt16, UInt32, UInt64, Complex128] {
        c.push(op("Identity").i(ints_as(dtype, &[2, 3])));
        c.push(op("AddV2").i(ints_as(dtype, &[2, 3])).i(ints_as(dtype, &[3])));
    }
    for dtype in [QInt8, QUInt8, Float8E5M2, Float8E4M3FN] {
        let x = u8s(&[2, 3]).bitcast(dtype).unwrap();
        c.push(op("Identity").i(x.clone()));
        c.push(op("ConcatV2").l(vec![x.clone(), x.clone()]).i(s(0i32)));
        if !matches!(dtype, QInt8 | QUInt8) {
            c.push(op("Transpose").i(x).i(t(&[2], &[1i32, 0])));
        }
    }
    // Resource handles as values.
    c.push(op("Identity").i(handles(&[3])));
    c.push(op("GatherV2").i(handles(&[2])).i(t(&[3], &[1i32, 1, 0])).i(s(0i32)));
    c.push(op("Transpose").i(handles(&[1, 2])).i(t(&[2], &[1i32, 0])));
    c.push(op("BroadcastTo").i(handles(&[2])).i(t(&[2], &[2i32, 2])));
    c.push(op("Fill").i(t(&[1], &[2i32])).i(handles(&[])));
    c.push(op("OneHot").i(t(&[2], &[1i32, 0])).i(s(2i32)).i(handles(&[])).i(handles(&[])));
    // Large enough to be sharded over the intra-op threads, and for the
    // session's executor to run in parallel mode.
    c.push(op("Sum").i(fin32(&[64, 130])).i(s(1i32)));
    c.push(op("Mean").i(fin64(&[130, 64])).i(s(0i32)));
    c.push(op("Max").i(f32s(&[64, 130])).i(t(&[2], &[0i32, 1])));
    c.push(op("MatMul").i(fin32(&[64, 96])).i(fin32(&[96, 80])));
    c.push(op("BatchMatMulV2").i(fin64(&[4, 40, 30])).i(fin64(&[30, 50])));
    c.push(op("AddV2").i(f32s(&[100, 100])).i(f32b(&[100])));
    c.push(op("Tanh").i(f32s(&[10_000])));
    c.push(op("Softmax").i(fin32(&[50, 200])));
    c.push(op("Transpose").i(fin32(&[100, 90])).i(t(&[2], &[1i32, 0])));
    c.push(op("Cast").i(f32s(&[10_000])).a("DstT", DataType::Int64));
    c.push(op("ConcatV2").l(vec![i32s(&[50, 100]), i32nz(&[50, 30])]).i(s(1i32)));
    c.push(op("SoftmaxCrossEntropyWithLogits").i(fin32(&[700, 50])).i(fin32(&[700, 50])));
    // Strings.
    for (words, out) in [
        (&["1.5", " -2e3 ", "0x1A", "1e40", "-0"][..], DataType::Float),
        (&["0.1", "1e308", "-4.9e-324"][..], DataType::Double),
        (&["7", "-3", "2147483647"][..], DataType::Int32),
        (&["-9223372036854775808", "12"][..], DataType::Int64),
        (&["4294967295"][..], DataType::UInt32),
    ] {
        c.push(op("StringToNumber").i(str_list(&[words.len() as i64], words)).a("out_type", out));
    }
    c.push(op("StringToNumber").i(str_list(&[], &["3.25"])));
    c
}

/// `StridedSlice` with `[begin_mask, end_mask, shrink_axis_mask]`.
fn strided(x: Tensor, begin: &[i64], end: &[i64], strides: &[i64], masks: [i64; 3]) -> Case {
    let n = begin.len() as i64;
    let idx = |v: &[i64]| {
        if x.dtype() == DataType::Int64 {
            t(&[n], v)
        } else {
            t(&[n], &v.iter().map(|&i| i as i32).collect::<Vec<_>>())
        }
    };
    let (b, e, st) = (idx(begin), idx(end), idx(strides));
    op("StridedSlice")
        .i(x)
        .i(b)
        .i(e)
        .i(st)
        .a("begin_mask", masks[0])
        .a("end_mask", masks[1])
        .a("shrink_axis_mask", masks[2])
}

/// Ops covered by the dedicated tests below rather than by `cases()`.
const COVERED_ELSEWHERE: &[(&str, &str)] = &[
    (
        "Placeholder",
        "placeholders_fed_and_unfed (and every case's fed variants)",
    ),
    ("VarHandleOp", "variables"),
    ("AssignVariableOp", "variables"),
    ("AssignAddVariableOp", "variables"),
    ("AssignSubVariableOp", "variables"),
    ("ReadVariableOp", "variables"),
    ("DestroyResourceOp", "variables"),
    ("ResourceApplyGradientDescent", "variables"),
];

/// Cases known to differ between graph and eager mode or to fail to round
/// trip: `(describe() of the case, a substring of its failure, the bug)`. A
/// listed case must still fail that way (so a fix must remove it from here);
/// any other failure fails the test.
const EXPECTED_FAILURES: &[(&str, &str, &str)] = &[
    // The values match in every graph form; only the inferred static shape
    // is wrong. `broadcast_shapes` (opforge-core shape_inference/common.rs)
    // broadcasts two unknown dims to an unknown dim even when
    // incompatible_shape_error=false, as TensorFlow's
    // BroadcastBinaryOpOutputShapeFnHelper does, but for incompatible shapes
    // the kernel returns a scalar: the graph claims rank 1, the value has rank 0.
    (
        "Equal(int32[2], int32[3]) [incompatible_shape_error=false]",
        "[FedUnknownDims inputs, Built] output 0's inferred shape is [-1], eager gave []",
        "static shape [?] for a scalar result",
    ),
    (
        "NotEqual(int32[2], int32[3]) [incompatible_shape_error=false]",
        "[FedUnknownDims inputs, Built] output 0's inferred shape is [-1], eager gave []",
        "static shape [?] for a scalar result",
    ),
    // The values match in every graph form; only the inferred static shape
    // is wrong. BiasAddGrad's shape function (opforge-ops nn.rs
    // `bias_add_grad_shape`, written after TensorFlow's BiasAddGradShape)
    // takes the NCHW channel dim as the third-to-last dim, but the kernel
    // (like BiasAdd's kernel and shape function) takes dim 1. They agree only
    // for rank 4.
    (
        "BiasAddGrad(double[2, 3, 2]) [data_format=\"NCHW\"]",
        "[Const inputs, Built] output 0's inferred shape is [2], eager gave [3]",
        "NCHW channel dim: shape function uses dim -3, kernel dim 1",
    ),
    (
        "BiasAddGrad(int32[1, 2, 3, 2, 2]) [data_format=\"NCHW\"]",
        "[Const inputs, Built] output 0's inferred shape is [3], eager gave [2]",
        "NCHW channel dim: shape function uses dim -3, kernel dim 1",
    ),
];

// ---- Running a case ------------------------------------------------------

/// How a case's inputs enter the graph.
#[derive(Clone, Copy, Debug)]
enum Inputs {
    /// `Const` nodes holding the values.
    Const,
    /// `Placeholder`s declaring the values' shapes, fed at run time.
    FedKnownShape,
    /// `Placeholder`s of known rank and unknown dimensions, fed at run time.
    FedUnknownDims,
    /// `Placeholder`s of unknown shape, fed at run time.
    FedUnknownShape,
}

/// How a case's graph reaches the session.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Trip {
    /// As built.
    Built,
    /// Encoded in the binary wire format (prost's `Message::encode_to_vec`,
    /// which `proto::to_binary` is), decoded, imported into a fresh graph.
    Binary,
    /// Written as TensorFlow may write it (see `tf_style`), printed in text
    /// format, parsed and imported under the prefix `rt/`.
    Text,
}

impl Trip {
    fn prefix(self) -> &'static str {
        if self == Trip::Text {
            "rt/"
        } else {
            ""
        }
    }
}

/// The graph of a case: its input nodes, the op node `op` (on an explicit
/// device), an `Identity` node `out{i}` reading each output `op:i`, and a
/// `NoOp` node `done` with a control edge from `op`. Returns the feeds the
/// session must be given (by output name).
fn build(case: &Case, inputs: Inputs) -> Result<(Graph, Vec<(String, Tensor)>), String> {
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let mut source = |g: &mut Graph, name: String, t: &Tensor| -> Result<Output, String> {
        let spec = match inputs {
            Inputs::Const => NodeSpec::new("Const", &name)
                .attr("value", t)
                .attr("dtype", t.dtype()),
            _ => {
                feeds.push((format!("{name}:0"), t.clone()));
                let p = NodeSpec::new("Placeholder", &name).attr("dtype", t.dtype());
                let mut unknown_dims = t.shape().to_proto();
                unknown_dims.dim.iter_mut().for_each(|d| d.size = -1);
                match inputs {
                    Inputs::FedKnownShape => p.attr("shape", t.shape().to_proto()),
                    Inputs::FedUnknownDims => p.attr("shape", unknown_dims),
                    _ => p,
                }
            }
        };
        g.add(spec)
            .map(Output::from)
            .map_err(|e| format!("adding input {name}: {e}"))
    };
    let mut spec =
        NodeSpec::new(case.op, "op").device("/job:localhost/replica:0/task:0/device:CPU:0");
    for (i, arg) in case.args.iter().enumerate() {
        spec = match arg {
            Arg::One(t) => spec.input(source(&mut g, format!("in{i}"), t)?),
            Arg::List(l) => {
                let outs = l
                    .iter()
                    .enumerate()
                    .map(|(j, t)| source(&mut g, format!("in{i}_{j}"), t))
                    .collect::<Result<_, _>>()?;
                spec.input_list(outs)
            }
        };
    }
    for (k, v) in &case.attrs {
        spec = spec.attr(k, v.clone());
    }
    let id = g
        .add(spec)
        .map_err(|e| format!("graph construction: {e}"))?;
    for i in 0..g.node(id).output_types.len() {
        let read = NodeSpec::new("Identity", &format!("out{i}")).input(Output::new(id, i));
        g.add(read).map_err(|e| format!("adding out{i}: {e}"))?;
    }
    g.add(NodeSpec::new("NoOp", "done").control_input(id))
        .map_err(|e| format!("adding done: {e}"))?;
    Ok((g, feeds))
}

/// `def` as TensorFlow may write it: nodes in another order (reversed),
/// attrs equal to their default left out, and `Const` values in the typed
/// `*_val` fields (`AsProtoField`) instead of `tensor_content`.
fn tf_style(def: &GraphDef) -> GraphDef {
    let mut def = def.clone();
    def.node.reverse();
    for n in &mut def.node {
        let op_def = OpRegistry::global().op_def(&n.op).unwrap();
        let default = |k: &String| {
            op_def
                .attr
                .iter()
                .find(|a| &a.name == k)
                .and_then(|a| a.default_value.clone())
        };
        n.attr.retain(|k, v| default(k).as_ref() != Some(v));
        if let Some(Value::Tensor(t)) = n.attr.get_mut("value").and_then(|v| v.value.as_mut()) {
            *t = Tensor::from_proto(t).unwrap().to_proto_field().unwrap();
        }
    }
    def
}

/// `def`'s nodes as importing them under `prefix` names them, sorted by
/// name, with tensor attrs in one encoding.
fn canonical(def: &GraphDef, prefix: &str) -> GraphDef {
    let mut nodes = def.node.clone();
    for n in &mut nodes {
        n.name = format!("{prefix}{}", n.name);
        for input in &mut n.input {
            *input = match input.strip_prefix('^') {
                Some(c) => format!("^{prefix}{c}"),
                None => format!("{prefix}{input}"),
            };
        }
        for v in n.attr.values_mut() {
            if let Some(Value::Tensor(t)) = &mut v.value {
                *t = Tensor::from_proto(t).unwrap().to_proto().unwrap();
            }
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    GraphDef {
        node: nodes,
        ..Default::default()
    }
}

/// Equal to the bit (`PartialEq` has NaN != NaN in float fields); maps are
/// `BTreeMap`s, so equal messages encode to equal bytes.
fn same(a: &GraphDef, b: &GraphDef) -> bool {
    proto::to_binary(a) == proto::to_binary(b)
}

/// The graph of `def` after `trip`, checked to decode to what was encoded
/// and to export the same nodes again.
fn import(def: &GraphDef, trip: Trip) -> Result<Graph, String> {
    let sent = if trip == Trip::Text {
        tf_style(def)
    } else {
        def.clone()
    };
    let back: GraphDef = match trip {
        Trip::Text => proto::from_text(&proto::to_text(&sent)),
        _ => proto::from_binary(&proto::to_binary(&sent)),
    }
    .map_err(|e| format!("decoding: {e}"))?;
    if !same(&back, &sent) {
        return Err(format!(
            "the decoded GraphDef differs:\n{}",
            proto::to_text(&back)
        ));
    }
    let g = if trip == Trip::Text {
        let mut g = Graph::new();
        g.import(&back, trip.prefix()).map(|()| g)
    } else {
        Graph::from_graph_def(&back)
    }
    .map_err(|e| format!("import: {e}"))?;
    let again = g.to_graph_def();
    let same = match trip {
        Trip::Text => same(&canonical(&again, ""), &canonical(def, trip.prefix())),
        _ => same(&again, def),
    };
    if !same {
        return Err(format!("re-export differs:\n{}", proto::to_text(&again)));
    }
    Ok(g)
}

/// Runs `g` (after `trip`): fetches every output of node `op` and of its
/// readers `out{i}`, and runs `done`. Only the binary trip's session has an
/// inter-op pool (the executor's parallel mode, used for graphs with
/// unknown or large shapes): starting one per session costs more than the
/// rest of this test.
fn run(g: Graph, trip: Trip, feeds: &[(String, Tensor)], n: usize) -> Result<Vec<Tensor>, String> {
    let p = trip.prefix();
    let mut fetches: Vec<String> = (0..n).map(|i| format!("{p}op:{i}")).collect();
    fetches.extend((0..n).map(|i| format!("{p}out{i}:0")));
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let feeds: Vec<(String, Tensor)> = feeds
        .iter()
        .map(|(n, t)| (format!("{p}{n}"), t.clone()))
        .collect();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let mut options = SessionOptions::default();
    if trip != Trip::Binary {
        options.inter_op_threads = 1;
    }
    let sess = Session::with_options(g, options).map_err(|e| format!("session: {e}"))?;
    sess.run_by_name(&feeds, &fetches, &[&format!("{p}done")])
        .map_err(|e| format!("run: {e}"))
}

/// The graph's static view of node `op` agrees with the eager outputs: the
/// same number and dtypes of outputs, and inferred shapes compatible with
/// the actual ones.
fn check_static(g: &Graph, trip: Trip, want: &[Tensor]) -> Result<(), String> {
    let op = format!("{}op", trip.prefix());
    let node = g.node(g.find(&op).ok_or("no node 'op' in the graph")?);
    let types: Vec<DataType> = want.iter().map(Tensor::dtype).collect();
    if node.output_types != types {
        return Err(format!(
            "the node's output dtypes are {:?}, eager gave {types:?}",
            node.output_types
        ));
    }
    for (i, (inferred, w)) in node.output_shapes.iter().zip(want).enumerate() {
        let Some(dims) = inferred else { continue };
        let fits =
            dims.len() == w.rank() && dims.iter().zip(w.dims()).all(|(&d, &a)| d < 0 || d == a);
        if !fits {
            return Err(format!(
                "output {i}'s inferred shape is {dims:?}, eager gave {:?}",
                w.dims()
            ));
        }
    }
    Ok(())
}

/// Equal dtype, shape and bytes (NaN payloads and signed zeros included).
fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.dims() == b.dims()
        && match a.dtype() {
            DataType::String => a.strings().ok() == b.strings().ok(),
            DataType::Resource => a.resource_handles().ok() == b.resource_handles().ok(),
            _ => a.bytes().ok() == b.bytes().ok(),
        }
}

/// `got` holds the op's outputs, then its readers' outputs.
fn compare(got: &[Tensor], want: &[Tensor]) -> Result<(), String> {
    let (direct, read) = got.split_at(want.len());
    for (what, got) in [("output", direct), ("out", read)] {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            if !same_bits(g, w) {
                return Err(format!("{what} {i} is {g:?}, eager gave {w:?}"));
            }
        }
    }
    Ok(())
}

/// Runs `case` eagerly and in every graph form; the first difference.
fn check(ctx: &EagerContext, case: &Case) -> Result<(), String> {
    let want = ctx
        .execute_args(case.op, case.args.clone(), &case.attrs)
        .map_err(|e| format!("eager execution failed: {e}"))?;
    let variants: &[Inputs] = if case.args.is_empty() {
        &[Inputs::Const]
    } else {
        &[
            Inputs::Const,
            Inputs::FedKnownShape,
            Inputs::FedUnknownDims,
            Inputs::FedUnknownShape,
        ]
    };
    // Wrong static dtypes or shapes are reported after every value is compared.
    let mut static_problems = Vec::new();
    for &inputs in variants {
        let (built, feeds) = build(case, inputs).map_err(|e| format!("[{inputs:?} inputs] {e}"))?;
        let def = built.to_graph_def();
        let mut built = Some(built);
        for trip in [Trip::Built, Trip::Binary, Trip::Text] {
            let at = |e: String| format!("[{inputs:?} inputs, {trip:?}] {e}");
            let g = match built.take() {
                Some(g) => g,
                None => import(&def, trip).map_err(at)?,
            };
            static_problems.extend(check_static(&g, trip, &want).err().map(at));
            run(g, trip, &feeds, want.len())
                .and_then(|got| compare(&got, &want))
                .map_err(at)?;
        }
    }
    match static_problems.as_slice() {
        [] => Ok(()),
        [first, rest @ ..] => Err(format!(
            "{first} (and {} more static mismatches)",
            rest.len()
        )),
    }
}

fn eager() -> EagerContext {
    opforge::opforge_ops::link();
    // Same intra-op threads as a default session (one per core), so kernels
    // shard their work the same way in both modes.
    EagerContext::new(0).unwrap()
}

#[test]
fn graph_round_trips_match_eager_for_every_case() {
    let ctx = eager();
    let mut failures = Vec::new();
    let all = cases();
    for case in &all {
        let name = case.describe();
        let expected = EXPECTED_FAILURES.iter().find(|(n, _, _)| *n == name);
        match (check(&ctx, case), expected) {
            (Ok(()), None) => {}
            (Ok(()), Some((_, _, bug))) => failures.push(format!(
                "{name}: listed in EXPECTED_FAILURES ({bug}) but passes"
            )),
            (Err(e), Some((_, want, _))) if e.contains(want) => {}
            (Err(e), _) => failures.push(format!("{name}: {e}")),
        }
    }
    for (name, _, _) in EXPECTED_FAILURES {
        if !all.iter().any(|c| c.describe() == *name) {
            failures.push(format!(
                "{name}: listed in EXPECTED_FAILURES but no case has this description"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ between graph round trips and eager execution:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn comparison_is_bitwise() {
    assert!(same_bits(&s(f32::NAN), &s(f32::NAN)));
    assert!(!same_bits(&s(f32::NAN), &s(-f32::NAN)));
    assert!(!same_bits(&s(0.0f32), &s(-0.0f32)));
    assert!(!same_bits(&s(1.0f32), &s(1.0f64)));
    assert!(!same_bits(&f32s(&[2, 3]), &f32s(&[3, 2])));
    assert!(same_bits(&strs(&[4]), &strs(&[4])));
    assert!(!same_bits(&strs(&[2]), &str_list(&[2], &["a", "x"])));
    assert!(!same_bits(
        &handles(&[1]),
        &Tensor::zeros(DataType::Resource, &[1]).unwrap()
    ));
}

#[test]
fn every_op_with_a_cpu_kernel_has_a_case() {
    opforge::opforge_ops::link();
    let kernels = KernelRegistry::global();
    let covered: BTreeSet<&str> = cases()
        .iter()
        .map(|c| c.op)
        .chain(COVERED_ELSEWHERE.iter().map(|(op, _)| *op))
        .collect();
    let with_kernel: Vec<String> = OpRegistry::global()
        .names()
        .into_iter()
        .filter(|op| {
            kernels
                .kernels_for(op)
                .iter()
                .any(|k| k.def.device_type == "CPU")
        })
        .collect();
    assert!(
        with_kernel.iter().any(|op| op == "MatMul"),
        "the standard op library is not linked: {with_kernel:?}"
    );
    let missing: Vec<&String> = with_kernel
        .iter()
        .filter(|op| !covered.contains(op.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "ops with a CPU kernel but no graph round-trip case (add one to cases() in tests/graph_roundtrip.rs): {missing:?}"
    );
    let stale: Vec<&&str> = covered
        .iter()
        .filter(|op| !with_kernel.iter().any(|k| k == *op))
        .collect();
    assert!(
        stale.is_empty(),
        "cases for ops without a CPU kernel: {stale:?}"
    );
}

// ---- Ops with dedicated tests ---------------------------------------------

/// A graph as built, and after each round trip (names get `trip.prefix()`).
fn every_trip(g: Graph) -> Vec<(Trip, Graph)> {
    let def = g.to_graph_def();
    let imported = [Trip::Binary, Trip::Text].map(|trip| (trip, import(&def, trip).unwrap()));
    std::iter::once((Trip::Built, g)).chain(imported).collect()
}

/// Runs a session of a graph after `trip`, with names given unprefixed.
fn run_named(
    sess: &Session,
    trip: Trip,
    feeds: &[(String, Tensor)],
    fetches: &[&str],
    targets: &[&str],
) -> opforge::Result<Vec<Tensor>> {
    let p = trip.prefix();
    let feeds: Vec<(String, Tensor)> = feeds
        .iter()
        .map(|(n, t)| (format!("{p}{n}"), t.clone()))
        .collect();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<String> = fetches.iter().map(|n| format!("{p}{n}")).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let targets: Vec<String> = targets.iter().map(|n| format!("{p}{n}")).collect();
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    sess.run_by_name(&feeds, &fetches, &targets)
}

#[test]
fn placeholders_fed_and_unfed() {
    let ctx = eager();
    let value = f32s(&[2]);
    let placeholder = |name| {
        NodeSpec::new("Placeholder", name)
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[2]))
    };
    let eager_err = ctx
        .op("Placeholder")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[2]))
        .run1()
        .unwrap_err();
    let mut g = Graph::new();
    g.add(placeholder("Placeholder")).unwrap();
    for (trip, g) in every_trip(g) {
        let sess = Session::new(g).unwrap();
        // Unfed: the error eager execution (which cannot feed it) gives.
        let e = run_named(&sess, trip, &[], &["Placeholder:0"], &[]).unwrap_err();
        assert_eq!(
            (e.code(), eager_err.code()),
            (Code::InvalidArgument, Code::InvalidArgument)
        );
        let p = trip.prefix();
        let want = format!("You must feed a value for placeholder tensor '{p}Placeholder' with dtype float and shape [2]");
        assert!(e.message().starts_with(&want), "{trip:?}: {e}");
        assert!(
            eager_err.message().starts_with(&want.replace(p, "")),
            "{eager_err}"
        );
        // Fed: the fed value, bit for bit.
        let feed = [("Placeholder:0".to_string(), value.clone())];
        let out = run_named(&sess, trip, &feed, &["Placeholder:0"], &[]).unwrap();
        assert!(same_bits(&out[0], &value), "{trip:?}: {out:?}");
    }
}

/// The updates of `variable_sequence`, in order.
const UPDATES: [&str; 3] = [
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
];

/// Creates a variable, assigns, assign-adds and assign-subs `values`,
/// applies a gradient-descent step (alpha 2, delta `values[1]`), reads it,
/// destroys it and reads it again, eagerly and in a graph (ordered by
/// control edges, with the values in `Const`s or fed `Placeholder`s).
fn variable_sequence(values: [Tensor; 3], fed: bool) {
    let ctx = eager();
    let dtype = values[0].dtype();
    let handle_attrs = [
        ("shared_name", "v".into_attr_value()),
        ("dtype", dtype.into_attr_value()),
        ("shape", shape(values[0].dims()).into_attr_value()),
    ];
    // Eagerly.
    let h = handle_attrs
        .iter()
        .fold(ctx.op("VarHandleOp"), |o, (k, v)| o.attr(k, v.clone()))
        .run1()
        .unwrap();
    for (update, v) in UPDATES.into_iter().zip(&values) {
        ctx.op(update)
            .input(h.clone())
            .input(v.clone())
            .run()
            .unwrap();
    }
    let alpha = ctx
        .op("Cast")
        .input(Tensor::scalar(2i32))
        .attr("DstT", dtype)
        .run1()
        .unwrap();
    ctx.op("ResourceApplyGradientDescent")
        .input(h.clone())
        .input(alpha.clone())
        .input(values[1].clone())
        .run()
        .unwrap();
    let read = || {
        ctx.op("ReadVariableOp")
            .input(h.clone())
            .attr("dtype", dtype)
            .run1()
    };
    let value = read().unwrap();
    ctx.op("DestroyResourceOp").input(h.clone()).run().unwrap();
    let gone = read().unwrap_err();
    // As a graph.
    let mut g = Graph::new();
    let spec = handle_attrs
        .iter()
        .fold(NodeSpec::new("VarHandleOp", "h"), |n, (k, v)| {
            n.attr(k, v.clone())
        });
    let hid = g.add(spec).unwrap();
    let mut feeds = Vec::new();
    let mut prev = Vec::new();
    for (i, (update, v)) in UPDATES.into_iter().zip(&values).enumerate() {
        let name = format!("value{i}");
        let src = if fed {
            feeds.push((format!("{name}:0"), v.clone()));
            NodeSpec::new("Placeholder", &name).attr("dtype", dtype)
        } else {
            NodeSpec::new("Const", &name)
                .attr("value", v)
                .attr("dtype", dtype)
        };
        let vid = g.add(src).unwrap();
        let mut spec = NodeSpec::new(update, update).input(hid).input(vid);
        spec.control_inputs = prev;
        prev = vec![g.add(spec).unwrap()];
    }
    let aid = g
        .add(
            NodeSpec::new("Const", "alpha")
                .attr("value", &alpha)
                .attr("dtype", dtype),
        )
        .unwrap();
    let mut spec = NodeSpec::new("ResourceApplyGradientDescent", "sgd")
        .input(hid)
        .input(aid)
        .input(Output::new(g.find("value1").unwrap(), 0));
    spec.control_inputs = prev;
    prev = vec![g.add(spec).unwrap()];
    for (op, name) in [
        ("ReadVariableOp", "read"),
        ("DestroyResourceOp", "destroy"),
        ("ReadVariableOp", "read_gone"),
    ] {
        let mut spec = NodeSpec::new(op, name).input(hid);
        if op == "ReadVariableOp" {
            spec = spec.attr("dtype", dtype);
        }
        spec.control_inputs = prev;
        prev = vec![g.add(spec).unwrap()];
    }
    for (trip, g) in every_trip(g) {
        let sess = Session::new(g).unwrap();
        // Twice: the second run's assign re-creates the destroyed variable.
        for _ in 0..2 {
            let out = run_named(&sess, trip, &feeds, &["h:0", "read:0"], &["destroy"]).unwrap();
            let handles = (out[0].resource_handles(), h.resource_handles());
            assert!(same_bits(&out[0], &h), "{trip:?}: handle {handles:?}");
            assert!(
                same_bits(&out[1], &value),
                "{trip:?}: read {:?}, eager {value:?}",
                out[1]
            );
        }
        let e = run_named(&sess, trip, &feeds, &["read_gone:0"], &[]).unwrap_err();
        assert_eq!(e.code(), gone.code(), "{trip:?}: {e}, eager {gone}");
    }
}

#[test]
fn variables() {
    variable_sequence([fin32(&[2, 2]), f32s(&[2, 2]), f32b(&[2, 2])], false);
    variable_sequence([fin64(&[3]), f64s(&[3]), f64b(&[3])], true);
    variable_sequence([i32s(&[4]), i32nz(&[4]), t(&[4], &[7i32; 4])], false);
    variable_sequence([s(i64::MAX), s(1i64), s(-5i64)], true);
    variable_sequence([c64s(&[2]), c64s(&[2]), c64s(&[2])], false);
}
