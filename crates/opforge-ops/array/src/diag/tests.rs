//! Kernel and gradient tests of the diagonal ops: expected values written
//! out by hand.

use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::autodiff::OpsExt;
use opforge_core::{Code, DataType, Registry, Tensor};
use opforge_testing::util::{assert_close, check, ctx, t, weighted, X};

fn run1(op: &str, inputs: Vec<Tensor>) -> opforge_core::Result<Tensor> {
    let mut call = ctx().op(op);
    for x in inputs {
        call = call.input(x);
    }
    call.run1()
}

#[track_caller]
fn assert_invalid(r: opforge_core::Result<Tensor>, text: &str) {
    let e = r.expect_err("the op must fail");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains(text), "{e} does not contain {text:?}");
}

#[test]
fn diag_of_ranks_1_to_3() {
    let y = run1("Diag", vec![t(&[3], vec![1.0f32, 2.0, 3.0])]).unwrap();
    assert_close(&y, &[3, 3], &[1., 0., 0., 0., 2., 0., 0., 0., 3.], 0.0);
    // [[1, 2], [3, 4]] -> shape [2, 2, 2, 2], out[i, j, i, j] = d[i, j].
    let y = run1("Diag", vec![t(&[2, 2], vec![1i32, 2, 3, 4])]).unwrap();
    assert_eq!(y.dims(), &[2, 2, 2, 2]);
    let mut want = [0i32; 16];
    for (i, v) in [1, 2, 3, 4].into_iter().enumerate() {
        want[i * 5] = v;
    }
    assert_eq!(y.flat::<i32>().unwrap(), &want);
    let y = run1("Diag", vec![t(&[1, 2, 1], vec![7i64, -8])]).unwrap();
    assert_eq!(y.dims(), &[1, 2, 1, 1, 2, 1]);
    assert_eq!(y.flat::<i64>().unwrap(), &[7, 0, 0, -8]);
    // Empty diagonal.
    let y = run1("Diag", vec![t(&[0], Vec::<f64>::new())]).unwrap();
    assert_eq!(y.dims(), &[0, 0]);
    assert_invalid(
        run1("Diag", vec![Tensor::scalar(1.0f32)]),
        "Input must be at least rank 1, got 0",
    );
}

#[test]
fn diag_part_inverts_diag() {
    let x = t(&[3, 3], vec![1.0f64, 2., 3., 4., 5., 6., 7., 8., 9.]);
    let y = run1("DiagPart", vec![x]).unwrap();
    assert_close(&y, &[3], &[1., 5., 9.], 0.0);
    let x = t(&[2, 1, 2, 1], vec![1i32, 2, 3, 4]);
    assert_eq!(
        run1("DiagPart", vec![x]).unwrap().flat::<i32>().unwrap(),
        &[1, 4]
    );
    let y = run1("DiagPart", vec![t(&[0, 0], Vec::<f32>::new())]).unwrap();
    assert_eq!(y.dims(), &[0]);
    // rank 6 <-> rank 3
    let d = t(&[2, 1, 2], vec![1.5f32, -2.5, 3.5, 4.5]);
    let back = run1("DiagPart", vec![run1("Diag", vec![d]).unwrap()]).unwrap();
    assert_close(&back, &[2, 1, 2], &[1.5, -2.5, 3.5, 4.5], 0.0);
}

#[test]
fn diag_part_checks_as_tensorflow() {
    assert_invalid(
        run1("DiagPart", vec![t(&[2, 2, 2], vec![0f32; 8])]),
        "The rank of the tensor should be even and positive, got shape [2,2,2]",
    );
    assert_invalid(
        run1("DiagPart", vec![Tensor::scalar(1f32)]),
        "The rank of the tensor should be even and positive, got shape []",
    );
    assert_invalid(
        run1("DiagPart", vec![t(&[2, 3, 2, 2], vec![0f32; 24])]),
        "Invalid shape [2,3,2,2]: dimensions 1 and 3 do not match.",
    );
}

