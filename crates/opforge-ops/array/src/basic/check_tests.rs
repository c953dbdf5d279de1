//! Tests of `GuaranteeConst` and `CheckNumerics`.

use half::{bf16, f16};
use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
use opforge_core::{Code, DataType, Tensor};
use opforge_testing::util::{check, ctx, t, weighted, X};

fn check_numerics(x: Tensor, message: &str) -> opforge_core::Result<Tensor> {
    ctx()
        .op("CheckNumerics")
        .input(x)
        .attr("message", message)
        .run1()
}

#[track_caller]
fn assert_invalid(r: opforge_core::Result<Tensor>, want: &str) {
    let e = r.expect_err("CheckNumerics must fail");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    // Eager execution appends TensorFlow's ` [Op:CheckNumerics]`.
    assert_eq!(e.message(), format!("{want} [Op:CheckNumerics]"));
}

#[test]
fn guarantee_const_forwards_every_dtype() {
    let cases = [
        t(&[2, 2], vec![1.5f32, -2.0, 0.0, 7.25]),
        t(&[3], vec![1i64, -2, 3]),
        t(&[0, 4], Vec::<f64>::new()),
        Tensor::scalar(true),
        Tensor::from_strings(&[2], vec![b"a".to_vec(), b"".to_vec()]).unwrap(),
        t(&[2], vec![f16::from_f32(1.5), f16::NAN]),
    ];
    for x in cases {
        let y = ctx().op("GuaranteeConst").input(x.clone()).run1().unwrap();
        assert_eq!(y.dtype(), x.dtype());
        assert_eq!(y.dims(), x.dims());
        assert_eq!(format!("{y:?}"), format!("{x:?}"));
    }
}

#[test]
fn check_numerics_passes_finite_values_through() {
    let x = t(
        &[2, 3],
        vec![1.0f32, -0.0, f32::MAX, f32::MIN_POSITIVE, -3.5, 1e-45],
    );
    let y = check_numerics(x.clone(), "m").unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), x.flat::<f32>().unwrap());
    let y = check_numerics(t(&[2], vec![f64::MAX, -1e-300]), "m").unwrap();
    assert_eq!(y.flat::<f64>().unwrap(), &[f64::MAX, -1e-300]);
    let y = check_numerics(t(&[1], vec![f16::MAX]), "m").unwrap();
    assert_eq!(y.flat::<f16>().unwrap(), &[f16::MAX]);
    let y = check_numerics(t(&[1], vec![bf16::MIN]), "m").unwrap();
    assert_eq!(y.flat::<bf16>().unwrap(), &[bf16::MIN]);
    // Empty and scalar tensors.
    let y = check_numerics(t(&[0, 3], Vec::<f32>::new()), "m").unwrap();
    assert_eq!(y.dims(), &[0, 3]);
    let y = check_numerics(Tensor::scalar(2.5f64), "m").unwrap();
    assert_eq!(y.flat::<f64>().unwrap(), &[2.5]);
}

#[test]
fn check_numerics_reports_nan_and_inf_as_tensorflow() {
    let m = "my check";
    for (x, what) in [
        (t(&[3], vec![1.0f32, f32::NAN, 2.0]), "NaN"),
        (t(&[2], vec![f32::NEG_INFINITY, 0.0]), "Inf"),
        (t(&[3], vec![f32::INFINITY, 0.0, f32::NAN]), "Inf and NaN"),
        (t(&[2], vec![f64::NAN, f64::NAN]), "NaN"),
        (t(&[1, 1], vec![f64::INFINITY]), "Inf"),
        (t(&[2], vec![f16::NAN, f16::INFINITY]), "Inf and NaN"),
        (t(&[1], vec![f16::NEG_INFINITY]), "Inf"),
        (t(&[2], vec![bf16::ONE, bf16::NAN]), "NaN"),
        (t(&[2], vec![bf16::INFINITY, bf16::NAN]), "Inf and NaN"),
    ] {
        assert_invalid(
            check_numerics(x, m),
            &format!("my check : Tensor had {what} values"),
        );
    }
    assert_invalid(
        check_numerics(Tensor::scalar(f32::NAN), ""),
        " : Tensor had NaN values",
    );
}

#[test]
fn check_numerics_takes_only_floats() {
    let e = check_numerics(t(&[1], vec![1i32]), "m").unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    for dt in [
        DataType::Half,
        DataType::BFloat16,
        DataType::Float,
        DataType::Double,
    ] {
        assert!(opforge_core::Registry::global()
            .kernels_for("CheckNumerics")
            .iter()
            .any(|k| k.def.device_type == "CPU"
                && k.def
                    .constraints
                    .iter()
                    .any(|(_, allowed)| allowed.contains(&dt))));
    }
}

#[test]
fn check_numerics_gradient() {
    check(
        "CheckNumerics",
        &|o, x| {
            let y = o.op1(
                "CheckNumerics",
                &[x[0]],
                &[("message", "fwd".into_attr_value())],
            )?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
    // The gradient is itself checked, with TensorFlow's message.
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[2], vec![1.0f32, 2.0]));
    let y = tape
        .op1(
            "CheckNumerics",
            &[x],
            &[("message", "fwd".into_attr_value())],
        )
        .unwrap();
    let inf = tape.constant(t(&[2], vec![f32::INFINITY, 1.0])).unwrap();
    let z = tape.mul(y, inf).unwrap();
    let e = tape.gradient(z, &[x]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message().contains(
            "Not a number (NaN) or infinity (Inf) values detected in gradient. fwd : Tensor had Inf values"
        ),
        "{e}"
    );
}
