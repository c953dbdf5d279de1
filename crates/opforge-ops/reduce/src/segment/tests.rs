//! Tests of `UnsortedSegmentSum`: kernel, shape function and gradient.

use super::*;
use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::autodiff::GradientTape;
use opforge_core::{Code, Element};
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::util::{assert_close, check, ctx, t, weighted};
use opforge_testing::{infer_error, infer_ok};

fn uss(data: Tensor, ids: Tensor, n: Tensor) -> Result<Tensor> {
    ctx()
        .op("UnsortedSegmentSum")
        .input(data)
        .input(ids)
        .input(n)
        .run1()
}

fn v<T: Element>(values: &[T]) -> Tensor {
    t(&[values.len() as i64], values.to_vec())
}

#[track_caller]
fn assert_err(r: Result<Tensor>, text: &str) {
    let e = r.expect_err("the op must fail");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    let msg = e.message();
    assert_eq!(
        msg.strip_suffix(" [Op:UnsortedSegmentSum]").unwrap_or(msg),
        text
    );
}

#[test]
fn registered_with_a_cpu_kernel() {
    opforge_testing::util::assert_one_cpu_kernel_each("crates/opforge-ops/reduce/src/segment/");
    unsorted_segment_sum().finalize().unwrap();
}

#[test]
fn values() {
    // values from TensorFlow 2.21
    let y = uss(
        v(&[1.0f32, 2.0, 3.0, 4.0]),
        v(&[0i32, 2, 0, -1]),
        Tensor::scalar(3i32),
    )
    .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[4.0, 0.0, 2.0]);
    let d = t(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = uss(d.clone(), v(&[1i64, 1, 0]), Tensor::scalar(2i64)).unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<f64>().unwrap(), &[5.0, 6.0, 4.0, 6.0]);
    let ids = t(&[3, 2], vec![1i32, 0, 1, 1, 0, 0]);
    let y = uss(d.clone(), ids, Tensor::scalar(2i64)).unwrap();
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.flat::<f64>().unwrap(), &[13.0, 8.0]);
    // Scalar ids: the whole of data is one row.
    let y = uss(
        v(&[1.0f32, 2.0]),
        Tensor::scalar(1i32),
        Tensor::scalar(3i32),
    )
    .unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(y.flat::<f32>().unwrap(), &[0.0, 0.0, 1.0, 2.0, 0.0, 0.0]);
    let y = uss(
        Tensor::scalar(5.0f32),
        Tensor::scalar(1i32),
        Tensor::scalar(3i32),
    )
    .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[0.0, 5.0, 0.0]);
    // int16 ids, integer wrap-around, per-addition rounding of half and
    // bfloat16, complex.
    let y = uss(v(&[1i32, 2, 3]), v(&[1i16, 1, -1]), Tensor::scalar(2i32)).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 3]);
    let y = uss(v(&[100i8, 100]), v(&[0i32, 0]), Tensor::scalar(1i32)).unwrap();
    assert_eq!(y.flat::<i8>().unwrap(), &[-56]);
    let h = v(&[2048.0f32, 1.0, 1.0].map(f16::from_f32));
    let y = uss(h, v(&[0i32, 0, 0]), Tensor::scalar(1i32)).unwrap();
    assert_eq!(y.flat::<f16>().unwrap(), &[f16::from_f32(2048.0)]);
    let b = v(&[256.0f32, 1.0, 1.0].map(bf16::from_f32));
    let y = uss(b, v(&[0i32, 0, 0]), Tensor::scalar(1i32)).unwrap();
    assert_eq!(y.flat::<bf16>().unwrap(), &[bf16::from_f32(256.0)]);
    let c = v(&[Complex::new(1.0f64, 2.0), Complex::new(3.0, -1.0)]);
    let y = uss(c, v(&[0i32, 0]), Tensor::scalar(2i32)).unwrap();
    assert_eq!(
        y.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(4.0, 1.0), Complex::new(0.0, 0.0)]
    );
    for dt in NUMERIC_KERNEL_TYPES {
        let d = Tensor::zeros_with_shape(*dt, TensorShape::new(&[2]).unwrap()).unwrap();
        let y = uss(d, v(&[1i32, 1]), Tensor::scalar(2i32)).unwrap();
        assert_eq!((y.dtype(), y.dims()), (*dt, &[2i64][..]));
    }
}

