//! Tests of the neural-network ops.

use super::defs::*;
use super::*;
use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::Code;
use opforge_ops_base::cpu::elem::RealFloat;
use opforge_testing::util::{assert_close, ctx, t};

fn run1(op: &str, x: Tensor) -> Result<Tensor> {
    ctx().op(op).input(x).run1()
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.flat::<f32>().unwrap().to_vec()
}

#[test]
fn opdefs_finalize() {
    for b in [
        relu(),
        relu_grad(),
        relu6(),
        softmax(),
        log_softmax(),
        softmax_cross_entropy_with_logits(),
        sparse_softmax_cross_entropy_with_logits(),
        bias_add(),
        bias_add_grad(),
    ] {
        let op = b.finalize().unwrap();
        assert_eq!(
            opforge_core::Registry::global().op_def(&op.name).unwrap(),
            op
        );
    }
}

#[test]
fn vectorizable_exp_is_within_a_few_ulps() {
    let mut worst = 0.0f64;
    let mut x = -87.3f32;
    while x <= 88.0 {
        let got = x.vexp() as f64;
        let want = (x as f64).exp();
        worst = worst.max(((got - want) / want).abs());
        x += 0.0137;
    }
    assert!(
        worst < 3.0 * f32::EPSILON as f64,
        "worst relative error {worst}"
    );
    assert_eq!(0.0f32.vexp(), 1.0);
    assert_eq!(f32::NEG_INFINITY.vexp(), 0.0);
    assert_eq!((-1000.0f32).vexp(), 0.0);
    assert!(f32::NAN.vexp().is_nan());
    assert_eq!(1.5f64.vexp(), 1.5f64.exp());
}

#[test]
fn relu_family() {
    let y = run1("Relu", t(&[4], vec![-1.0f32, 0.0, 2.5, f32::NAN])).unwrap();
    let v = f32s(&y);
    assert_eq!(&v[..3], &[0.0, 0.0, 2.5]);
    assert!(v[3].is_nan());
    let y = run1("Relu", t(&[2], vec![-3i32, 4])).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 4]);
    let y = run1("Relu", t(&[2], vec![0u8, 7])).unwrap();
    assert_eq!(y.flat::<u8>().unwrap(), &[0, 7]);
    let y = run1(
        "Relu",
        t(&[2], vec![f16::from_f32(-2.0), f16::from_f32(1.5)]),
    )
    .unwrap();
    assert_close(&y, &[2], &[0.0, 1.5], 0.0);
    let y = run1("Relu6", t(&[4], vec![-1.0f64, 3.0, 7.0, 6.0])).unwrap();
    assert_close(&y, &[4], &[0.0, 3.0, 6.0, 6.0], 0.0);
    let y = run1("Relu6", t(&[3], vec![-9i64, 5, 100])).unwrap();
    assert_eq!(y.flat::<i64>().unwrap(), &[0, 5, 6]);
    let y = run1(
        "Relu6",
        t(&[2], vec![bf16::from_f32(8.0), bf16::from_f32(0.5)]),
    )
    .unwrap();
    assert_close(&y, &[2], &[6.0, 0.5], 0.0);
    let y = run1("Relu", Tensor::zeros(DataType::Float, &[0, 2]).unwrap()).unwrap();
    assert_eq!(y.dims(), &[0, 2]);
    // Large inputs take the sharded path.
    let n = 100_000;
    let x: Vec<f32> = (0..n).map(|i| (i as f32) - 50_000.0).collect();
    let y = run1("Relu", t(&[n as i64], x.clone())).unwrap();
    assert!(f32s(&y).iter().zip(&x).all(|(&y, &x)| y == x.max(0.0)));
}

#[test]
fn relu_grad_passes_gradients_where_features_are_positive() {
    let g = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let f = t(&[2, 2], vec![-1.0f32, 0.0, 0.5, 2.0]);
    let y = ctx().op("ReluGrad").input(g).input(f).run1().unwrap();
    assert_close(&y, &[2, 2], &[0.0, 0.0, 3.0, 4.0], 0.0);
    let y = ctx()
        .op("ReluGrad")
        .input(t(&[3], vec![5i32, -6, 7]))
        .input(t(&[3], vec![1i32, 2, -3]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[5, -6, 0]);
    let err = ctx()
        .op("ReluGrad")
        .input(t(&[3], vec![1.0f32; 3]))
        .input(t(&[1], vec![1.0f32]))
        .run1()
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("g and a must be the same size"),
        "{err}"
    );
}

// softmax([1, 2, 3]) and log_softmax([1, 2, 3]), from exp(k) / (e + e^2 + e^3).
const SM123: [f64; 3] = [
    0.090_030_573_170_380_46,
    0.244_728_471_054_797_64,
    0.665_240_955_774_821_9,
];
const LSM123: [f64; 3] = [
    -2.407_605_964_444_38,
    -1.407_605_964_444_38,
    -0.407_605_964_444_38,
];

