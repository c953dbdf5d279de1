//! Kernel and shape-function tests of `ScatterNd`.

use half::f16;
use num_complex::Complex;
use opforge_core::{Code, DataType, Element, Registry, Result, Tensor};
use opforge_testing::shape::ShapeTestOp;
use opforge_testing::util::{ctx, t};
use opforge_testing::{infer_error, infer_ok};

fn scatter_nd(indices: Tensor, updates: Tensor, shape: Tensor) -> Result<Tensor> {
    ctx()
        .op("ScatterNd")
        .input(indices)
        .input(updates)
        .input(shape)
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
    assert_eq!(msg.strip_suffix(" [Op:ScatterNd]").unwrap_or(msg), text);
}

fn strs(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn registered_for_tensorflow_dtypes() {
    let k = &Registry::global().kernels_for("ScatterNd")[0];
    assert_eq!(k.def.host_memory_args, vec!["shape".to_string()]);
    // values from TensorFlow 2.21: CPU kernels for the number types, bool
    // and string, with int32/int64 indices (int16 has none).
    for dt in [
        DataType::Float,
        DataType::Half,
        DataType::BFloat16,
        DataType::Complex128,
        DataType::UInt64,
        DataType::Bool,
        DataType::String,
    ] {
        let u =
            Tensor::zeros_with_shape(dt, opforge_core::TensorShape::new(&[2]).unwrap()).unwrap();
        let y = scatter_nd(t(&[2, 1], vec![0i64, 0]), u, v(&[3i64])).unwrap();
        assert_eq!((y.dtype(), y.dims()), (dt, &[3i64][..]));
    }
    let e = scatter_nd(t(&[1, 1], vec![0i16]), v(&[1.0f32]), v(&[3i16]));
    assert!(e.is_err());
    let q = Tensor::zeros_with_shape(
        DataType::QInt8,
        opforge_core::TensorShape::new(&[1]).unwrap(),
    )
    .unwrap();
    assert!(scatter_nd(t(&[1, 1], vec![0i32]), q, v(&[3i32])).is_err());
}

#[test]
fn scatter_nd_values() {
    // values from TensorFlow 2.21
    let y = scatter_nd(
        t(&[3, 1], vec![0i32, 2, 0]),
        v(&[1.0f32, 2.0, 3.0]),
        v(&[4i32]),
    )
    .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[4.0, 0.0, 2.0, 0.0]);
    let y = scatter_nd(
        t(&[2, 2], vec![0i64, 1, 1, 0]),
        v(&[1.0f64, 3.0]),
        v(&[2i64, 2]),
    )
    .unwrap();
    assert_eq!(y.flat::<f64>().unwrap(), &[0.0, 1.0, 3.0, 0.0]);
    let y = scatter_nd(
        t(&[2, 1], vec![1i32, 0]),
        t(&[2, 2], vec![1i32, 2, 3, 4]),
        v(&[3i32, 2]),
    )
    .unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[3, 4, 1, 2, 0, 0]);
    // A batch of index tuples: indices [2, 2, 1], updates [2, 2, 3].
    let y = scatter_nd(
        t(&[2, 2, 1], vec![3i32, 1, 1, 0]),
        t(&[2, 2, 3], (1..=12).map(|x| x as f32).collect()),
        v(&[4i32, 3]),
    )
    .unwrap();
    assert_eq!(
        y.flat::<f32>().unwrap(),
        &[10.0, 11.0, 12.0, 11.0, 13.0, 15.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0]
    );
    // Duplicates: int8 wraps, half rounds per addition, strings concatenate
    // in index order, bools or (values from TensorFlow 2.21).
    let y = scatter_nd(t(&[2, 1], vec![0i32, 0]), v(&[100i8, 100]), v(&[3i32])).unwrap();
    assert_eq!(y.flat::<i8>().unwrap(), &[-56, 0, 0]);
    let h = v(&[
        f16::from_f32(2048.0),
        f16::from_f32(1.0),
        f16::from_f32(1.0),
    ]);
    let y = scatter_nd(t(&[3, 1], vec![0i32, 0, 0]), h, v(&[3i32])).unwrap();
    assert_eq!(y.flat::<f16>().unwrap()[0], f16::from_f32(2048.0));
    let s = Tensor::from_strings(&[3], strs(&["x", "y", "z"])).unwrap();
    let y = scatter_nd(t(&[3, 1], vec![1i32, 0, 1]), s, v(&[2i32])).unwrap();
    assert_eq!(y.strings().unwrap(), &strs(&["y", "xz"]));
    for (a, b) in [(true, false), (false, true)] {
        let y = scatter_nd(t(&[2, 1], vec![0i32, 0]), v(&[a, b]), v(&[3i32])).unwrap();
        assert_eq!(y.flat::<bool>().unwrap(), &[true, false, false]);
    }
    let c = v(&[Complex::new(1.0f32, 2.0), Complex::new(3.0, -1.0)]);
    let y = scatter_nd(t(&[2, 1], vec![1i64, 1]), c, v(&[2i64])).unwrap();
    assert_eq!(
        y.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(0.0, 0.0), Complex::new(4.0, 1.0)]
    );
    // Seven index dims, the most TensorFlow supports.
    let y = scatter_nd(t(&[1, 7], vec![0i32; 7]), v(&[1.0f32]), v(&[1i32; 7])).unwrap();
    assert_eq!(y.dims(), &[1; 7]);
    assert_eq!(y.flat::<f32>().unwrap(), &[1.0]);
}

