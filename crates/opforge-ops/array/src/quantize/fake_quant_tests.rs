//! Tests of the FakeQuant kernels and gradients: outputs bit for bit
//! against TensorFlow 2.21 (vectors.rs), every check, empty inputs, the
//! shape functions against the kernels.

use super::vectors::*;
use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{Gradient, GradientFn, GradientTape, Ops, OpsExt};
use opforge_core::proto::AttrValue;
use opforge_core::{Code, Result, Tensor};
use opforge_testing::util::{ctx, t};

/// Runs `op` on `inputs` with `attrs`, returning every output.
pub(super) fn run(
    op: &str,
    inputs: Vec<Tensor>,
    attrs: &[(&str, AttrValue)],
) -> Result<Vec<Tensor>> {
    let mut call = ctx().op(op);
    for x in inputs {
        call = call.input(x);
    }
    for (k, v) in attrs {
        call = call.attr(k, v.clone());
    }
    call.run()
}

/// Asserts `got` (float) equals the bits `want`, any NaN matching any NaN.
pub(super) fn assert_bits(got: &Tensor, want: &[u32], what: &str) {
    let got = got.flat::<f32>().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, &w)) in got.iter().zip(want).enumerate() {
        let w = f32::from_bits(w);
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

fn quant_attrs(bits: i64, narrow: bool) -> Vec<(&'static str, AttrValue)> {
    vec![
        ("num_bits", bits.into_attr_value()),
        ("narrow_range", narrow.into_attr_value()),
    ]
}

fn args_attrs(min: f32, max: f32, bits: i64, narrow: bool) -> Vec<(&'static str, AttrValue)> {
    let mut a = quant_attrs(bits, narrow);
    a.push(("min", min.into_attr_value()));
    a.push(("max", max.into_attr_value()));
    a
}

fn x() -> Tensor {
    t(&[X.len() as i64], X.to_vec())
}

fn g() -> Tensor {
    t(&[G.len() as i64], G.to_vec())
}

#[test]
fn args_matches_tensorflow() {
    for (i, &(min, max, bits, narrow)) in CONFIGS.iter().enumerate() {
        let what = format!("config {i}");
        let attrs = args_attrs(min, max, bits, narrow);
        let y = run("FakeQuantWithMinMaxArgs", vec![x()], &attrs).unwrap();
        assert_bits(&y[0], &ARGS[i], &what);
        let y = run("FakeQuantWithMinMaxArgsGradient", vec![g(), x()], &attrs).unwrap();
        assert_bits(&y[0], &ARGS_GRAD[i], &what);
    }
}

#[test]
fn vars_matches_tensorflow() {
    for (i, &(min, max, bits, narrow)) in CONFIGS.iter().enumerate() {
        let what = format!("config {i}");
        let attrs = quant_attrs(bits, narrow);
        let (mn, mx) = (Tensor::scalar(min), Tensor::scalar(max));
        let y = run(
            "FakeQuantWithMinMaxVars",
            vec![x(), mn.clone(), mx.clone()],
            &attrs,
        )
        .unwrap();
        assert_bits(&y[0], &VARS[i], &what);
        let y = run(
            "FakeQuantWithMinMaxVarsGradient",
            vec![g(), x(), mn, mx],
            &attrs,
        )
        .unwrap();
        let (bx, bmin, bmax) = &VARS_GRAD[i];
        assert_bits(&y[0], bx, &what);
        assert_eq!(y[1].dims(), &[] as &[i64]);
        assert_bits(&y[1], &[*bmin], &what);
        assert_bits(&y[2], &[*bmax], &what);
    }
    // Ranges that do not contain 0 (nudged to contain it), and empty ones.
    for (min, max, want) in VARS_ODD {
        let y = run(
            "FakeQuantWithMinMaxVars",
            vec![x(), Tensor::scalar(min), Tensor::scalar(max)],
            &[],
        )
        .unwrap();
        assert_bits(&y[0], &want, &format!("[{min}, {max}]"));
    }
}

#[test]
fn per_channel_matches_tensorflow() {
    let xc = t(&[11, 3], X.to_vec());
    let gc = t(&[11, 3], G.to_vec());
    let (mn, mx) = (t(&[3], PC_MIN.to_vec()), t(&[3], PC_MAX.to_vec()));
    for (i, (bits, narrow)) in [(8, false), (4, true), (16, false)].into_iter().enumerate() {
        let what = format!("{bits} bits, narrow {narrow}");
        let attrs = quant_attrs(bits, narrow);
        let y = run(
            "FakeQuantWithMinMaxVarsPerChannel",
            vec![xc.clone(), mn.clone(), mx.clone()],
            &attrs,
        )
        .unwrap();
        assert_eq!(y[0].dims(), &[11, 3]);
        assert_bits(&y[0], &PER_CHANNEL[i], &what);
        let y = run(
            "FakeQuantWithMinMaxVarsPerChannelGradient",
            vec![gc.clone(), xc.clone(), mn.clone(), mx.clone()],
            &attrs,
        )
        .unwrap();
        let (bx, bmin, bmax) = &PER_CHANNEL_GRAD[i];
        assert_bits(&y[0], bx, &what);
        assert_eq!(y[1].dims(), &[3]);
        assert_bits(&y[1], bmin, &what);
        assert_bits(&y[2], bmax, &what);
    }
    // One channel of rank 6 (no rank limit in the kernels).
    let x6 = t(&[1, 1, 1, 1, 2, 1], vec![0.3f32, -2.0]);
    let one = |v: f32| t(&[1], vec![v]);
    let y = run(
        "FakeQuantWithMinMaxVarsPerChannel",
        vec![x6.clone(), one(-1.0), one(1.0)],
        &[],
    )
    .unwrap();
    let want = run(
        "FakeQuantWithMinMaxVars",
        vec![x6.clone(), Tensor::scalar(-1f32), Tensor::scalar(1f32)],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), x6.dims());
    assert_eq!(y[0].flat::<f32>().unwrap(), want[0].flat::<f32>().unwrap());
}