#[test]
fn softmax_and_log_softmax() {
    let x = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 1001.0, 1002.0, 1003.0]);
    let y = run1("Softmax", x.clone()).unwrap();
    let want: Vec<f64> = SM123.iter().chain(&SM123).copied().collect();
    assert_close(&y, &[2, 3], &want, 1e-6);
    let y = run1("LogSoftmax", x).unwrap();
    let want: Vec<f64> = LSM123.iter().chain(&LSM123).copied().collect();
    assert_close(&y, &[2, 3], &want, 1e-6);
    // 1-D logits, double.
    let y = run1("Softmax", t(&[3], vec![1.0f64, 2.0, 3.0])).unwrap();
    assert_close(&y, &[3], &SM123, 1e-15);
    let y = run1("LogSoftmax", t(&[2], vec![0.0f64, 0.0])).unwrap();
    assert_close(&y, &[2], &[-std::f64::consts::LN_2; 2], 1e-15);
    // half and bfloat16 compute in f32.
    let h = t(&[3], [1.0f32, 2.0, 3.0].map(f16::from_f32).to_vec());
    assert_close(&run1("Softmax", h).unwrap(), &[3], &SM123, 1e-3);
    let b = t(&[3], [1.0f32, 2.0, 3.0].map(bf16::from_f32).to_vec());
    assert_close(&run1("LogSoftmax", b).unwrap(), &[3], &LSM123, 1e-2);
    // Empty inputs.
    let e = run1("Softmax", Tensor::zeros(DataType::Float, &[0, 4]).unwrap()).unwrap();
    assert_eq!(e.dims(), &[0, 4]);
    let e = run1(
        "LogSoftmax",
        Tensor::zeros(DataType::Float, &[3, 0]).unwrap(),
    )
    .unwrap();
    assert_eq!(e.dims(), &[3, 0]);
    let err = run1("Softmax", Tensor::scalar(1.0f32)).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("logits must have >= 1 dimension, got []"),
        "{err}"
    );
    let err = run1("Softmax", t(&[1], vec![1i32])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[test]
fn softmax_rows_sum_to_one_and_log_softmax_agrees() {
    let (a, b, c) = (4usize, 300usize, 37usize);
    let x: Vec<f32> = (0..a * b * c)
        .map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0)
        .collect();
    let xt = t(&[a as i64, b as i64, c as i64], x.clone());
    let y = f32s(&run1("Softmax", xt.clone()).unwrap());
    let ly = f32s(&run1("LogSoftmax", xt).unwrap());
    for r in 0..a * b {
        let row = &y[r * c..(r + 1) * c];
        let s: f64 = row.iter().map(|&v| v as f64).sum();
        assert!((s - 1.0).abs() < 1e-5, "row {r} sums to {s}");
        // Against an independent f64 formula.
        let xr = &x[r * c..(r + 1) * c];
        let m = xr.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let z: f64 = xr.iter().map(|&v| (v as f64 - m).exp()).sum();
        for j in 0..c {
            let want = (xr[j] as f64 - m).exp() / z;
            assert!((row[j] as f64 - want).abs() < 1e-6, "({r}, {j})");
            let lwant = xr[j] as f64 - m - z.ln();
            assert!(
                (ly[r * c + j] as f64 - lwant).abs() < 1e-5,
                "log ({r}, {j})"
            );
        }
    }
}

fn xent(features: Tensor, labels: Tensor) -> Result<Vec<Tensor>> {
    ctx()
        .op("SoftmaxCrossEntropyWithLogits")
        .input(features)
        .input(labels)
        .run()
}

/// Fuzz finding (kernel): logits of shape `[2^40, 0]` (no elements) and a
/// scalar label made the kernel allocate one f32 loss per row, 4 TiB, past
/// the allocation limit: the process aborted. The losses are checked now.
#[test]
fn softmax_cross_entropy_of_huge_empty_logits_is_resource_exhausted() {
    let f = Tensor::zeros(DataType::Float, &[1 << 40, 0]).unwrap();
    let e = xent(f, Tensor::scalar(0.0f32)).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    assert!(
        e.message().contains("the losses of 1099511627776 rows"),
        "{e}"
    );
}

#[test]
fn softmax_cross_entropy_against_hand_computed_values() {
    // Row 0: logits [1, 2, 3], one-hot label 2: loss = -log softmax[2].
    // Row 1: logits [0, 0, 0], labels [0.25, 0.25, 0.5]: loss = ln 3,
    // backprop = 1/3 - labels.
    let f = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]);
    let l = t(&[2, 3], vec![0.0f32, 0.0, 1.0, 0.25, 0.25, 0.5]);
    let out = xent(f, l).unwrap();
    assert_close(&out[0], &[2], &[-LSM123[2], 3f64.ln()], 1e-6);
    let third = 1.0 / 3.0;
    assert_close(
        &out[1],
        &[2, 3],
        &[
            SM123[0],
            SM123[1],
            SM123[2] - 1.0,
            third - 0.25,
            third - 0.25,
            third - 0.5,
        ],
        1e-6,
    );
    // Large logits stay finite.
    let out = xent(
        t(&[1, 2], vec![1000.0f64, 0.0]),
        t(&[1, 2], vec![0.0f64, 1.0]),
    )
    .unwrap();
    assert_close(&out[0], &[1], &[1000.0], 1e-12);
    assert_close(&out[1], &[1, 2], &[1.0, -1.0], 1e-12);
}