#[test]
fn scatter_nd_large_matches_the_definition() {
    // Enough rows to shard over the thread pool.
    let (rows, slice, n) = (3000usize, 7usize, 5000usize);
    let idx: Vec<i64> = (0..n).map(|i| ((i * 7919) % rows) as i64).collect();
    let ups: Vec<f64> = (0..n * slice).map(|i| (i % 13) as f64 - 6.0).collect();
    let mut want = vec![0.0f64; rows * slice];
    for (i, &r) in idx.iter().enumerate() {
        for k in 0..slice {
            want[r as usize * slice + k] += ups[i * slice + k];
        }
    }
    let y = scatter_nd(
        t(&[n as i64, 1], idx),
        t(&[n as i64, slice as i64], ups),
        v(&[rows as i64, slice as i64]),
    )
    .unwrap();
    assert_eq!(y.flat::<f64>().unwrap(), &want[..]);
}

#[test]
fn scatter_nd_empty() {
    // values from TensorFlow 2.21
    let y = scatter_nd(t(&[0, 1], Vec::<i32>::new()), v::<f32>(&[]), v(&[0i32])).unwrap();
    assert_eq!(y.dims(), &[0]);
    let y = scatter_nd(t(&[0, 1], Vec::<i32>::new()), v::<f32>(&[]), v(&[3i32])).unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[0.0; 3]);
    let y = scatter_nd(
        t(&[0, 2], Vec::<i64>::new()),
        t(&[0, 4], Vec::<f32>::new()),
        v(&[3i64, 3, 4]),
    )
    .unwrap();
    assert_eq!(y.flat::<f32>().unwrap(), &[0.0; 36]);
    // An empty output of a huge shape is not allocated.
    let y = scatter_nd(
        t(&[0, 1], Vec::<i64>::new()),
        t(&[0, 0, 1 << 40], Vec::<f32>::new()),
        v(&[0i64, 0, 1 << 40]),
    )
    .unwrap();
    assert_eq!(y.num_elements(), 0);
}