#[test]
fn empty_inputs() {
    let e = t(&[0, 3], Vec::<f32>::new());
    let (mn, mx) = (t(&[3], vec![-1f32; 3]), t(&[3], vec![1f32; 3]));
    let y = run(
        "FakeQuantWithMinMaxVarsPerChannel",
        vec![e.clone(), mn.clone(), mx.clone()],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    let y = run(
        "FakeQuantWithMinMaxVarsPerChannelGradient",
        vec![e.clone(), e.clone(), mn, mx],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    assert_eq!(y[1].flat::<f32>().unwrap(), &[0.0; 3]);
    assert_eq!(y[2].flat::<f32>().unwrap(), &[0.0; 3]);
    // Depth 0.
    let z = t(&[2, 0], Vec::<f32>::new());
    let none = t(&[0], Vec::<f32>::new());
    let y = run(
        "FakeQuantWithMinMaxVarsPerChannel",
        vec![z, none.clone(), none],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[2, 0]);
    let y = run(
        "FakeQuantWithMinMaxVarsGradient",
        vec![
            e.clone(),
            e.clone(),
            Tensor::scalar(-1f32),
            Tensor::scalar(1f32),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    assert_eq!(y[1].scalar_value::<f32>().unwrap(), 0.0);
    let y = run("FakeQuantWithMinMaxArgs", vec![e.clone()], &[]).unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
    let y = run("FakeQuantWithMinMaxArgsGradient", vec![e.clone(), e], &[]).unwrap();
    assert_eq!(y[0].dims(), &[0, 3]);
}

fn err(r: Result<Vec<Tensor>>) -> (Code, String) {
    let e = r.unwrap_err();
    (e.code(), e.message().to_string())
}

fn assert_invalid(r: Result<Vec<Tensor>>, msg: &str) {
    let (code, m) = err(r);
    assert_eq!(code, Code::InvalidArgument, "{m}");
    assert!(m.starts_with(msg), "{m:?} does not start with {msg:?}");
}

#[test]
fn checks_and_messages() {
    let x23 = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    let x32 = t(&[3, 2], vec![0f32; 6]);
    let s = Tensor::scalar;
    let v = |n: usize, val: f32| t(&[n as i64], vec![val; n]);
    // Attrs (messages from TensorFlow 2.21).
    assert_invalid(
        run(
            "FakeQuantWithMinMaxArgs",
            vec![x23.clone()],
            &args_attrs(1.0, 1.0, 8, false),
        ),
        "min has to be smaller than max, was: 1 >= 1",
    );
    assert_invalid(
        run(
            "FakeQuantWithMinMaxArgs",
            vec![x23.clone()],
            &args_attrs(f32::NAN, 1.0, 8, false),
        ),
        "min has to be smaller than max, was: nan >= 1",
    );
    // num_bits' range comes from the ops' parameter structs (TensorFlow:
    // "num_bits must be between 2 and 16, inclusive").
    for bits in [1, 17, -3, 1 << 40] {
        assert_invalid(
            run(
                "FakeQuantWithMinMaxArgs",
                vec![x23.clone()],
                &args_attrs(-1.0, 1.0, bits, false),
            ),
            &format!(
                "FakeQuantWithMinMaxArgs: invalid value {bits} for parameter 'num_bits': must \
                 be in [2, 16]"
            ),
        );
        assert_invalid(
            run(
                "FakeQuantWithMinMaxVarsPerChannel",
                vec![x23.clone(), v(3, -1.0), v(3, 1.0)],
                &quant_attrs(bits, false),
            ),
            &format!(
                "FakeQuantWithMinMaxVarsPerChannel: invalid value {bits} for parameter \
                 'num_bits': must be in [2, 16]"
            ),
        );
    }
    assert_invalid(
        run("FakeQuantWithMinMaxArgsGradient", vec![x23.clone(), x32.clone()], &[]),
        "Inputs to operation FakeQuantWithMinMaxArgsGradient of type FakeQuantWithMinMaxArgsGradient \
         must have the same size and shape.  Input 0: [2,3] != input 1: [3,2]",
    );
    // Vars: scalar ranges.
    assert_invalid(
        run(
            "FakeQuantWithMinMaxVars",
            vec![x23.clone(), v(1, 0.0), s(1f32)],
            &[],
        ),
        "`min` must be rank 0 but is rank 1",
    );
    assert_invalid(
        run(
            "FakeQuantWithMinMaxVars",
            vec![x23.clone(), s(0f32), v(1, 1.0)],
            &[],
        ),
        "`max` must be rank 0 but is rank 1",
    );
    assert_invalid(
        run(
            "FakeQuantWithMinMaxVarsGradient",
            vec![x23.clone(), x32.clone(), s(0f32), s(1f32)],
            &[],
        ),
        "gradient and input must be the same size",
    );
    assert_invalid(
        run(
            "FakeQuantWithMinMaxVarsGradient",
            vec![x23.clone(), x23.clone(), v(1, 0.0), s(1f32)],
            &[],
        ),
        "`min` must be rank 0 but is rank 1",
    );
    assert_invalid(
        run(
            "FakeQuantWithMinMaxVarsGradient",
            vec![x23.clone(), x23.clone(), s(0f32), v(1, 1.0)],
            &[],
        ),
        "`max` must be rank 0 but is rank 1",
    );
    // Per channel.
    let pc = "FakeQuantWithMinMaxVarsPerChannel";
    let pcg = "FakeQuantWithMinMaxVarsPerChannelGradient";
    assert_invalid(
        run(pc, vec![x23.clone(), v(2, 0.0), v(3, 1.0)], &[]),
        "min has incorrect size, expected 3 was 2",
    );
    assert_invalid(
        run(pc, vec![x23.clone(), v(3, 0.0), v(2, 1.0)], &[]),
        "max has incorrect size, expected 3 was 2",
    );
    assert_invalid(
        run(pc, vec![x23.clone(), s(0f32), v(3, 1.0)], &[]),
        "`min` must be rank 1 but is rank 0",
    );
    assert_invalid(
        run(
            pc,
            vec![x23.clone(), t(&[1, 3], vec![0f32; 3]), v(3, 1.0)],
            &[],
        ),
        "`min` must be rank 1 but is rank 2",
    );
    assert_invalid(
        run(pc, vec![x23.clone(), v(3, 0.0), s(1f32)], &[]),
        "`max` must be rank 1 but is rank 0",
    );
    // TensorFlow aborts on a scalar input; here it is an error.
    assert_invalid(
        run(pc, vec![s(1f32), v(1, 0.0), v(1, 1.0)], &[]),
        "FakeQuantWithMinMaxVarsPerChannel: `inputs` must be at least rank 1 but is rank 0",
    );
    assert_invalid(
        run(pcg, vec![s(1f32), s(1f32), v(1, 0.0), v(1, 1.0)], &[]),
        "FakeQuantWithMinMaxVarsPerChannelGradient: `inputs` must be at least rank 1",
    );
    assert_invalid(
        run(
            pcg,
            vec![x23.clone(), x32.clone(), v(2, 0.0), v(2, 1.0)],
            &[],
        ),
        "gradient and input must be the same size",
    );
    assert_invalid(
        run(
            pcg,
            vec![x23.clone(), x23.clone(), v(2, 0.0), v(3, 1.0)],
            &[],
        ),
        "min has incorrect size, expected 3 was 2",
    );
    assert_invalid(
        run(
            pcg,
            vec![x23.clone(), x23.clone(), v(3, 0.0), v(2, 1.0)],
            &[],
        ),
        "max has incorrect size, expected 3 was 2",
    );
    assert_invalid(
        run(pcg, vec![x23.clone(), x23, s(0f32), v(3, 1.0)], &[]),
        "`min` must be rank 1 but is rank 0",
    );
    // Float only.
    let d = t(&[1], vec![1f64]);
    assert_eq!(
        err(run("FakeQuantWithMinMaxArgs", vec![d], &[])).0,
        Code::InvalidArgument
    );
}

#[test]
fn shape_functions_agree_with_the_kernels() {
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::{infer_error, infer_ok};
    let op = ShapeTestOp::new("FakeQuantWithMinMaxArgs");
    infer_ok!(op, "?", "in0");
    infer_ok!(op, "[2,?]", "in0");
    let op = ShapeTestOp::new("FakeQuantWithMinMaxArgsGradient");
    // TensorFlow: input 0's shape, unmerged.
    infer_ok!(op, "[?,3];[2,?]", "in0");
    infer_ok!(op, "?;[2,4]", "in0");
    let op = ShapeTestOp::new("FakeQuantWithMinMaxVarsGradient");
    infer_ok!(op, "[?,3];[2,?];?;?", "[d1_0,d0_1];[];[]");
    infer_ok!(op, "?;?;?;?", "in0;[];[]");
    infer_error!(
        op,
        "[2,3];[2,4];[];[]",
        "Dimension 1 in both shapes must be equal, but are 3 and 4"
    );
    infer_error!(
        op,
        "[2,3];[2,3];[1];[]",
        "Shape must be rank 0 but is rank 1"
    );
    infer_error!(
        op,
        "[2,3];[2,3];[];[1]",
        "Shapes must be equal rank, but are 0 and 1"
    );
    // The kernels' output shapes are what the shape functions say.
    let x = t(&[4, 1, 2], vec![0.5f32; 8]);
    let y = run(
        "FakeQuantWithMinMaxVarsGradient",
        vec![
            x.clone(),
            x.clone(),
            Tensor::scalar(-1f32),
            Tensor::scalar(1f32),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[4, 1, 2]);
    assert_eq!(y[1].dims(), &[] as &[i64]);
    let y = run(
        "FakeQuantWithMinMaxVarsPerChannelGradient",
        vec![
            x.clone(),
            x.clone(),
            t(&[2], vec![-1f32; 2]),
            t(&[2], vec![1f32; 2]),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(y[0].dims(), &[4, 1, 2]);
    assert_eq!(y[1].dims(), &[2]);
    assert_eq!(y[2].dims(), &[2]);
}

#[test]
fn gradients_are_the_gradient_ops() {
    // Values from TensorFlow 2.21's tape.
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[10, 3], X[..30].to_vec()));
    let (a, b) = (
        tape.watch(Tensor::scalar(-0.4f32)),
        tape.watch(Tensor::scalar(1.1f32)),
    );
    let y = tape
        .op1(
            "FakeQuantWithMinMaxVars",
            &[x, a, b],
            &[("num_bits", 4i64.into_attr_value())],
        )
        .unwrap();
    let w = tape.constant(t(&[10, 3], G[..30].to_vec())).unwrap();
    let z = tape.mul(y, w).unwrap();
    let gs = tape.gradient(z, &[x, a, b]).unwrap();
    let (gx, ga, gb) = &TAPE_VARS;
    assert_bits(tape.value(gs[0].unwrap()).unwrap(), gx, "d/dx");
    assert_bits(tape.value(gs[1].unwrap()).unwrap(), &[*ga], "d/dmin");
    assert_bits(tape.value(gs[2].unwrap()).unwrap(), &[*gb], "d/dmax");

    // Args and per channel: the gradient ops' outputs, with the attrs.
    let mut tape = GradientTape::new(ctx(), false);
    let xs = tape.watch(x_tensor());
    let attrs = args_attrs(-0.4, 1.1, 2, false);
    let attr_refs: Vec<(&str, AttrValue)> = attrs.clone();
    let y = tape
        .op1("FakeQuantWithMinMaxArgs", &[xs], &attr_refs)
        .unwrap();
    let w = tape.constant(g()).unwrap();
    let z = tape.mul(y, w).unwrap();
    let gx = tape.gradient(z, &[xs]).unwrap()[0].unwrap();
    assert_bits(tape.value(gx).unwrap(), &ARGS_GRAD[1], "args");

    let mut tape = GradientTape::new(ctx(), false);
    let xs = tape.watch(t(&[11, 3], X.to_vec()));
    let mn = tape.watch(t(&[3], PC_MIN.to_vec()));
    let mx = tape.watch(t(&[3], PC_MAX.to_vec()));
    let y = tape
        .op1("FakeQuantWithMinMaxVarsPerChannel", &[xs, mn, mx], &[])
        .unwrap();
    let w = tape.constant(t(&[11, 3], G.to_vec())).unwrap();
    let z = tape.mul(y, w).unwrap();
    let gs = tape.gradient(z, &[xs, mn, mx]).unwrap();
    let (bx, bmin, bmax) = &PER_CHANNEL_GRAD[0];
    assert_bits(tape.value(gs[0].unwrap()).unwrap(), bx, "per channel x");
    assert_bits(tape.value(gs[1].unwrap()).unwrap(), bmin, "per channel min");
    assert_bits(tape.value(gs[2].unwrap()).unwrap(), bmax, "per channel max");
}

fn x_tensor() -> Tensor {
    x()
}

#[test]
fn gradient_ops_are_not_differentiable() {
    let reg = opforge_core::registry::Registry::global();
    for op in [
        "FakeQuantWithMinMaxArgsGradient",
        "FakeQuantWithMinMaxVarsGradient",
        "FakeQuantWithMinMaxVarsPerChannelGradient",
    ] {
        assert!(
            matches!(
                reg.attr::<Gradient>(op).as_deref(),
                Some(GradientFn::NotDifferentiable)
            ),
            "{op}"
        );
    }
}

/// The FakeQuant ops' attrs come from their parameter structs: TensorFlow's
/// attrs exactly (written out here as TensorFlow's specs), with the
/// fields' descriptions as docs, which the Python docstring shows.
#[test]
fn attrs_come_from_the_parameter_structs() {
    use opforge_core::op_def::parse_attr_spec;
    use opforge_core::signature::python_docstring;
    let registry = opforge_core::Registry::global();
    let grid = ["num_bits: int = 8", "narrow_range: bool = false"];
    let args = [&["min: float = -6.0", "max: float = 6.0"][..], &grid].concat();
    for (op, specs) in [
        ("FakeQuantWithMinMaxArgs", &args[..]),
        ("FakeQuantWithMinMaxArgsGradient", &args[..]),
        ("FakeQuantWithMinMaxVars", &grid[..]),
        ("FakeQuantWithMinMaxVarsGradient", &grid[..]),
        ("FakeQuantWithMinMaxVarsPerChannel", &grid[..]),
        ("FakeQuantWithMinMaxVarsPerChannelGradient", &grid[..]),
    ] {
        let def = registry.op_def(op).unwrap();
        assert_eq!(def.attr.len(), specs.len(), "{op}");
        for (got, spec) in def.attr.iter().zip(specs) {
            let mut want = parse_attr_spec(spec).unwrap();
            want.description = got.description.clone();
            assert_eq!(*got, want, "{op}: {spec}");
            assert!(!got.description.is_empty(), "{op}: {spec}");
        }
    }
    let doc = python_docstring(&registry.op_def("FakeQuantWithMinMaxArgs").unwrap());
    assert!(
        doc.contains(
            "  num_bits: An optional `int`. Defaults to `8`.\n    The bit width of the \
             quantization: values are rounded to `2^num_bits` levels.\n"
        ),
        "{doc}"
    );
}

/// The same parameters as MXNet passes them, as strings.
#[test]
fn parameters_from_keyword_strings() {
    use opforge_core::param::{attrs_from_kwargs, ParamFields};
    // Through the op's name alone: its `ParamFields` attribute.
    let fields = opforge_core::Registry::global()
        .attr::<ParamFields>("FakeQuantWithMinMaxArgs")
        .unwrap();
    let kwargs = [
        ("min", "-1"),
        ("max", "1"),
        ("num_bits", "2"),
        ("narrow_range", "True"),
    ];
    let attrs = attrs_from_kwargs("FakeQuantWithMinMaxArgs", &fields, &kwargs).unwrap();
    let attrs: Vec<(&str, AttrValue)> =
        attrs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let x = t(&[4], vec![-2f32, -0.4, 0.4, 2.]);
    let y = run("FakeQuantWithMinMaxArgs", vec![x], &attrs).unwrap();
    // narrow_range with 2 bits: levels 1..=3, the range [-1, 1] in steps of 1.
    assert_eq!(y[0].flat::<f32>().unwrap(), [-1., 0., 0., 1.]);
    let e = attrs_from_kwargs("FakeQuantWithMinMaxArgs", &fields, &[("num_bits", "1")]);
    assert_eq!(
        e.unwrap_err().message(),
        "FakeQuantWithMinMaxArgs: invalid value 1 for parameter 'num_bits': must be in [2, 16]"
    );

    use super::fake_quant::ArgsParams;
    use opforge_core::param::Parameter;
    let ok = ArgsParams::from_kwargs(&[("num_bits", "4"), ("narrow_range", "True"), ("min", "-1")]);
    assert!(ok.is_ok(), "{ok:?}");
    let e =
        ArgsParams::from_op_kwargs("FakeQuantWithMinMaxArgs", &[("num_bits", "32")]).unwrap_err();
    assert_eq!(
        e.message(),
        "FakeQuantWithMinMaxArgs: invalid value 32 for parameter 'num_bits': must be in [2, 16]"
    );
    let e = ArgsParams::from_kwargs(&[("bits", "4")]).unwrap_err();
    assert_eq!(
        e.message(),
        "ArgsParams: unknown parameter 'bits'; known: min, max, num_bits, narrow_range"
    );
}
