//! Tests of `Relu6Grad` and the activations of `activations.rs`: values
//! against closed forms evaluated in `f64` on the inputs as rounded to each
//! dtype, edge values, errors, shape functions and gradients.

use super::activations::*;
use super::defs::relu6_grad;
use super::*;
use half::{bf16, f16};
use opforge_core::Code;
use opforge_testing::util::{assert_close, ctx, t};

// TensorFlow's SELU constants, from the paper (not the kernel's).
const ALPHA: f64 = 1.673_263_242_354_377_284_817_042_991_671_7;
const SCALE: f64 = 1.050_700_987_355_480_493_419_334_985_294_6;

#[derive(Clone, Copy, Debug)]
enum Dt {
    F64,
    F32,
    F16,
    BF16,
}

const DTS: [Dt; 4] = [Dt::F64, Dt::F32, Dt::F16, Dt::BF16];

impl Dt {
    /// `x` rounded to the dtype.
    fn round(self, x: f64) -> f64 {
        match self {
            Dt::F64 => x,
            Dt::F32 => x as f32 as f64,
            Dt::F16 => f16::from_f64(x).to_f64(),
            Dt::BF16 => bf16::from_f64(x).to_f64(),
        }
    }

    fn tensor(self, dims: &[i64], v: &[f64]) -> Tensor {
        match self {
            Dt::F64 => t(dims, v.to_vec()),
            Dt::F32 => t(dims, v.iter().map(|&x| x as f32).collect()),
            Dt::F16 => t(dims, v.iter().map(|&x| f16::from_f64(x)).collect()),
            Dt::BF16 => t(dims, v.iter().map(|&x| bf16::from_f64(x)).collect()),
        }
    }

    /// Relative tolerance of a result against the exact value on the
    /// rounded inputs: a few roundings of the dtype.
    fn tol(self) -> f64 {
        match self {
            Dt::F64 => 1e-14,
            Dt::F32 => 1e-6,
            Dt::F16 => 2e-3,
            Dt::BF16 => 1.6e-2,
        }
    }

    /// Eigen's `NumTraits<T>::epsilon()`.
    fn eps(self) -> f64 {
        match self {
            Dt::F64 => f64::EPSILON,
            Dt::F32 => f32::EPSILON as f64,
            Dt::F16 => 2f64.powi(-10),
            Dt::BF16 => 2f64.powi(-7),
        }
    }
}

/// Inputs on both sides of 0, tiny and large magnitudes, and NaN/inf.
const XS: [f64; 14] = [
    -3.5,
    -1.0,
    -0.25,
    -1e-3,
    -0.0,
    0.0,
    1e-3,
    0.5,
    2.0,
    7.25,
    -20.0,
    30.0,
    f64::NAN,
    f64::NEG_INFINITY,
];

/// Gradients paired with [`XS`] (including a NaN).
const GS: [f64; 14] = [
    1.5,
    -2.0,
    0.75,
    3.0,
    -1.25,
    2.5,
    f64::NAN,
    0.5,
    -4.0,
    1.0,
    2.25,
    -0.5,
    1.0,
    0.125,
];

/// Runs `op` with `attrs` on `inputs` in every float dtype and compares
/// with `want` evaluated on the rounded inputs (NaN where `want` is NaN).
fn check_values(
    op: &str,
    attrs: &[(&str, f32)],
    inputs: &[&[f64]],
    want: impl Fn(Dt, &[f64]) -> f64,
) {
    for dt in DTS {
        let n = inputs[0].len();
        let mut call = ctx().op(op);
        for x in inputs {
            call = call.input(dt.tensor(&[n as i64], x));
        }
        for &(name, v) in attrs {
            call = call.attr(name, v);
        }
        let got = call.run1().unwrap_or_else(|e| panic!("{op} {dt:?}: {e}"));
        let expected: Vec<f64> = (0..n)
            .map(|i| {
                let args: Vec<f64> = inputs.iter().map(|x| dt.round(x[i])).collect();
                want(dt, &args)
            })
            .collect();
        assert_close(&got, &[n as i64], &expected, dt.tol());
    }
}