#[test]
fn scatter_nd_errors() {
    // The messages of TensorFlow 2.21.
    let f = |x: &[f32]| v(x);
    assert_err(
        scatter_nd(Tensor::scalar(1i32), Tensor::scalar(1.0f32), v(&[3i32])),
        "Indices shape must have rank at least one. Found:[]",
    );
    assert_err(
        scatter_nd(t(&[1, 1], vec![1i32]), Tensor::scalar(1.0f32), v(&[3i32])),
        "Updates shape must have rank at least one. Found:[]",
    );
    assert_err(
        scatter_nd(t(&[1, 1], vec![0i32]), f(&[1.0]), v(&[-1i32])),
        "Dimension -1 must be >= 0",
    );
    assert_err(
        scatter_nd(t(&[1, 1], vec![0i64]), f(&[1.0; 4]), v(&[1i64 << 62, 4])),
        "Shape [4611686018427387904,4] would have more than 2**63 - 1 elements",
    );
    assert_err(
        scatter_nd(
            t(&[1, 0], Vec::<i32>::new()),
            f(&[1.0]),
            Tensor::from_vec::<i32>(&[0], vec![]).unwrap(),
        ),
        "Indices and updates specified for empty output shape",
    );
    assert_err(
        scatter_nd(
            t(&[2, 0], Vec::<i32>::new()),
            t(&[2, 3], vec![1.0f32; 6]),
            v(&[3i32]),
        ),
        "Indices and updates specified for empty output shape",
    );
    assert_err(
        scatter_nd(t(&[1, 1], vec![0i32]), f(&[1.0]), v(&[0i32])),
        "Indices and updates specified for empty output.  indices shape: [1,1]",
    );
    assert_err(
        scatter_nd(t(&[2, 1], vec![0i32, 1]), f(&[1.0]), v(&[3i32])),
        "Dimensions [0,1) of indices[shape=[2,1]] must match dimensions [0,1) of updates[shape=[1]]",
    );
    // Updates of lower rank than indices' batch dims (TensorFlow crashes).
    assert_err(
        scatter_nd(t(&[1, 1, 1], vec![0i32]), f(&[1.0]), v(&[3i32])),
        "Dimensions [0,2) of indices[shape=[1,1,1]] must match dimensions [0,2) of updates[shape=[1]]",
    );
    assert_err(
        scatter_nd(
            t(&[2, 1], vec![0i32, 1]),
            t(&[2, 1], vec![1.0f32, 2.0]),
            v(&[3i32]),
        ),
        "Dimensions [1,1) of input[shape=[3]] must match dimensions [1,2) of updates[shape=[2,1]]",
    );
    assert_err(
        scatter_nd(t(&[2, 1], vec![0i32, 1]), t(&[2, 3], vec![1.0f32; 6]), v(&[3i32, 2])),
        "Dimensions [1,2) of input[shape=[3,2]] must match dimensions [1,2) of updates[shape=[2,3]]",
    );
    assert_err(
        scatter_nd(v(&[0i32, 2]), f(&[1.0, 2.0]), v(&[3i32])),
        "Dimensions [2,1) of input[shape=[3]] must match dimensions [0,1) of updates[shape=[2]]",
    );
    assert_err(
        scatter_nd(t(&[1, 2], vec![0i32, 0]), f(&[1.0]), v(&[3i32])),
        "Dimensions [2,1) of input[shape=[3]] must match dimensions [1,1) of updates[shape=[1]]",
    );
    assert_err(
        scatter_nd(v(&[1i32]), f(&[5.0, 6.0]), v(&[3i32, 2])),
        "Dimensions [0,1) of indices[shape=[1]] = 1 must match dimensions [0,1) of updates[shape=[2]] = 2",
    );
    assert_err(
        scatter_nd(v::<i32>(&[]), t(&[0, 3], Vec::<f32>::new()), v(&[2i32, 3])),
        "Dimensions [0,2) of input[shape=[2,3]] must match dimensions [0,2) of updates[shape=[0,3]]",
    );
    assert_err(
        scatter_nd(t(&[1, 1], vec![0i32]), f(&[1.0]), t(&[1, 1], vec![3i32])),
        "Shape must be a vector",
    );
    assert_err(
        scatter_nd(
            t(&[0, 0], Vec::<i32>::new()),
            t(&[0, 3], Vec::<f32>::new()),
            v(&[3i32]),
        ),
        "Only indices.shape[-1] values between 1 and 5 are currently supported.  Requested rank: 0",
    );
    assert_err(
        scatter_nd(t(&[1, 8], vec![0i32; 8]), f(&[1.0]), v(&[1i32; 8])),
        "Only indices.shape[-1] values between 1 and 5 are currently supported.  Requested rank: 8",
    );
    // Bad indices: TensorFlow reports the last one.
    assert_err(
        scatter_nd(t(&[2, 1], vec![0i32, 5]), f(&[1.0, 2.0]), v(&[3i32])),
        "indices[1] = [5] does not index into shape [3]",
    );
    assert_err(
        scatter_nd(t(&[2, 1], vec![0i32, -1]), f(&[1.0, 2.0]), v(&[3i32])),
        "indices[1] = [-1] does not index into shape [3]",
    );
    assert_err(
        scatter_nd(
            t(&[3, 2], vec![0i32, 0, 1, 7, 1, 9]),
            f(&[1.0, 2.0, 3.0]),
            v(&[3i32, 3]),
        ),
        "indices[2] = [1, 9] does not index into shape [3,3]",
    );
    assert_err(
        scatter_nd(
            t(&[2, 2, 1], vec![0i32, 5, 1, 1]),
            t(&[2, 2], vec![1.0f32; 4]),
            v(&[3i32]),
        ),
        "indices[0,1] = [5] does not index into shape [3]",
    );
    for huge in [i64::MAX, i64::MIN, 1 << 40] {
        assert_err(
            scatter_nd(t(&[1, 1], vec![huge]), f(&[1.0]), v(&[3i64])),
            &format!("indices[0] = [{huge}] does not index into shape [3]"),
        );
    }
    // A huge output is refused by the allocation, not a panic.
    let e = scatter_nd(t(&[1, 1], vec![0i64]), f(&[1.0]), v(&[1i64 << 62])).unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
}