#[test]
fn diag_every_dtype() {
    let y = run1("Diag", vec![t(&[2], vec![f16::ONE, f16::NEG_ONE])]).unwrap();
    assert_eq!(
        y.flat::<f16>().unwrap(),
        &[f16::ONE, f16::ZERO, f16::ZERO, f16::NEG_ONE]
    );
    let y = run1("Diag", vec![t(&[2], vec![bf16::ONE, bf16::MAX])]).unwrap();
    assert_eq!(
        y.flat::<bf16>().unwrap(),
        &[bf16::ONE, bf16::ZERO, bf16::ZERO, bf16::MAX]
    );
    let c = |re: f32, im: f32| Complex::new(re, im);
    let y = run1("Diag", vec![t(&[2], vec![c(1., 2.), c(-3., 4.)])]).unwrap();
    assert_eq!(
        y.flat::<Complex<f32>>().unwrap(),
        &[c(1., 2.), c(0., 0.), c(0., 0.), c(-3., 4.)]
    );
    let c = |re: f64, im: f64| Complex::new(re, im);
    let y = run1(
        "DiagPart",
        vec![t(
            &[2, 2],
            vec![c(1., 2.), c(9., 9.), c(8., 8.), c(-3., 4.)],
        )],
    )
    .unwrap();
    assert_eq!(y.flat::<Complex<f64>>().unwrap(), &[c(1., 2.), c(-3., 4.)]);
    // TensorFlow's OpDef types only: no int8, bool, string.
    let e = run1("Diag", vec![t(&[2], vec![1i8, 2])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    for op in ["Diag", "DiagPart"] {
        let cpu: Vec<_> = Registry::global()
            .kernels_for(op)
            .into_iter()
            .filter(|k| k.def.device_type == "CPU")
            .collect();
        assert_eq!(cpu.len(), 1, "{op}");
        assert_eq!(cpu[0].def.constraints[0].1.len(), 8, "{op}");
    }
}

#[test]
fn matrix_diag_batched() {
    let y = run1(
        "MatrixDiag",
        vec![t(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.])],
    )
    .unwrap();
    assert_close(
        &y,
        &[2, 3, 3],
        &[
            1., 0., 0., 0., 2., 0., 0., 0., 3., //
            4., 0., 0., 0., 5., 0., 0., 0., 6.,
        ],
        0.0,
    );
    let y = run1("MatrixDiag", vec![t(&[2], vec![true, true])]).unwrap();
    assert_eq!(y.flat::<bool>().unwrap(), &[true, false, false, true]);
    let y = run1("MatrixDiag", vec![t(&[2], vec![255u8, 7])]).unwrap();
    assert_eq!(y.flat::<u8>().unwrap(), &[255, 0, 0, 7]);
    let y = run1("MatrixDiag", vec![t(&[3, 0], Vec::<f64>::new())]).unwrap();
    assert_eq!(y.dims(), &[3, 0, 0]);
    let y = run1("MatrixDiag", vec![t(&[0, 2], Vec::<i64>::new())]).unwrap();
    assert_eq!(y.dims(), &[0, 2, 2]);
    assert_invalid(
        run1("MatrixDiag", vec![Tensor::scalar(1i32)]),
        "diagonal must be at least 1-dim, received shape: []",
    );
    // TensorFlow registers the POD types: no string.
    let s = Tensor::from_strings(&[1], vec![b"a".to_vec()]).unwrap();
    assert!(run1("MatrixDiag", vec![s]).is_err());
}

#[test]
fn matrix_diag_part_square_and_not() {
    // 2 x [2, 3] -> min(2, 3) = 2 diagonal elements each.
    let x = t(&[2, 2, 3], (1..=12).map(|v| v as f64).collect::<Vec<_>>());
    let y = run1("MatrixDiagPart", vec![x]).unwrap();
    assert_close(&y, &[2, 2], &[1., 5., 7., 11.], 0.0);
    // [3, 2] -> 2 elements.
    let x = t(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]);
    assert_eq!(
        run1("MatrixDiagPart", vec![x])
            .unwrap()
            .flat::<i32>()
            .unwrap(),
        &[1, 4]
    );
    let x = t(&[2, 2], vec![1u64, 2, 3, 4]);
    assert_eq!(
        run1("MatrixDiagPart", vec![x])
            .unwrap()
            .flat::<u64>()
            .unwrap(),
        &[1, 4]
    );
    let y = run1("MatrixDiagPart", vec![t(&[4, 0, 5], Vec::<f32>::new())]).unwrap();
    assert_eq!(y.dims(), &[4, 0]);
    assert_invalid(
        run1("MatrixDiagPart", vec![t(&[3], vec![1f32, 2., 3.])]),
        "input must be at least 2-dim, received shape: [3]",
    );
}