fn elu_ref(x: f64) -> f64 {
    if x < 0.0 {
        x.exp() - 1.0
    } else {
        x
    }
}

fn selu_ref(x: f64) -> f64 {
    if x < 0.0 {
        SCALE * ALPHA * (x.exp() - 1.0)
    } else {
        SCALE * x
    }
}

/// TensorFlow's softplus with its thresholds for the dtype.
fn softplus_tf(dt: Dt, x: f64) -> f64 {
    let threshold = dt.eps().ln() + 2.0;
    if x > -threshold {
        x
    } else if x < threshold {
        x.exp()
    } else {
        (1.0 + x.exp()).ln()
    }
}

/// `log(1 + e^x)` without overflow.
fn softplus_exact(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

fn alpha32(alpha: f32) -> f64 {
    alpha as f64
}

#[test]
fn opdefs_finalize() {
    for b in [
        relu6_grad(),
        elu(),
        elu_grad(),
        selu(),
        selu_grad(),
        softplus(),
        softplus_grad(),
        softsign(),
        softsign_grad(),
        leaky_relu(),
        leaky_relu_grad(),
    ] {
        let op = b.finalize().unwrap();
        assert_eq!(
            opforge_core::Registry::global().op_def(&op.name).unwrap(),
            op
        );
    }
    // The generated signatures: `T` is inferred, `alpha` defaults to 0.2.
    let op = opforge_core::Registry::global()
        .op_def("LeakyRelu")
        .unwrap();
    assert_eq!(
        opforge_core::signature::python_signature(&op),
        "leaky_relu(features, alpha=0.2, name=None)"
    );
}

#[test]
fn elu_values() {
    check_values("Elu", &[], &[&XS], |_, a| elu_ref(a[0]));
    // expm1, not exp - 1: tiny negatives keep their digits in float32.
    let y = ctx()
        .op("Elu")
        .input(t(&[1], vec![-1e-10f32]))
        .run1()
        .unwrap();
    let v = y.flat::<f32>().unwrap()[0] as f64;
    assert!((v + 1e-10).abs() < 1e-16, "{v}");
    // Saturation at -1, and -0 stays -0.
    let y = ctx()
        .op("Elu")
        .input(t(&[2], vec![-100.0f64, -0.0]))
        .run1()
        .unwrap();
    let v = y.flat::<f64>().unwrap();
    assert_eq!(v[0], -1.0);
    assert!(v[1] == 0.0 && v[1].is_sign_negative());
}

#[test]
fn selu_values() {
    check_values("Selu", &[], &[&XS], |_, a| selu_ref(a[0]));
    let y = ctx()
        .op("Selu")
        .input(t(&[2], vec![-1000.0f64, 1.0]))
        .run1()
        .unwrap();
    assert_close(&y, &[2], &[-SCALE * ALPHA, SCALE], 1e-15);
}

#[test]
fn softplus_values() {
    check_values("Softplus", &[], &[&XS], |dt, a| softplus_tf(dt, a[0]));
    let big = [
        -1000.0,
        -100.0,
        -40.0,
        -34.0,
        -14.0,
        -13.0,
        13.0,
        14.0,
        34.0,
        40.0,
        88.0,
        100.0,
        1e30,
        f64::INFINITY,
    ];
    check_values("Softplus", &[], &[&big], |dt, a| softplus_tf(dt, a[0]));
    // The thresholds are within the dtype's epsilon of the exact softplus,
    // and nothing overflows where exp(x) would.
    for dt in [Dt::F64, Dt::F32] {
        let xs: Vec<f64> = (-400..=400).map(|i| i as f64 * 0.25).collect();
        let y = ctx()
            .op("Softplus")
            .input(dt.tensor(&[801], &xs))
            .run1()
            .unwrap();
        let want: Vec<f64> = xs.iter().map(|&x| softplus_exact(dt.round(x))).collect();
        assert_close(&y, &[801], &want, 4.0 * dt.eps());
    }
    let y = ctx()
        .op("Softplus")
        .input(t(
            &[3],
            vec![f16::from_f32(60000.0), f16::from_f32(-20.0), f16::ZERO],
        ))
        .run1()
        .unwrap();
    assert_close(&y, &[3], &[60000.0, 0.0, std::f64::consts::LN_2], 1e-3);
}

#[test]
fn softsign_values() {
    check_values("Softsign", &[], &[&XS], |_, a| a[0] / (1.0 + a[0].abs()));
    // TensorFlow's formula: inf / inf is NaN.
    let y = ctx()
        .op("Softsign")
        .input(t(&[2], vec![f32::INFINITY, -1e30]))
        .run1()
        .unwrap();
    let v = y.flat::<f32>().unwrap();
    assert!(v[0].is_nan());
    assert_eq!(v[1], -1.0);
}

#[test]
fn leaky_relu_values() {
    let leaky = |alpha: f64| move |_: Dt, a: &[f64]| if a[0] > 0.0 { a[0] } else { alpha * a[0] };
    check_values("LeakyRelu", &[], &[&XS], leaky(alpha32(0.2)));
    for alpha in [0.01f32, 0.5, 1.5, -0.3, 0.0] {
        check_values(
            "LeakyRelu",
            &[("alpha", alpha)],
            &[&XS],
            leaky(alpha32(alpha)),
        );
    }
    // alpha is a float attr: a double kernel uses float(0.2) as TensorFlow's
    // static_cast<double>(float) does.
    let y = ctx()
        .op("LeakyRelu")
        .input(t(&[1], vec![-1.0f64]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f64>().unwrap(), &[-(0.2f32 as f64)]);
}

#[test]
fn gradient_op_values() {
    check_values("EluGrad", &[], &[&GS, &XS], |_, a| {
        if a[1] < 0.0 {
            a[0] * (a[1] + 1.0)
        } else {
            a[0]
        }
    });
    check_values("SeluGrad", &[], &[&GS, &XS], |_, a| {
        if a[1] < 0.0 {
            a[0] * (a[1] + SCALE * ALPHA)
        } else {
            a[0] * SCALE
        }
    });
    check_values("SoftplusGrad", &[], &[&GS, &XS], |_, a| {
        a[0] / (1.0 + (-a[1]).exp())
    });
    check_values("SoftsignGrad", &[], &[&GS, &XS], |_, a| {
        a[0] / ((1.0 + a[1].abs()) * (1.0 + a[1].abs()))
    });
    for alpha in [0.2f32, 0.7, -1.5] {
        let attrs: &[(&str, f32)] = if alpha == 0.2 {
            &[]
        } else {
            &[("alpha", alpha)]
        };
        check_values("LeakyReluGrad", attrs, &[&GS, &XS], |_, a| {
            if a[1] > 0.0 {
                a[0]
            } else {
                alpha32(alpha) * a[0]
            }
        });
    }
    check_values("Relu6Grad", &[], &[&GS, &XS], |_, a| {
        if a[1] > 0.0 && a[1] < 6.0 {
            a[0]
        } else {
            // gradients * 0: a NaN gradient stays NaN.
            a[0] * 0.0
        }
    });
}

#[test]
fn relu6_grad_integer_types() {
    let g = t(&[5], vec![5i32, -6, 7, 8, 9]);
    let f = t(&[5], vec![1i32, 2, -3, 6, 0]);
    let y = ctx().op("Relu6Grad").input(g).input(f).run1().unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[5, -6, 0, 0, 0]);
    let g = t(&[4], vec![3u8, 4, 5, 6]);
    let f = t(&[4], vec![0u8, 5, 6, 200]);
    let y = ctx().op("Relu6Grad").input(g).input(f).run1().unwrap();
    assert_eq!(y.flat::<u8>().unwrap(), &[0, 4, 0, 0]);
    let g = t(&[3], vec![1i64, 2, 3]);
    let f = t(&[3], vec![5i64, 6, -1]);
    let y = ctx().op("Relu6Grad").input(g).input(f).run1().unwrap();
    assert_eq!(y.flat::<i64>().unwrap(), &[1, 0, 0]);
}

#[test]
fn empty_and_large_inputs() {
    for op in ["Elu", "Selu", "Softplus", "Softsign", "LeakyRelu"] {
        let y = ctx()
            .op(op)
            .input(Tensor::zeros(DataType::Float, &[0, 3]).unwrap())
            .run1()
            .unwrap();
        assert_eq!(y.dims(), &[0, 3]);
    }
    for op in [
        "EluGrad",
        "SeluGrad",
        "SoftplusGrad",
        "SoftsignGrad",
        "LeakyReluGrad",
        "Relu6Grad",
    ] {
        let z = Tensor::zeros(DataType::Double, &[2, 0]).unwrap();
        let y = ctx().op(op).input(z.clone()).input(z).run1().unwrap();
        assert_eq!(y.dims(), &[2, 0]);
    }
    // Large inputs take the sharded path.
    let n = 100_000usize;
    let xs: Vec<f64> = (0..n).map(|i| (i as f64 - 50_000.0) * 1e-3).collect();
    let y = ctx()
        .op("Softplus")
        .input(t(&[n as i64], xs.clone()))
        .run1()
        .unwrap();
    let want: Vec<f64> = xs.iter().map(|&x| softplus_tf(Dt::F64, x)).collect();
    assert_close(&y, &[n as i64], &want, 1e-14);
    let g = vec![1.0f64; n];
    let y = ctx()
        .op("EluGrad")
        .input(t(&[n as i64], g))
        .input(t(&[n as i64], xs.clone()))
        .run1()
        .unwrap();
    let want: Vec<f64> = xs
        .iter()
        .map(|&y| if y < 0.0 { y + 1.0 } else { 1.0 })
        .collect();
    assert_close(&y, &[n as i64], &want, 1e-15);
}

#[test]
fn errors() {
    for (op, second) in [
        ("EluGrad", "outputs"),
        ("SeluGrad", "outputs"),
        ("SoftplusGrad", "features"),
        ("SoftsignGrad", "features"),
        ("LeakyReluGrad", "features"),
        ("Relu6Grad", "features"),
    ] {
        let err = ctx()
            .op(op)
            .input(t(&[3], vec![1.0f32; 3]))
            .input(t(&[1, 3], vec![1.0f32; 3]))
            .run1()
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{op}: {err}");
        assert!(
            err.message().contains(&format!(
                "g and a must be the same size: gradients [3] vs. {second} [1,3]"
            )),
            "{op}: {err}"
        );
    }
    // Integer and complex types are not allowed by the OpDefs.
    for op in ["Elu", "Selu", "Softplus", "Softsign", "LeakyRelu"] {
        let err = ctx().op(op).input(t(&[1], vec![1i32])).run1().unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{op}: {err}");
        assert!(
            err.message().contains("Value for attr 'T' of int32"),
            "{err}"
        );
    }
}

// ---- Shape functions ----

mod shapes {
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::{infer_error, infer_ok};

    #[test]
    fn activations_keep_their_input_shape() {
        for op in ["Elu", "Selu", "Softplus", "Softsign", "LeakyRelu"] {
            let o = ShapeTestOp::new(op);
            infer_ok!(o, "?", "in0");
            infer_ok!(o, "[]", "in0");
            infer_ok!(o, "[2,?,3]", "in0");
        }
    }

    #[test]
    fn gradients_merge_both_inputs() {
        for op in [
            "Relu6Grad",
            "EluGrad",
            "SeluGrad",
            "SoftplusGrad",
            "SoftsignGrad",
            "LeakyReluGrad",
        ] {
            let o = ShapeTestOp::new(op);
            infer_ok!(o, "?;?", "in0");
            infer_ok!(o, "?;[2,?]", "in1");
            infer_ok!(o, "[2,?];?", "in0");
            infer_ok!(o, "[2,3];[2,3]", "in0");
            infer_ok!(o, "[2,?];[2,3]", "in1");
            infer_ok!(o, "[2,?];[?,3]", "[d0_0,d1_1]");
            infer_error!(o, "[2];[2,3]", "Shapes must be equal rank, but are 1 and 2");
            infer_error!(
                o,
                "[2,3];[2,4]",
                "Dimension 1 in both shapes must be equal, but are 3 and 4"
            );
        }
    }
}

// ---- Gradients ----

mod grads {
    use super::{ALPHA, SCALE};
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{GradientTape, Ops, OpsExt, Sym};
    use opforge_core::{Result, Tensor};
    use opforge_testing::util::check_gradients as check;
    use opforge_testing::util::{assert_close, ctx, t};

    /// Values on both sides of 0 (and of 6), away from the kinks.
    fn signed(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| [-2.5, 0.7, 3.1, 7.5, -0.4, 5.2, 1.3, -6.0][i % 8] + i as f64 * 0.013)
            .collect()
    }

    /// Values in (-1, 0) and (0, inf), as Elu's outputs are.
    fn elu_outputs(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| [-0.8, 0.7, 3.1, -0.35, 1.9, -0.05][i % 6] + i as f64 * 0.011)
            .collect()
    }

    fn gradients(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| 0.3 + (i * 5 % 7) as f64 * 0.41 - 1.2)
            .collect()
    }

    fn unary(
        op: &'static str,
        attrs: Vec<(&'static str, opforge_core::proto::AttrValue)>,
    ) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0]], &attrs)
    }

    fn binary(
        op: &'static str,
        attrs: Vec<(&'static str, opforge_core::proto::AttrValue)>,
    ) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0], xs[1]], &attrs)
    }

    #[test]
    fn activation_gradients() {
        for op in ["Elu", "Selu", "Softplus", "Softsign", "LeakyRelu", "Relu6"] {
            check(&unary(op, vec![]), &[t(&[2, 4], signed(8))]);
            check(&unary(op, vec![]), &[t(&[3], signed(3))]);
        }
        let alpha = vec![("alpha", 0.35f32.into_attr_value())];
        check(&unary("LeakyRelu", alpha), &[t(&[2, 3], signed(6))]);
        // Softplus far out on both sides (its thresholds).
        let far = vec![-40.0, -15.0, -3.0, 3.0, 15.0, 40.0];
        check(&unary("Softplus", vec![]), &[t(&[6], far)]);
    }

    #[test]
    fn gradient_op_gradients() {
        let n = 6;
        for op in ["EluGrad", "SeluGrad"] {
            check(
                &binary(op, vec![]),
                &[t(&[2, 3], gradients(n)), t(&[2, 3], elu_outputs(n))],
            );
        }
        for op in ["SoftplusGrad", "LeakyReluGrad", "Relu6Grad"] {
            check(
                &binary(op, vec![]),
                &[t(&[2, 3], gradients(n)), t(&[2, 3], signed(n))],
            );
        }
        let alpha = vec![("alpha", 1.7f32.into_attr_value())];
        check(
            &binary("LeakyReluGrad", alpha),
            &[t(&[3], gradients(3)), t(&[3], signed(3))],
        );
    }

    fn grad_of(op: &str, x: Tensor, attrs: &[(&str, f32)]) -> Tensor {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(x);
        let attrs: Vec<_> = attrs
            .iter()
            .map(|&(n, v)| (n, v.into_attr_value()))
            .collect();
        let y = tape.op1(op, &[x], &attrs).unwrap();
        tape.gradient_tensors(y, &[x])
            .unwrap()
            .pop()
            .unwrap()
            .unwrap()
    }

    #[test]
    fn hand_checked_gradients() {
        let xs = vec![-2.0f64, -0.5, 0.5, 3.0];
        let g = grad_of("Elu", t(&[4], xs.clone()), &[]);
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| if x < 0.0 { x.exp() } else { 1.0 })
            .collect();
        assert_close(&g, &[4], &want, 1e-15);
        let g = grad_of("Selu", t(&[4], xs.clone()), &[]);
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| SCALE * if x < 0.0 { ALPHA * x.exp() } else { 1.0 })
            .collect();
        assert_close(&g, &[4], &want, 1e-15);
        let g = grad_of("Softplus", t(&[4], xs.clone()), &[]);
        let want: Vec<f64> = xs.iter().map(|&x| 1.0 / (1.0 + (-x).exp())).collect();
        assert_close(&g, &[4], &want, 1e-15);
        let g = grad_of("Softsign", t(&[4], xs.clone()), &[]);
        let want: Vec<f64> = xs.iter().map(|&x| 1.0 / (1.0 + x.abs()).powi(2)).collect();
        assert_close(&g, &[4], &want, 1e-15);
        let g = grad_of("LeakyRelu", t(&[4], xs.clone()), &[("alpha", 0.3)]);
        let a = 0.3f32 as f64;
        assert_close(&g, &[4], &[a, a, 1.0, 1.0], 0.0);
        let g = grad_of("LeakyRelu", t(&[4], xs), &[]);
        let a = 0.2f32 as f64;
        assert_close(&g, &[4], &[a, a, 1.0, 1.0], 0.0);
        // Relu6's gradient is Relu6Grad of its output: blocked at 0 and 6.
        let g = grad_of("Relu6", t(&[5], vec![-1.0f32, 0.5, 3.0, 6.5, 7.0]), &[]);
        assert_close(&g, &[5], &[0.0, 1.0, 1.0, 0.0, 0.0], 0.0);
    }

    /// The second derivative through the registered `*Grad` gradients:
    /// d/dx of (d/dx sum(f(x))) for the smooth activations.
    #[test]
    fn second_derivatives() {
        let xs = vec![-1.5f64, -0.25, 0.75, 2.0];
        let second = |op: &str| -> Tensor {
            let mut tape = GradientTape::new(ctx(), true);
            let x = tape.watch(t(&[4], xs.clone()));
            let y = tape.op1(op, &[x], &[]).unwrap();
            let dy = tape.constant(t(&[4], vec![1.0f64; 4])).unwrap();
            let records = tape.records_snapshot();
            let dx = opforge_core::autodiff::backprop(&mut tape, &records, &[y], &[Some(dy)], &[x])
                .unwrap()[0]
                .unwrap();
            let records = tape.records_snapshot();
            let seed = tape.constant(t(&[4], vec![1.0f64; 4])).unwrap();
            let ddx =
                opforge_core::autodiff::backprop(&mut tape, &records, &[dx], &[Some(seed)], &[x])
                    .unwrap()[0]
                    .unwrap();
            tape.value(ddx).unwrap().clone()
        };
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| if x < 0.0 { x.exp() } else { 0.0 })
            .collect();
        assert_close(&second("Elu"), &[4], &want, 1e-14);
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| {
                if x < 0.0 {
                    SCALE * ALPHA * x.exp()
                } else {
                    0.0
                }
            })
            .collect();
        assert_close(&second("Selu"), &[4], &want, 1e-14);
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| {
                let s = 1.0 / (1.0 + (-x).exp());
                s * (1.0 - s)
            })
            .collect();
        assert_close(&second("Softplus"), &[4], &want, 1e-14);
    }
}

/// `LeakyRelu`'s attr reaches the kernel.
#[test]
fn leaky_relu_alpha_attr_value() {
    let y = ctx()
        .op("LeakyRelu")
        .input(t(&[2], vec![-2.0f32, 2.0]))
        .attr("alpha", 0.5f32)
        .run1()
        .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[-1.0, 2.0]);
}