#[test]
fn softmax_cross_entropy_broadcasts_labels_and_features() {
    let f = t(&[2, 3], vec![1.0f64, 2.0, 3.0, 1.0, 2.0, 3.0]);
    let want_loss = [-LSM123[2]; 2];
    for labels in [
        t(&[3], vec![0.0f64, 0.0, 1.0]),
        t(&[1, 3], vec![0.0f64, 0.0, 1.0]),
    ] {
        let out = xent(f.clone(), labels).unwrap();
        assert_close(&out[0], &[2], &want_loss, 1e-12);
        assert_eq!(out[1].dims(), &[2, 3]);
    }
    // Features broadcast against labels.
    let out = xent(
        t(&[1, 3], vec![1.0f64, 2.0, 3.0]),
        t(&[2, 3], vec![1.0f64, 0.0, 0.0, 0.0, 1.0, 0.0]),
    )
    .unwrap();
    assert_close(&out[0], &[2], &[-LSM123[0], -LSM123[1]], 1e-12);
    assert_close(
        &out[1],
        &[2, 3],
        &[
            SM123[0] - 1.0,
            SM123[1],
            SM123[2],
            SM123[0],
            SM123[1] - 1.0,
            SM123[2],
        ],
        1e-12,
    );
    // half.
    let h = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    let out = xent(
        t(&[1, 3], h(vec![1.0, 2.0, 3.0])),
        t(&[1, 3], h(vec![0.0, 0.0, 1.0])),
    )
    .unwrap();
    assert_close(&out[0], &[1], &[-LSM123[2]], 1e-3);
    // Empty batch.
    let out = xent(
        Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
        Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (out[0].dims(), out[1].dims()),
        (&[0i64][..], &[0i64, 3][..])
    );
    let err = xent(t(&[2, 3], vec![0f32; 6]), t(&[4, 3], vec![0f32; 12])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains(
            "logits and labels must be broadcastable: logits_size=[2,3] labels_size=[4,3]"
        ),
        "{err}"
    );
    let err = xent(t(&[3], vec![0f32; 3]), t(&[3], vec![0f32; 3])).unwrap_err();
    assert!(
        err.message().contains(
            "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"
        ),
        "{err}"
    );
}

#[test]
fn large_cross_entropy_matches_an_independent_formula() {
    let (rows, cols) = (700usize, 50usize);
    let f: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 31) % 97) as f32 / 9.0)
        .collect();
    let labels: Vec<i64> = (0..rows).map(|r| ((r * 13) % cols) as i64).collect();
    let dense: Vec<f32> = (0..rows * cols)
        .map(|i| {
            if labels[i / cols] as usize == i % cols {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let ft = t(&[rows as i64, cols as i64], f.clone());
    let dense_out = xent(ft.clone(), t(&[rows as i64, cols as i64], dense)).unwrap();
    let sparse_out = ctx()
        .op("SparseSoftmaxCrossEntropyWithLogits")
        .input(ft)
        .input(t(&[rows as i64], labels.clone()))
        .run()
        .unwrap();
    let mut want_loss = Vec::new();
    let mut want_back = Vec::new();
    for r in 0..rows {
        let x = &f[r * cols..(r + 1) * cols];
        let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let z: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
        let target = labels[r] as usize;
        want_loss.push(z.ln() - (x[target] as f64 - m));
        for (j, &v) in x.iter().enumerate() {
            let p = (v as f64 - m).exp() / z;
            want_back.push(if j == target { p - 1.0 } else { p });
        }
    }
    for out in [&dense_out, &sparse_out] {
        assert_close(&out[0], &[rows as i64], &want_loss, 1e-5);
        assert_close(&out[1], &[rows as i64, cols as i64], &want_back, 1e-5);
    }
}

pub(super) fn sparse(features: Tensor, labels: Tensor) -> Result<Vec<Tensor>> {
    ctx()
        .op("SparseSoftmaxCrossEntropyWithLogits")
        .input(features)
        .input(labels)
        .run()
}

#[test]
fn sparse_softmax_cross_entropy() {
    let f = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0]);
    let third = 1.0 / 3.0;
    for labels in [t(&[2], vec![2i32, 1]), t(&[2], vec![2i64, 1])] {
        let out = sparse(f.clone(), labels).unwrap();
        assert_close(&out[0], &[2], &[-LSM123[2], 3f64.ln()], 1e-6);
        assert_close(
            &out[1],
            &[2, 3],
            &[
                SM123[0],
                SM123[1],
                SM123[2] - 1.0,
                third,
                third - 1.0,
                third,
            ],
            1e-6,
        );
    }
    let b = t(&[1, 2], vec![bf16::from_f32(0.0), bf16::from_f32(0.0)]);
    let out = sparse(b, t(&[1], vec![0i64])).unwrap();
    assert_close(&out[0], &[1], &[std::f64::consts::LN_2], 1e-2);
    let out = sparse(
        Tensor::zeros(DataType::Double, &[0, 3]).unwrap(),
        Tensor::zeros(DataType::Int64, &[0]).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (out[0].dims(), out[1].dims()),
        (&[0i64][..], &[0i64, 3][..])
    );
}