#[test]
fn matrix_set_diag() {
    let x = t(&[2, 3], vec![1.0f32, 2., 3., 4., 5., 6.]);
    let y = run1(
        "MatrixSetDiag",
        vec![x.clone(), t(&[2], vec![-1.0f32, -2.])],
    )
    .unwrap();
    assert_close(&y, &[2, 3], &[-1., 2., 3., 4., -2., 6.], 0.0);
    // The input is unchanged.
    assert_close(&x, &[2, 3], &[1., 2., 3., 4., 5., 6.], 0.0);
    let x = t(&[2, 2, 2], vec![0i64; 8]);
    let y = run1("MatrixSetDiag", vec![x, t(&[2, 2], vec![1i64, 2, 3, 4])]).unwrap();
    assert_eq!(y.flat::<i64>().unwrap(), &[1, 0, 0, 2, 3, 0, 0, 4]);
    assert_invalid(
        run1(
            "MatrixSetDiag",
            vec![t(&[2, 2], vec![0f32; 4]), t(&[3], vec![0f32; 3])],
        ),
        "Expected diagonal shape: [2]",
    );
    assert_invalid(
        run1(
            "MatrixSetDiag",
            vec![t(&[2], vec![0f32; 2]), t(&[2], vec![0f32; 2])],
        ),
        "input must be at least 2-dim, received shape: [2]",
    );
}

#[test]
fn every_diag_op_has_a_cpu_kernel() {
    for op in [
        "Diag",
        "DiagPart",
        "MatrixDiag",
        "MatrixDiagPart",
        "MatrixSetDiag",
    ] {
        assert!(
            Registry::global()
                .kernels_for(op)
                .iter()
                .any(|k| k.def.device_type == "CPU"
                    && k.def.constraints[0].1.contains(&DataType::Double)),
            "{op}"
        );
    }
}