#[test]
fn large_matches_the_definition() {
    let (rows, slice, n) = (2500usize, 5usize, 6000usize);
    let ids: Vec<i64> = (0..n)
        .map(|i| (i * 7919 % (rows + 300)) as i64 - 300)
        .collect();
    let data: Vec<f64> = (0..n * slice).map(|i| (i % 11) as f64 - 5.0).collect();
    let mut want = vec![0.0f64; rows * slice];
    for (i, &r) in ids.iter().enumerate() {
        if r >= 0 {
            for k in 0..slice {
                want[r as usize * slice + k] += data[i * slice + k];
            }
        }
    }
    let y = uss(
        t(&[n as i64, slice as i64], data),
        v(&ids),
        Tensor::scalar(rows as i64),
    )
    .unwrap();
    assert_eq!(y.flat::<f64>().unwrap(), &want[..]);
}

#[test]
fn empty() {
    // values from TensorFlow 2.21
    let y = uss(v(&[1.0f32, 2.0]), v(&[-1i32, -2]), Tensor::scalar(0i32)).unwrap();
    assert_eq!(y.dims(), &[0]);
    let y = uss(
        t(&[0, 3], Vec::<f32>::new()),
        v::<i32>(&[]),
        Tensor::scalar(2i32),
    )
    .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[0.0; 6]);
    // No data: the ids are not checked.
    let y = uss(
        t(&[2, 0], Vec::<f32>::new()),
        v(&[5i32, 0]),
        Tensor::scalar(2i32),
    )
    .unwrap();
    assert_eq!(y.dims(), &[2, 0]);
    // A huge number of empty rows is an empty output.
    let y = uss(
        t(&[1, 0], Vec::<f32>::new()),
        v(&[0i64]),
        Tensor::scalar(1i64 << 62),
    )
    .unwrap();
    assert_eq!(y.num_elements(), 0);
}