#[test]
fn sparse_softmax_cross_entropy_errors() {
    let f = || t(&[2, 3], vec![0f32; 6]);
    let err = sparse(f(), t(&[2], vec![2i64, 5])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains(
            "Received a label value of 5 which is outside the valid range of [0, 3).  Label values: 2 5"
        ),
        "{err}"
    );
    let err = sparse(f(), t(&[2], vec![-1i32, 7])).unwrap_err();
    assert!(
        err.message()
            .contains("Received a label value of -1 which is outside the valid range of [0, 3).  Label values: -1 7"),
        "{err}"
    );
    let err = sparse(t(&[3], vec![0f32; 3]), t(&[3], vec![0i64; 3])).unwrap_err();
    assert!(
        err.message()
            .contains("logits must be 2-D, but got shape [3]"),
        "{err}"
    );
    let err = sparse(f(), t(&[2, 1], vec![0i64; 2])).unwrap_err();
    assert!(
        err.message()
            .contains("labels must be 1-D, but got shape [2,1]"),
        "{err}"
    );
    let err = sparse(f(), t(&[3], vec![0i64; 3])).unwrap_err();
    assert!(
        err.message().contains(
            "logits and labels must have the same first dimension, got logits shape [2,3] and labels shape [3]"
        ),
        "{err}"
    );
    let err = sparse(
        Tensor::zeros(DataType::Float, &[2, 0]).unwrap(),
        t(&[2], vec![0i64; 2]),
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("Must have at least one class, but got logits shape [2,0]"),
        "{err}"
    );
}

fn bias_add_op(value: Tensor, bias: Tensor, format: &str) -> Result<Tensor> {
    ctx()
        .op("BiasAdd")
        .input(value)
        .input(bias)
        .attr("data_format", format)
        .run1()
}

fn bias_grad(x: Tensor, format: &str) -> Result<Tensor> {
    ctx()
        .op("BiasAddGrad")
        .input(x)
        .attr("data_format", format)
        .run1()
}

#[test]
fn bias_add_nhwc_and_nchw() {
    let v = t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = t(&[3], vec![10.0f32, 20.0, 30.0]);
    let want = [11.0, 22.0, 33.0, 14.0, 25.0, 36.0];
    assert_close(
        &bias_add_op(v.clone(), b.clone(), "NHWC").unwrap(),
        &[2, 3],
        &want,
        0.0,
    );
    // Rank 2 NCHW: the channel is dimension 1, the last one too.
    assert_close(&bias_add_op(v, b, "NCHW").unwrap(), &[2, 3], &want, 0.0);
    // [N=1, C=2, H=2, W=2]: the first four get +100, the last four +200.
    let v = t(&[1, 2, 2, 2], (0..8).map(|i| i as f64).collect());
    let y = bias_add_op(v.clone(), t(&[2], vec![100.0f64, 200.0]), "NCHW").unwrap();
    assert_close(
        &y,
        &[1, 2, 2, 2],
        &[100.0, 101.0, 102.0, 103.0, 204.0, 205.0, 206.0, 207.0],
        0.0,
    );
    // The same tensor as NHWC: channel = W.
    let y = bias_add_op(v, t(&[2], vec![100.0f64, 200.0]), "NHWC").unwrap();
    assert_close(
        &y,
        &[1, 2, 2, 2],
        &[100.0, 201.0, 102.0, 203.0, 104.0, 205.0, 106.0, 207.0],
        0.0,
    );
    let y = ctx()
        .op("BiasAdd")
        .input(t(&[2, 2], vec![1i32, 2, 3, i32::MAX]))
        .input(t(&[2], vec![-1i32, 1]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 3, 2, i32::MIN]);
    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let y = bias_add_op(
        t(&[1, 2], h(&[1.5, 2.0])),
        t(&[2], h(&[0.25, -2.0])),
        "NHWC",
    )
    .unwrap();
    assert_close(&y, &[1, 2], &[1.75, 0.0], 0.0);
    let c = |re: f32| Complex::new(re, 1.0);
    let y = bias_add_op(
        t(&[1, 2], vec![c(1.0), c(2.0)]),
        t(&[2], vec![c(3.0), c(4.0)]),
        "NHWC",
    )
    .unwrap();
    assert_eq!(
        y.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(4.0, 2.0), Complex::new(6.0, 2.0)]
    );
    let e = bias_add_op(
        Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
        t(&[3], vec![1.0f32; 3]),
        "NHWC",
    )
    .unwrap();
    assert_eq!(e.dims(), &[0, 3]);
}