#[test]
fn scatter_nd_bad_indices_policy() {
    let run = |policy: &str| {
        ctx()
            .op("ScatterNd")
            .input(t(&[4, 1], vec![0i32, 5, -1, 1]))
            .input(v(&[1.0f32, 2.0, 3.0, 4.0]))
            .input(v(&[3i32]))
            .attr("bad_indices_policy", policy)
            .run1()
    };
    // values from TensorFlow 2.21
    assert_eq!(
        run("IGNORE").unwrap().flat::<f32>().unwrap(),
        &[1.0, 4.0, 0.0]
    );
    for policy in ["", "DEFAULT", "ERROR"] {
        assert_err(
            run(policy),
            "indices[2] = [-1] does not index into shape [3]",
        );
    }
    assert_err(run("FOO"), "Unknown bad indices handling attribute: FOO");
}

#[test]
fn scatter_nd_shape_fn() {
    let op = ShapeTestOp::new("ScatterNd").with_defaults().unwrap();
    infer_ok!(op, "[2,1];[2];[1]", "[?]");
    infer_ok!(op, "?;?;?", "?");
    let op = op.input_tensor(2, v(&[4i32, 3]));
    infer_ok!(op, "[2,1];[2,3];[2]", "[4,3]");
    infer_ok!(op, "?;?;[2]", "[4,3]");
    infer_ok!(op, "[?,2];[?];[2]", "[4,3]");
    infer_ok!(op, "[5,?];[5,7];[2]", "[4,3]");
    infer_error!(
        op,
        "[];[2];[2]",
        "Shape must be at least rank 1 but is rank 0"
    );
    infer_error!(
        op,
        "[2,1];[];[2]",
        "Shape must be at least rank 1 but is rank 0"
    );
    infer_error!(
        op,
        "[2,1];[3,3];[2]",
        "Dimensions [0,1) of indices[shape=[2,1]] = [2] must match dimensions [0,1) of updates[shape=[3,3]] = [3]: Dimension 0 in both shapes must be equal, but are 2 and 3. Shapes are [2] and [3]."
    );
    infer_error!(
        op,
        "[2,1];[2,4];[2]",
        "Dimensions [1,2) of input[shape=[4,3]] = [3] must match dimensions [1,2) of updates[shape=[2,4]] = [4]: Dimension 0 in both shapes must be equal, but are 3 and 4. Shapes are [3] and [4]."
    );
    let op = ShapeTestOp::new("ScatterNd")
        .with_defaults()
        .unwrap()
        .input_tensor(2, v(&[0i32, 3]));
    infer_error!(
        op,
        "[2,1];[2,3];[2]",
        "Indices and updates specified for empty input"
    );
    infer_ok!(op, "[0,1];[0,3];[2]", "[0,3]");
}

/// Dims after the output's zero whose product passes 2^63 (an empty but
/// valid shape): an empty output, not an overflow panic.
#[test]
fn scatter_nd_into_an_empty_shape_with_huge_trailing_dims() {
    let m = i64::MAX;
    let dims = [1i64, 2, 0, m, 1, m, 2];
    let shape = t(&[7], dims.to_vec());
    let indices = Tensor::zeros(DataType::Int64, &[0, 3]).unwrap();
    let updates = Tensor::zeros(DataType::Float, &[0, m, 1, m, 2]).unwrap();
    let y = scatter_nd(indices, updates, shape).unwrap();
    assert_eq!(y.dims(), &dims);
}