#[test]
fn errors() {
    // The messages of TensorFlow 2.21.
    let d = || v(&[1.0f32, 2.0]);
    assert_err(
        uss(d(), v(&[1i32, 0]), v(&[3i32])),
        "num_segments should be a scalar, not shape [1]",
    );
    assert_err(
        uss(d(), v(&[1i32, 0, 0]), Tensor::scalar(3i32)),
        "data.shape = [2] does not start with segment_ids.shape = [3]",
    );
    assert_err(
        uss(
            t(&[1, 2], vec![1.0f32, 2.0]),
            t(&[1, 3], vec![1i32, 0, 0]),
            Tensor::scalar(3i32),
        ),
        "data.shape = [1,2] does not start with segment_ids.shape = [1,3]",
    );
    assert_err(
        uss(d(), v(&[1i32, 0]), Tensor::scalar(-1i32)),
        "Input num_segments == -1 must not be negative.",
    );
    assert_err(
        uss(d(), v(&[1i32, 3]), Tensor::scalar(3i32)),
        "segment_ids[1] = 3 is out of range [0, 3)",
    );
    assert_err(
        uss(
            t(&[2, 2], vec![1.0f32; 4]),
            t(&[2, 2], vec![1i32, 0, 5, 0]),
            Tensor::scalar(3i32),
        ),
        "segment_ids[1,0] = 5 is out of range [0, 3)",
    );
    // The first bad id is reported.
    assert_err(
        uss(
            v(&[1.0f32, 2.0, 3.0]),
            v(&[7i32, -5, 8]),
            Tensor::scalar(3i32),
        ),
        "segment_ids[0] = 7 is out of range [0, 3)",
    );
    assert_err(
        uss(d(), v(&[0i32, -2]), Tensor::scalar(0i32)),
        "segment_ids[0] = 0 is out of range [0, 0)",
    );
    for huge in [i64::MAX, 1 << 40] {
        assert_err(
            uss(d(), v(&[huge, 0]), Tensor::scalar(3i64)),
            &format!("segment_ids[0] = {huge} is out of range [0, 3)"),
        );
    }
    // i64::MIN is negative: dropped.
    let y = uss(d(), v(&[i64::MIN, 0]), Tensor::scalar(1i64)).unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[2.0]);
    // A huge output is refused by the allocation, not a panic.
    let e = uss(d(), v(&[1i64, 0]), Tensor::scalar(1i64 << 62)).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    let e = uss(
        t(&[1, 2], vec![1.0f32; 2]),
        v(&[0i64]),
        Tensor::scalar(i64::MAX),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

#[test]
fn shape_fn() {
    let op = ShapeTestOp::new("UnsortedSegmentSum")
        .with_defaults()
        .unwrap()
        .input_tensor(2, Tensor::scalar(5i32));
    // As TensorFlow 2.21's shape inference.
    infer_ok!(op, "[4,3];[4];[]", "[5,d0_1]");
    infer_ok!(op, "[4,3,2];[4,3];[]", "[5,d0_2]");
    infer_ok!(op, "?;[4];[]", "?");
    infer_ok!(op, "[4,3];?;[]", "?");
    infer_ok!(op, "[?,3];[4,?];[]", "[5]");
    infer_error!(
        op,
        "[4,3];[5];[]",
        "Dimensions must be equal, but are 4 and 5"
    );
    infer_error!(op, "[4,3];[4];[2]", "Shape must be rank 0 but is rank 1");
    let op = ShapeTestOp::new("UnsortedSegmentSum")
        .with_defaults()
        .unwrap();
    infer_ok!(op, "[4,3];[4];[]", "[?,d0_1]");
    let op = op.input_tensor(2, Tensor::scalar(-1i32));
    infer_error!(
        op,
        "[4,3];[4];[]",
        "Dimension size, given by scalar input 2, must be non-negative but is -1"
    );
}

#[test]
fn gradient() {
    let x: Vec<f64> = (0..12).map(|i| (i as f64) * 0.37 - 2.0).collect();
    for (dims, ids) in [
        (vec![4, 3], t(&[4], vec![2i32, 0, 2, -1])),
        (vec![2, 3, 2], t(&[2, 3], vec![0i64, 1, 0, -3, 1, 1])),
        (vec![4], t(&[4], vec![1i16, 1, 0, 1])),
    ] {
        let n: i64 = dims.iter().product();
        check(
            "UnsortedSegmentSum",
            &move |o, xs| {
                let i = o.constant(ids.clone())?;
                let k = o.constant(Tensor::scalar(3i32))?;
                let y = o.op1("UnsortedSegmentSum", &[xs[0], i, k], &[])?;
                weighted(o, y)
            },
            &[(dims, x[..n as usize].to_vec())],
        );
    }
    // Rows of negative ids get zeros; ids and num_segments get None.
    let mut tape = GradientTape::new(ctx(), false);
    let d = tape.watch(t(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let ids = tape.constant(v(&[1i32, -1, 0])).unwrap();
    let k = tape.constant(Tensor::scalar(2i32)).unwrap();
    let y = tape.op1("UnsortedSegmentSum", &[d, ids, k], &[]).unwrap();
    let y = tape.op1("Square", &[y], &[]).unwrap();
    let g = tape.gradient(y, &[d, ids, k]).unwrap();
    // y = [[5, 6], [1, 2]]^2: rows get 2 * y of their segment.
    assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[3, 2],
        &[2.0, 4.0, 0.0, 0.0, 10.0, 12.0],
        0.0,
    );
    assert!(g[1].is_none() && g[2].is_none());
}