#[test]
fn large_bias_add_matches_a_naive_loop() {
    for format in ["NHWC", "NCHW"] {
        let dims = [8usize, 16, 30, 40];
        let c = if format == "NHWC" { dims[3] } else { dims[1] };
        let n: usize = dims.iter().product();
        let x: Vec<f32> = (0..n).map(|i| (i % 101) as f32).collect();
        let bias: Vec<f32> = (0..c).map(|i| i as f32 * 1000.0).collect();
        let di: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let y = bias_add_op(t(&di, x.clone()), t(&[c as i64], bias.clone()), format).unwrap();
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let ch = if format == "NHWC" {
                    i % dims[3]
                } else {
                    (i / (dims[2] * dims[3])) % dims[1]
                };
                (x[i] + bias[ch]) as f64
            })
            .collect();
        assert_close(&y, &di, &want, 0.0);
        // BiasAddGrad sums everything but the channel.
        let g = bias_grad(t(&di, x.clone()), format).unwrap();
        let mut want = vec![0.0f64; c];
        for (i, &v) in x.iter().enumerate() {
            let ch = if format == "NHWC" {
                i % dims[3]
            } else {
                (i / (dims[2] * dims[3])) % dims[1]
            };
            want[ch] += v as f64;
        }
        assert_close(&g, &[c as i64], &want, 0.0);
    }
}

#[test]
fn bias_add_errors() {
    let err = bias_add_op(t(&[2, 3], vec![0f32; 6]), t(&[4], vec![0f32; 4]), "NHWC").unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains(
            "Must provide as many biases as the last dimension of the input tensor: [4] vs. [2,3]"
        ),
        "{err}"
    );
    let err = bias_add_op(
        t(&[2, 3, 4], vec![0f32; 24]),
        t(&[4], vec![0f32; 4]),
        "NCHW",
    )
    .unwrap_err();
    assert!(
        err.message().contains("Must provide as many biases"),
        "{err}"
    );
    let err = bias_add_op(t(&[3], vec![0f32; 3]), t(&[3], vec![0f32; 3]), "NHWC").unwrap_err();
    assert!(
        err.message()
            .contains("Input tensor must be at least 2D: [3]"),
        "{err}"
    );
    let err =
        bias_add_op(t(&[2, 3], vec![0f32; 6]), t(&[1, 3], vec![0f32; 3]), "NHWC").unwrap_err();
    assert!(err.message().contains("Biases must be 1D: [1,3]"), "{err}");
    let err = bias_add_op(t(&[2, 3], vec![0f32; 6]), t(&[3], vec![0f32; 3]), "NWHC").unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = bias_grad(t(&[3], vec![0f32; 3]), "NHWC").unwrap_err();
    assert!(
        err.message()
            .contains("Input tensor must be at least 2D: [3]"),
        "{err}"
    );
}

#[test]
fn bias_add_grad_small_values() {
    let g = bias_grad(t(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]), "NHWC").unwrap();
    assert_close(&g, &[3], &[5.0, 7.0, 9.0], 0.0);
    let g = bias_grad(t(&[1, 2, 2, 2], (0..8).collect::<Vec<i32>>()), "NCHW").unwrap();
    assert_eq!(g.flat::<i32>().unwrap(), &[6, 22]);
    // NCHW at ranks 3 and 5: the channel is dimension 1 (as the shape
    // function says), summed over every other dimension.
    let g = bias_grad(t(&[2, 3, 2], (0..12).collect::<Vec<i32>>()), "NCHW").unwrap();
    assert_eq!(
        g.flat::<i32>().unwrap(),
        &[1 + 6 + 7, 2 + 3 + 8 + 9, 4 + 5 + 10 + 11]
    );
    let g = bias_grad(t(&[1, 2, 1, 1, 2], (0..4).collect::<Vec<i32>>()), "NCHW").unwrap();
    assert_eq!(g.flat::<i32>().unwrap(), &[1, 5]);
    let h = t(&[2, 1], vec![f16::from_f32(0.5), f16::from_f32(0.25)]);
    assert_close(&bias_grad(h, "NHWC").unwrap(), &[1], &[0.75], 0.0);
    let g = bias_grad(Tensor::zeros(DataType::Float, &[0, 3]).unwrap(), "NHWC").unwrap();
    assert_close(&g, &[3], &[0.0; 3], 0.0);
    let g = bias_grad(Tensor::zeros(DataType::Double, &[2, 0]).unwrap(), "NHWC").unwrap();
    assert_eq!(g.dims(), &[0]);
}

// ---- Shape functions ----

mod shapes {
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::{infer_error, infer_ok};