#[test]
fn gradients() {
    check(
        "Diag",
        &|o, x| {
            let y = o.op1("Diag", &[x[0]], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
    let square: Vec<f64> = (0..9).map(|i| X[i % 6] + i as f64).collect();
    check(
        "DiagPart",
        &|o, x| {
            let y = o.op1("DiagPart", &[x[0]], &[])?;
            weighted(o, y)
        },
        &[(vec![3, 3], square.clone())],
    );
    check(
        "MatrixDiag",
        &|o, x| {
            let y = o.op1("MatrixDiag", &[x[0]], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec())],
    );
    for dims in [vec![1, 3, 3], vec![2, 3], vec![3, 2]] {
        let n: i64 = dims.iter().product();
        check(
            "MatrixDiagPart",
            &|o, x| {
                let y = o.op1("MatrixDiagPart", &[x[0]], &[])?;
                weighted(o, y)
            },
            &[(dims.clone(), square[..n as usize].to_vec())],
        );
    }
    check(
        "MatrixSetDiag",
        &|o, x| {
            let y = o.op1("MatrixSetDiag", &[x[0], x[1]], &[])?;
            weighted(o, y)
        },
        &[(vec![2, 3], X.to_vec()), (vec![2], vec![0.7, -1.9])],
    );
}

/// TensorFlow's documented example of `MatrixBandPart`.
fn band_example() -> Tensor {
    t(
        &[4, 4],
        vec![0i32, 1, 2, 3, -1, 0, 1, 2, -2, -1, 0, 1, -3, -2, -1, 0],
    )
}

fn band(x: Tensor, lower: Tensor, upper: Tensor) -> opforge_core::Result<Tensor> {
    run1("MatrixBandPart", vec![x, lower, upper])
}

#[test]
fn matrix_band_part_keeps_the_central_band() {
    let s = |v: i64| Tensor::scalar(v);
    // tf.linalg.band_part(input, 1, -1)
    let y = band(band_example(), s(1), s(-1)).unwrap();
    assert_eq!(
        y.flat::<i32>().unwrap(),
        &[0, 1, 2, 3, -1, 0, 1, 2, 0, -1, 0, 1, 0, 0, -1, 0]
    );
    // tf.linalg.band_part(input, 2, 1)
    let y = band(band_example(), s(2), s(1)).unwrap();
    assert_eq!(
        y.flat::<i32>().unwrap(),
        &[0, 1, 0, 0, -1, 0, 1, 0, -2, -1, 0, 1, 0, -2, -1, 0]
    );
    // (0, 0): the diagonal; (-1, -1): everything; int32 limits.
    let x = t(&[2, 2, 3], (1..=12).map(|v| v as f32).collect());
    let y = run1(
        "MatrixBandPart",
        vec![x.clone(), Tensor::scalar(0i32), Tensor::scalar(0i32)],
    )
    .unwrap();
    assert_close(
        &y,
        &[2, 2, 3],
        &[1., 0., 0., 0., 5., 0., 7., 0., 0., 0., 11., 0.],
        0.0,
    );
    let y = band(x.clone(), s(-1), s(-1)).unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), x.flat::<f32>().unwrap());
    // Empty matrices.
    let y = band(t(&[3, 0, 2], Vec::<f64>::new()), s(0), s(0)).unwrap();
    assert_eq!(y.dims(), &[3, 0, 2]);
}

#[test]
fn matrix_band_part_checks_as_tensorflow() {
    let s = |v: i64| Tensor::scalar(v);
    assert_invalid(
        band(t(&[3], vec![1f32, 2., 3.]), s(0), s(0)),
        "input must be at least 2-dim, received shape: [3]",
    );
    assert_invalid(
        band(band_example(), t(&[1], vec![1i64]), s(0)),
        "num_lower must be scalar, got shape [1]",
    );
    assert_invalid(
        band(band_example(), s(5), s(0)),
        "num_lower must be negative or less or equal to number of rows (4) got: 5",
    );
    assert_invalid(
        band(band_example(), s(0), s(9)),
        "num_upper must be negative or less or equal to number of columns (4) got: 9",
    );
}

#[test]
fn matrix_band_part_gradient_is_the_band_of_the_gradient() {
    for (lower, upper) in [(0i64, 0i64), (1, -1), (-1, 1)] {
        check(
            "MatrixBandPart",
            &|o, x| {
                let l = o.constant(Tensor::scalar(lower))?;
                let u = o.constant(Tensor::scalar(upper))?;
                let y = o.op1("MatrixBandPart", &[x[0], l, u], &[])?;
                weighted(o, y)
            },
            &[(vec![2, 3], X.to_vec())],
        );
    }
}

/// Found by scripts/hostile-cli: an empty batch with a huge last dimension
/// overflowed the row sharding (`8 * row_len`) of the element mover.
#[test]
fn matrix_diag_of_an_empty_batch_with_a_huge_diagonal() {
    let x = Tensor::from_vec(&[2, 0, 3, i64::MAX], Vec::<f32>::new());
    let e = x.and_then(|x| run1("MatrixDiag", vec![x]));
    // Either the shape is refused as too large or the empty output is made;
    // never a panic.
    if let Ok(y) = e {
        assert_eq!(y.num_elements(), 0);
    } else if let Err(e) = e {
        assert_ne!(e.code(), Code::Internal, "{e}");
    }
    let y = run1("MatrixDiag", vec![t(&[0, 1 << 31], Vec::<f32>::new())]).unwrap();
    assert_eq!(y.dims(), &[0, 1 << 31, 1 << 31]);
}