    #[test]
    fn relu_family() {
        for op in ["Relu", "Relu6"] {
            let o = ShapeTestOp::new(op);
            infer_ok!(o, "?", "in0");
            infer_ok!(o, "[]", "in0");
            infer_ok!(o, "[2,?,3]", "in0");
        }
        let o = ShapeTestOp::new("ReluGrad");
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

    #[test]
    fn softmax_family() {
        for op in ["Softmax", "LogSoftmax"] {
            let o = ShapeTestOp::new(op);
            infer_ok!(o, "?", "in0");
            infer_ok!(o, "[5]", "in0");
            infer_ok!(o, "[2,?,3]", "in0");
            infer_error!(o, "[]", "Shape must be at least rank 1 but is rank 0");
        }
    }

    #[test]
    fn softmax_cross_entropy() {
        let o = ShapeTestOp::new("SoftmaxCrossEntropyWithLogits");
        infer_ok!(o, "[2,3];[2,3]", "[d0_0];in0");
        infer_ok!(o, "[?,3];[2,3]", "[d1_0];in1");
        infer_ok!(o, "[?,3];[2,?]", "[d1_0];[d1_0,d0_1]");
        infer_ok!(o, "?;?", "[?];[?,?]");
        infer_ok!(o, "?;[2,3]", "[d1_0];in1");
        infer_ok!(o, "[2,3];?", "[d0_0];in0");
        // Not mergeable: TensorFlow 2.x broadcasts features and labels.
        infer_ok!(o, "[2,3];[3]", "[d0_0];[d0_0,d0_1]");
        infer_ok!(o, "[1,3];[4,3]", "[d1_0];[d1_0,d0_1]");
        infer_ok!(o, "[4,1];[4,3]", "[d0_0];[d0_0,d1_1]");
        infer_ok!(o, "[3];[2,3]", "[d1_0];[d1_0,d0_0]");
        infer_error!(o, "[2,3];[4]", "Dimensions must be equal, but are 3 and 4");
        infer_error!(
            o,
            "[3];[3]",
            "Shape must be broadcasted with rank 2, but is rank 1"
        );
        infer_error!(
            o,
            "[2,2,3];[2,2,3]",
            "Shape must be broadcasted with rank 2, but is rank 3"
        );
        infer_error!(
            o,
            "?;[3]",
            "Shape must be broadcasted with rank 2, but is rank is unknown."
        );
    }

    #[test]
    fn sparse_softmax_cross_entropy() {
        let o = ShapeTestOp::new("SparseSoftmaxCrossEntropyWithLogits");
        infer_ok!(o, "?;?", "[?];[?,?]");
        infer_ok!(o, "[2,3];?", "[d0_0];[d0_0,d0_1]");
        infer_ok!(o, "[2,3];[?]", "[d0_0];[d0_0,d0_1]");
        infer_ok!(o, "[?,3];[2]", "[d1_0];[d1_0,d0_1]");
        infer_ok!(o, "?;[2]", "[d1_0];[d1_0,?]");
        infer_error!(o, "[2,3];[3]", "Dimensions must be equal, but are 2 and 3");
        infer_error!(o, "[2];[2]", "Shape must be rank 2 but is rank 1");
        infer_error!(o, "[2,3];[2,1]", "Shape must be rank 1 but is rank 2");
    }

    #[test]
    fn bias_add() {
        let nhwc = ShapeTestOp::new("BiasAdd").attr("data_format", "NHWC");
        let nchw = ShapeTestOp::new("BiasAdd").attr("data_format", "NCHW");
        // A bare node (no data_format) is NHWC, as in TensorFlow.
        let bare = ShapeTestOp::new("BiasAdd");
        for o in [&nhwc, &bare] {
            infer_ok!(o, "?;?", "?");
            infer_ok!(o, "?;[3]", "?");
            infer_ok!(o, "[2,3];[3]", "[d0_0,d0_1]");
            infer_ok!(o, "[2,?];[3]", "[d0_0,d1_0]");
            infer_ok!(o, "[2,4,?];?", "[d0_0,d0_1,d0_2]");
            infer_ok!(o, "[2,4,5,3];[?]", "[d0_0,d0_1,d0_2,d0_3]");
            infer_error!(o, "[2];[2]", "Shape must be at least rank 2 but is rank 1");
            infer_error!(o, "[2,3];[4]", "Dimensions must be equal, but are 3 and 4");
            infer_error!(o, "[2,3];[3,1]", "Shape must be rank 1 but is rank 2");
        }
        infer_ok!(nchw, "?;[3]", "?");
        infer_ok!(nchw, "[2,3,4,5];[3]", "[d0_0,d0_1,d0_2,d0_3]");
        infer_ok!(nchw, "[2,?,4,5];[3]", "[d0_0,d1_0,d0_2,d0_3]");
        infer_ok!(nchw, "[2,?,4];?", "[d0_0,d0_1,d0_2]");
        infer_error!(
            nchw,
            "[2,3];[3]",
            "Shape must be at least rank 3 but is rank 2"
        );
        infer_error!(
            nchw,
            "[2,3,4,5];[5]",
            "Dimensions must be equal, but are 3 and 5"
        );
    }

    #[test]
    fn bias_add_grad() {
        let nhwc = ShapeTestOp::new("BiasAddGrad").attr("data_format", "NHWC");
        let nchw = ShapeTestOp::new("BiasAddGrad").attr("data_format", "NCHW");
        let bare = ShapeTestOp::new("BiasAddGrad");
        for o in [&nhwc, &bare] {
            infer_ok!(o, "?", "[?]");
            infer_ok!(o, "[2,3]", "[d0_1]");
            infer_ok!(o, "[2,4,5,?]", "[d0_3]");
            infer_error!(o, "[3]", "Shape must be at least rank 2 but is rank 1");
        }
        infer_ok!(nchw, "?", "[?]");
        infer_ok!(nchw, "[2,3,4,5]", "[d0_1]");
        // The channel of NCHW is dimension 1 at every rank, as the kernel
        // reduces (TensorFlow's shape function takes the third-to-last dim).
        infer_ok!(nchw, "[2,3,4]", "[d0_1]");
        infer_ok!(nchw, "[2,3,4,5,6]", "[d0_1]");
        infer_error!(nchw, "[2,3]", "Shape must be at least rank 3 but is rank 2");
    }
}

// ---- Gradients ----

mod grads {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{compute_gradient, GradientTape, Ops, OpsExt, Sym, SymArg};
    use opforge_core::{Result, Tensor};
    use opforge_testing::util::{assert_close, ctx, t};

    use opforge_testing::util::{check_gradients as check, distinct_values as vals};

    /// Values on both sides of 0 (and of 6), away from the kinks.
    fn signed(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| [-2.5, 0.7, 3.1, 7.5, -0.4, 5.2, 1.3, -6.0][i % 8] + i as f64 * 0.013)
            .collect()
    }

    fn unary(op: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| o.op1(op, &[xs[0]], &[])
    }

    #[test]
    fn activation_gradients() {
        for op in ["Relu", "Relu6", "Softmax", "LogSoftmax"] {
            check(&unary(op), &[t(&[2, 4], signed(8))]);
            check(&unary(op), &[t(&[3], signed(3))]);
            check(&unary(op), &[t(&[2, 1, 3], signed(6))]);
        }
    }

    #[test]
    fn relu_grad_gradient() {
        let f = |o: &mut dyn Ops, xs: &[Sym]| o.op1("ReluGrad", &[xs[0], xs[1]], &[]);
        check(&f, &[t(&[2, 3], vals(6, 0.4)), t(&[2, 3], signed(6))]);
    }

    #[test]
    fn hand_checked_activation_gradients() {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[5], vec![-1.0f64, 0.5, 3.0, 6.5, 7.0]));
        let r6 = tape.op1("Relu6", &[x], &[]).unwrap();
        let g = tape.gradient_tensors(r6, &[x]).unwrap();
        assert_close(
            g[0].as_ref().unwrap(),
            &[5],
            &[0.0, 1.0, 1.0, 0.0, 0.0],
            0.0,
        );
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[3], vec![-1.0f64, 0.5, 3.0]));
        let r = tape.op1("Relu", &[x], &[]).unwrap();
        let g = tape.gradient_tensors(r, &[x]).unwrap();
        assert_close(g[0].as_ref().unwrap(), &[3], &[0.0, 1.0, 1.0], 0.0);
        // The gradient of sum(softmax) is 0; of log_softmax[0], e0 - softmax.
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[1, 2], vec![0.0f64, 2f64.ln()]));
        let s = tape.op1("Softmax", &[x], &[]).unwrap();
        let g = tape.gradient_tensors(s, &[x]).unwrap();
        assert_close(g[0].as_ref().unwrap(), &[1, 2], &[0.0, 0.0], 1e-15);
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[1, 2], vec![0.0f64, 2f64.ln()]));
        let s = tape.op1("LogSoftmax", &[x], &[]).unwrap();
        let seed = tape.constant(t(&[1, 2], vec![1.0f64, 0.0])).unwrap();
        let records = tape.records_snapshot();
        let g = opforge_core::autodiff::backprop(&mut tape, &records, &[s], &[Some(seed)], &[x])
            .unwrap()[0]
            .unwrap();
        assert_close(
            tape.value(g).unwrap(),
            &[1, 2],
            &[1.0 - 1.0 / 3.0, -2.0 / 3.0],
            1e-15,
        );
    }

    fn xent(o: &mut dyn Ops, op: &str, f: Sym, l: Sym, out: usize) -> Result<Sym> {
        let outs = o.call(op, &[SymArg::One(f), SymArg::One(l)], &Default::default())?;
        Ok(outs[out])
    }

    #[test]
    fn softmax_cross_entropy_gradients() {
        let op = "SoftmaxCrossEntropyWithLogits";
        let features = t(&[2, 3], signed(6));
        let labels = t(&[2, 3], vec![0.2, 0.3, 0.5, 0.0, 1.0, 0.0]);
        // Loss with respect to features and labels.
        let loss = |o: &mut dyn Ops, xs: &[Sym]| xent(o, op, xs[0], xs[1], 0);
        check(&loss, &[features.clone(), labels.clone()]);
        // The backprop output (TensorFlow's grad_grad path), alone and with
        // the loss, with respect to the features. (TensorFlow's gradient
        // for the labels ignores the backprop output's gradient, so the
        // labels are constants here.)
        let lc = labels.clone();
        let backprop = move |o: &mut dyn Ops, xs: &[Sym]| {
            let l = like(o, &lc, xs[0])?;
            xent(o, op, xs[0], l, 1)
        };
        check(&backprop, std::slice::from_ref(&features));
        let both = move |o: &mut dyn Ops, xs: &[Sym]| {
            let l = like(o, &labels, xs[0])?;
            let outs = o.call(
                op,
                &[SymArg::One(xs[0]), SymArg::One(l)],
                &Default::default(),
            )?;
            let axis = o_scalar(o, -1)?;
            let sq = o.mul(outs[1], outs[1])?;
            let s = o.op1("Sum", &[sq, axis], &[])?;
            o.add(outs[0], s)
        };
        check(&both, &[features]);
    }

    /// A float64 constant in `x`'s dtype.
    fn like(o: &mut dyn Ops, v: &Tensor, x: Sym) -> Result<Sym> {
        let c = o.constant(v.clone())?;
        let dtype = o.dtype(x);
        o.op1("Cast", &[c], &[("DstT", dtype.into_attr_value())])
    }

    fn o_scalar(o: &mut dyn Ops, v: i32) -> Result<Sym> {
        o.constant(Tensor::scalar(v))
    }

    #[test]
    fn sparse_softmax_cross_entropy_gradients() {
        let op = "SparseSoftmaxCrossEntropyWithLogits";
        for labels in [t(&[3], vec![2i64, 0, 1]), t(&[3], vec![1i32, 1, 0])] {
            let loss = move |o: &mut dyn Ops, xs: &[Sym]| {
                let l = o.constant(labels.clone())?;
                xent(o, op, xs[0], l, 0)
            };
            check(&loss, &[t(&[3, 4], signed(12))]);
        }
        // Hand-checked: d loss / d logits = softmax - onehot.
        let mut tape = GradientTape::new(ctx(), false);
        let f = tape.watch(t(&[1, 2], vec![0.0f64, 2f64.ln()]));
        let l = tape.constant(t(&[1], vec![1i64])).unwrap();
        let loss = xent(&mut tape, op, f, l, 0).unwrap();
        let g = tape.gradient(loss, &[f, l]).unwrap();
        assert!(g[1].is_none());
        assert_close(
            tape.value(g[0].unwrap()).unwrap(),
            &[1, 2],
            &[1.0 / 3.0, -1.0 / 3.0],
            1e-15,
        );
        // No second derivative through the backprop output, as in TensorFlow.
        let backprop = |o: &mut dyn Ops, xs: &[Sym]| {
            let l = o.constant(t(&[2], vec![0i64, 1]))?;
            xent(o, op, xs[0], l, 1)
        };
        let err = compute_gradient(ctx(), &backprop, &[t(&[2, 2], signed(4))]).unwrap_err();
        assert!(
            err.message()
                .contains("no way to take the second derivative"),
            "{err}"
        );
    }

    fn bias_add(format: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| {
            o.op1(
                "BiasAdd",
                &[xs[0], xs[1]],
                &[("data_format", format.into_attr_value())],
            )
        }
    }

    fn bias_add_grad(format: &'static str) -> impl Fn(&mut dyn Ops, &[Sym]) -> Result<Sym> {
        move |o: &mut dyn Ops, xs: &[Sym]| {
            o.op1(
                "BiasAddGrad",
                &[xs[0]],
                &[("data_format", format.into_attr_value())],
            )
        }
    }

    #[test]
    fn bias_add_gradients() {
        check(
            &bias_add("NHWC"),
            &[t(&[2, 3], signed(6)), t(&[3], vals(3, 1.0))],
        );
        check(
            &bias_add("NHWC"),
            &[t(&[2, 2, 3], signed(12)), t(&[3], vals(3, 1.0))],
        );
        check(
            &bias_add("NCHW"),
            &[t(&[2, 3, 2, 2], signed(24)), t(&[3], vals(3, 1.0))],
        );
        let no_format = |o: &mut dyn Ops, xs: &[Sym]| o.op1("BiasAdd", &[xs[0], xs[1]], &[]);
        check(&no_format, &[t(&[2, 3], signed(6)), t(&[3], vals(3, 1.0))]);
        check(&bias_add_grad("NHWC"), &[t(&[2, 3], signed(6))]);
        check(&bias_add_grad("NHWC"), &[t(&[2, 2, 3], signed(12))]);
        check(&bias_add_grad("NCHW"), &[t(&[2, 3, 2, 2], signed(24))]);
        let no_format = |o: &mut dyn Ops, xs: &[Sym]| o.op1("BiasAddGrad", &[xs[0]], &[]);
        check(&no_format, &[t(&[4, 2], signed(8))]);
        // Hand-checked: the bias gets the column sums.
        let mut tape = GradientTape::new(ctx(), false);
        let v = tape.watch(t(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0]));
        let b = tape.watch(t(&[2], vec![0.5f64, -0.5]));
        let y = tape.op1("BiasAdd", &[v, b], &[]).unwrap();
        let g = tape.gradient_tensors(y, &[v, b]).unwrap();
        assert_close(g[0].as_ref().unwrap(), &[2, 2], &[1.0; 4], 0.0);
        assert_close(g[1].as_ref().unwrap(), &[2], &[2.0, 2.0], 0.0);
    }
}
