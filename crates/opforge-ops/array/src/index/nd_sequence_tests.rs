//! Kernel tests of `Gather` (V1), `GatherNd`, `ReverseSequence` and
//! `UnravelIndex`. Expected values from TensorFlow 2.21.

use super::tests::{assert_err, strs};
use super::*;
use opforge_core::{Code, Registry};
use opforge_testing::util::{assert_close, ctx, t};
fn iota_i32(dims: &[i64]) -> Tensor {
    let n: i64 = dims.iter().product();
    t(dims, (0..n as i32).collect())
}

fn gather_v1(params: Tensor, indices: Tensor) -> Result<Tensor> {
    ctx().op("Gather").input(params).input(indices).run1()
}

#[test]
fn gather_v1_is_gather_v2_along_axis_0() {
    let p = iota_i32(&[3, 4]);
    let y = gather_v1(p.clone(), t(&[1, 2], vec![2i32, 0])).unwrap();
    assert_eq!(y.dims(), &[1, 2, 4]);
    assert_eq!(y.flat::<i32>().unwrap(), &[8, 9, 10, 11, 0, 1, 2, 3]);
    let v2 = ctx()
        .op("GatherV2")
        .input(p.clone())
        .input(t(&[1, 2], vec![2i32, 0]))
        .input(Tensor::scalar(0i32))
        .run1()
        .unwrap();
    assert_eq!(v2.flat::<i32>().unwrap(), y.flat::<i32>().unwrap());
    // Strings, int64 indices.
    let s = Tensor::from_strings(&[3, 2], strs(&["a", "b", "c", "d", "e", "f"])).unwrap();
    let y = gather_v1(s, t(&[2, 1], vec![2i64, 0])).unwrap();
    assert_eq!(y.dims(), &[2, 1, 2]);
    assert_eq!(y.strings().unwrap(), &strs(&["e", "f", "a", "b"]));
    // validate_indices = false still validates (TensorFlow ignores it).
    let e = ctx()
        .op("Gather")
        .input(p.clone())
        .input(t(&[1], vec![5i32]))
        .attr("validate_indices", false)
        .run1();
    assert_err(e, Code::InvalidArgument, "indices[0] = 5 is not in [0, 3)");
    assert_err(
        gather_v1(p.clone(), t(&[1, 2], vec![2i32, 3])),
        Code::InvalidArgument,
        "indices[0,1] = 3 is not in [0, 3)",
    );
    assert_err(
        gather_v1(p.clone(), t(&[1], vec![-1i32])),
        Code::InvalidArgument,
        "indices[0] = -1 is not in [0, 3)",
    );
    assert_err(
        gather_v1(Tensor::scalar(1.0f32), t(&[1], vec![0i32])),
        Code::InvalidArgument,
        "params must be at least 1 dimensional",
    );
    // Empty.
    let y = gather_v1(t(&[0, 3], Vec::<f32>::new()), t(&[0], Vec::<i32>::new())).unwrap();
    assert_eq!(y.dims(), &[0, 3]);
    assert_err(
        gather_v1(t(&[0, 3], Vec::<f32>::new()), t(&[1], vec![0i32])),
        Code::InvalidArgument,
        "indices[0] = 0 is not in [0, 0)",
    );
    let y = gather_v1(p, t(&[2, 0], Vec::<i32>::new())).unwrap();
    assert_eq!(y.dims(), &[2, 0, 4]);
}

fn gather_nd(params: Tensor, indices: Tensor) -> Result<Tensor> {
    ctx().op("GatherNd").input(params).input(indices).run1()
}

#[test]
fn gather_nd_values() {
    let p = iota_i32(&[2, 3, 4]);
    let idx = t(&[2, 2, 2], vec![1i32, 2, 0, 0, 1, 0, 1, 1]);
    let y = gather_nd(p.clone(), idx).unwrap();
    assert_eq!(y.dims(), &[2, 2, 4]);
    assert_eq!(
        y.flat::<i32>().unwrap(),
        &[20, 21, 22, 23, 0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19]
    );
    let y = gather_nd(p.clone(), t(&[2, 3], vec![1i64, 2, 3, 0, 1, 2])).unwrap();
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[23, 6]);
    let y = gather_nd(p.clone(), t(&[2, 1], vec![1i16, 0])).unwrap();
    assert_eq!(y.dims(), &[2, 3, 4]);
    let want: Vec<i32> = (12..24).chain(0..12).collect();
    assert_eq!(y.flat::<i32>().unwrap(), &want[..]);
    // A vector of indices is one index tuple.
    let y = gather_nd(p.clone(), t(&[2], vec![1i32, 2])).unwrap();
    assert_eq!(y.dims(), &[4]);
    assert_eq!(y.flat::<i32>().unwrap(), &[20, 21, 22, 23]);
    // indices.shape[-1] == 0: every row is the whole of params.
    let y = gather_nd(p.clone(), t(&[2, 0], Vec::<i64>::new())).unwrap();
    assert_eq!(y.dims(), &[2, 2, 3, 4]);
    let want: Vec<i32> = (0..24).chain(0..24).collect();
    assert_eq!(y.flat::<i32>().unwrap(), &want[..]);
    // Strings.
    let s = Tensor::from_strings(&[2, 2], strs(&["a", "b", "c", "d"])).unwrap();
    let y = gather_nd(s, t(&[2, 2], vec![1i32, 0, 0, 1])).unwrap();
    assert_eq!(y.strings().unwrap(), &strs(&["c", "b"]));
    // Empty results.
    let y = gather_nd(t(&[0, 3], Vec::<f32>::new()), t(&[0, 1], Vec::<i32>::new())).unwrap();
    assert_eq!(y.dims(), &[0, 3]);
    let y = gather_nd(t(&[1; 9], vec![0f32]), t(&[0, 8], Vec::<i32>::new())).unwrap();
    assert_eq!(y.dims(), &[0, 1]);
}

#[test]
fn gather_nd_bad_indices_policy() {
    let p = iota_i32(&[2, 3, 4]);
    let idx = t(&[3, 2], vec![1i32, 2, 0, 5, 1, 0]);
    let y = ctx()
        .op("GatherNd")
        .input(p.clone())
        .input(idx.clone())
        .attr("bad_indices_policy", "IGNORE")
        .run1()
        .unwrap();
    assert_eq!(
        y.flat::<i32>().unwrap(),
        &[20, 21, 22, 23, 0, 0, 0, 0, 12, 13, 14, 15]
    );
    for policy in ["", "DEFAULT", "ERROR"] {
        let e = ctx()
            .op("GatherNd")
            .input(p.clone())
            .input(idx.clone())
            .attr("bad_indices_policy", policy)
            .run1();
        assert_err(
            e,
            Code::InvalidArgument,
            "indices[1] = [0, 5] does not index into param shape [2,3,4], node name: ",
        );
    }
    let e = ctx()
        .op("GatherNd")
        .input(p)
        .input(idx)
        .attr("bad_indices_policy", "FOO")
        .run1();
    assert_err(
        e,
        Code::InvalidArgument,
        "Unknown bad indices handling attribute: FOO",
    );
}

#[test]
fn gather_nd_errors() {
    let p = t(&[3, 4], (0..12).map(|x| x as f32).collect());
    let e = |params: &Tensor, idx: Tensor| gather_nd(params.clone(), idx);
    assert_err(
        e(&Tensor::scalar(1.0f32), t(&[1, 1], vec![0i32])),
        Code::InvalidArgument,
        "params must be at least a vector",
    );
    assert_err(
        e(&p, Tensor::scalar(0i32)),
        Code::InvalidArgument,
        "indices must be at least a vector",
    );
    assert_err(
        e(&p, t(&[1, 3], vec![0i32, 0, 0])),
        Code::InvalidArgument,
        "index innermost dimension length must be <= params rank; saw: 3 vs. 2",
    );
    // TensorFlow reports the last bad index tuple.
    assert_err(
        e(&p, t(&[4, 2], vec![5i32, 0, 6, 0, 0, 0, 7, 7])),
        Code::InvalidArgument,
        "indices[3] = [7, 7] does not index into param shape [3,4]",
    );
    assert_err(
        e(&p, t(&[2, 2, 2], vec![0i64, 0, 1, 1, 2, 2, -1, 1])),
        Code::InvalidArgument,
        "indices[1,1] = [-1, 1] does not index into param shape [3,4]",
    );
    assert_err(
        e(&p, t(&[2], vec![1i32, 7])),
        Code::InvalidArgument,
        "indices = [1, 7] does not index into param shape [3,4]",
    );
    assert_err(
        e(&t(&[0, 3], Vec::<f32>::new()), t(&[1, 1], vec![0i32])),
        Code::InvalidArgument,
        "Requested more than 0 entries, but params is empty.  Params shape: [0,3]",
    );
    assert_err(
        e(&t(&[2, 0], Vec::<f32>::new()), t(&[1, 2], vec![1i32, 0])),
        Code::InvalidArgument,
        "Requested more than 0 entries, but params is empty.  Params shape: [2,0]",
    );
    assert_err(
        e(&t(&[1; 8], vec![0f32]), t(&[1, 8], vec![0i32; 8])),
        Code::InvalidArgument,
        "Only indices.shape[-1] values between 1 and 7 are currently supported.  Requested rank: 8",
    );
    let big =
        Tensor::zeros_with_shape(DataType::Float, TensorShape::new(&[40000]).unwrap()).unwrap();
    assert_err(
        e(&big, t(&[0, 1], Vec::<i16>::new())),
        Code::InvalidArgument,
        "params.NumElements() too large for int16 indexing: 40000 > 32767",
    );
    assert_err(
        e(&t(&[0, 40000], Vec::<f32>::new()), t(&[1, 1], vec![0i16])),
        Code::InvalidArgument,
        "slice size is too large for indexing: 40000 > 32767",
    );
}

fn reverse_sequence(x: Tensor, lens: Tensor, seq_dim: i64, batch_dim: i64) -> Result<Tensor> {
    ctx()
        .op("ReverseSequence")
        .input(x)
        .input(lens)
        .attr("seq_dim", seq_dim)
        .attr("batch_dim", batch_dim)
        .run1()
}

#[test]
fn reverse_sequence_values() {
    let x = t(&[2, 3, 4], (0..24).map(|v| v as f32).collect());
    let y = reverse_sequence(x.clone(), t(&[2], vec![2i64, 3]), 2, 0).unwrap();
    assert_close(
        &y,
        &[2, 3, 4],
        &[
            1., 0., 2., 3., 5., 4., 6., 7., 9., 8., 10., 11., 14., 13., 12., 15., 18., 17., 16.,
            19., 22., 21., 20., 23.,
        ],
        0.0,
    );
    // The batch axis after the sequence axis.
    let y = reverse_sequence(x.clone(), t(&[4], vec![0i32, 1, 2, 3]), 1, 2).unwrap();
    assert_close(
        &y,
        &[2, 3, 4],
        &[
            0., 1., 6., 11., 4., 5., 2., 7., 8., 9., 10., 3., 12., 13., 18., 23., 16., 17., 14.,
            19., 20., 21., 22., 15.,
        ],
        0.0,
    );
    let x4 = t(&[2, 3, 4, 2], (0..48).map(|v| v as f32).collect());
    let y = reverse_sequence(x4.clone(), t(&[3], vec![4i64, 0, 2]), 2, 1).unwrap();
    let want = [
        6., 7., 4., 5., 2., 3., 0., 1., 8., 9., 10., 11., 12., 13., 14., 15., 18., 19., 16., 17.,
        20., 21., 22., 23., 30., 31., 28., 29., 26., 27., 24., 25., 32., 33., 34., 35., 36., 37.,
        38., 39., 42., 43., 40., 41., 44., 45., 46., 47.,
    ];
    assert_close(&y, &[2, 3, 4, 2], &want, 0.0);
    let y = reverse_sequence(x4, t(&[4], vec![2i32, 1, 2, 0]), 0, 2).unwrap();
    let want = [
        24., 25., 2., 3., 28., 29., 6., 7., 32., 33., 10., 11., 36., 37., 14., 15., 40., 41., 18.,
        19., 44., 45., 22., 23., 0., 1., 26., 27., 4., 5., 30., 31., 8., 9., 34., 35., 12., 13.,
        38., 39., 16., 17., 42., 43., 20., 21., 46., 47.,
    ];
    assert_close(&y, &[2, 3, 4, 2], &want, 0.0);
    let s = Tensor::from_strings(&[2, 3], strs(&["a", "b", "c", "d", "e", "f"])).unwrap();
    let y = reverse_sequence(s, t(&[2], vec![2i32, 3]), 1, 0).unwrap();
    assert_eq!(y.strings().unwrap(), &strs(&["b", "a", "c", "f", "e", "d"]));
    // Empty.
    let y = reverse_sequence(
        t(&[2, 0, 3], Vec::<f32>::new()),
        t(&[2], vec![0i32, 0]),
        1,
        0,
    )
    .unwrap();
    assert_eq!(y.dims(), &[2, 0, 3]);
    let y = reverse_sequence(
        t(&[0, 3], Vec::<f32>::new()),
        t(&[0], Vec::<i32>::new()),
        1,
        0,
    )
    .unwrap();
    assert_eq!(y.dims(), &[0, 3]);
}

#[test]
fn reverse_sequence_errors() {
    let x = t(&[2, 3, 4], vec![0f32; 24]);
    let l = t(&[2], vec![3i32, 1]);
    let cases: Vec<(Result<Tensor>, &str)> = vec![
        (
            reverse_sequence(x.clone(), l.clone(), -2, 0),
            "Invalid seq_dim -2",
        ),
        (
            reverse_sequence(x.clone(), l.clone(), 1, -3),
            "Invalid batch_dim -3",
        ),
        (
            reverse_sequence(x.clone(), l.clone(), 0, 0),
            "batch_dim == seq_dim == 0",
        ),
        (
            reverse_sequence(x.clone(), l.clone(), 3, 0),
            "seq_dim must be < input rank ( 3 vs. 3)",
        ),
        (
            reverse_sequence(x.clone(), l.clone(), 1, 3),
            "batch_dim must be < input rank ( 3 vs. 3)",
        ),
        (
            reverse_sequence(x.clone(), t(&[1, 2], vec![3i32, 1]), 1, 0),
            "seq_lengths must be 1-dim, not 2",
        ),
        (
            reverse_sequence(x.clone(), t(&[3], vec![3i32, 1, 1]), 1, 0),
            "Length of seq_lengths != input.dims(0), (3 vs. 2)",
        ),
        (
            reverse_sequence(x.clone(), t(&[2], vec![3i32, -1]), 1, 0),
            "seq_lens(1) < 0",
        ),
        (
            reverse_sequence(x.clone(), t(&[2], vec![3i64, 4]), 1, 0),
            "seq_lens(1) > input.dims(1)",
        ),
        (
            reverse_sequence(Tensor::scalar(1.0f32), l.clone(), 0, 0),
            "batch_dim == seq_dim == 0",
        ),
        (
            reverse_sequence(t(&[2; 6], vec![0f32; 64]), t(&[2], vec![2i32, 1]), 1, 0),
            "ReverseSequenceOp : Unhandled input dimensions: 6",
        ),
    ];
    for (r, msg) in cases {
        assert_err(r, Code::InvalidArgument, msg);
    }
}

fn unravel_index(indices: Tensor, dims: Tensor) -> Result<Tensor> {
    ctx().op("UnravelIndex").input(indices).input(dims).run1()
}

#[test]
fn unravel_index_values() {
    let y = unravel_index(t(&[3], vec![2i32, 5, 7]), t(&[2], vec![3i32, 3])).unwrap();
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 1, 2, 2, 2, 1]);
    let y = unravel_index(Tensor::scalar(7i32), t(&[2], vec![3i32, 3])).unwrap();
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[2, 1]);
    // Negative indices are not checked: C++'s truncating division.
    let y = unravel_index(t(&[1], vec![-1i32]), t(&[2], vec![3i32, 3])).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, -1]);
    let y = unravel_index(
        t(&[2], vec![-7i64, 1 << 40]),
        t(&[3], vec![1i64 << 20, 1 << 21, 1 << 21]),
    )
    .unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(y.flat::<i64>().unwrap(), &[0, 0, 0, 524288, -7, 0]);
    let y = unravel_index(t(&[1], vec![5i32]), t(&[3], vec![1024i32, 1024, 2047])).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 0, 5]);
    // No dims: a product of 1.
    let y = unravel_index(t(&[1], vec![0i32]), t(&[0], Vec::<i32>::new())).unwrap();
    assert_eq!(y.dims(), &[0, 1]);
    let y = unravel_index(Tensor::scalar(0i32), t(&[0], Vec::<i32>::new())).unwrap();
    assert_eq!(y.dims(), &[0]);
}

#[test]
fn unravel_index_errors() {
    let d = t(&[2], vec![3i32, 3]);
    let cases: Vec<(Result<Tensor>, &str)> = vec![
        (
            unravel_index(t(&[2, 2], vec![1i32, 2, 3, 4]), d.clone()),
            "The indices can only be scalar or vector, got \"[2,2]\"",
        ),
        (
            unravel_index(t(&[2, 0], Vec::<i32>::new()), d.clone()),
            "The indices can only be scalar or vector, got \"[2,0]\"",
        ),
        (
            unravel_index(t(&[0], Vec::<i32>::new()), t(&[1, 1], vec![3i32])),
            "received empty tensor indices: Tensor<type: int32 shape: [0] values: >",
        ),
        (
            unravel_index(t(&[0], Vec::<i64>::new()), t(&[2], vec![3i64, 3])),
            "received empty tensor indices: Tensor<type: int64 shape: [0] values: >",
        ),
        (
            unravel_index(t(&[1], vec![0i32]), t(&[1, 2], vec![3i32, 3])),
            "The indices can only be 1-D, got \"[1,2]\"",
        ),
        (
            unravel_index(t(&[1], vec![0i32]), t(&[2], vec![3i32, -3])),
            "Input dims cannot be negative. Got dim = -3 at index 1",
        ),
        (
            unravel_index(t(&[1], vec![0i32]), t(&[2], vec![3i32, 0])),
            "Input dims cannot contain a dim of zero, but dims contains zero at index 1",
        ),
        (
            unravel_index(t(&[1], vec![5i32]), t(&[2], vec![-3i32, 0])),
            "Input dims cannot be negative. Got dim = -3 at index 0",
        ),
        (
            unravel_index(t(&[1], vec![5i32]), t(&[3], vec![1 << 20, 1024, 3])),
            "Input dims product is causing integer overflow: (1048576    1024       3)",
        ),
        (
            unravel_index(t(&[1], vec![5i32]), t(&[3], vec![1024i32, 1024, 2048])),
            "Input dims product is causing integer overflow: (1024 1024 2048)",
        ),
        (
            unravel_index(t(&[1], vec![5i64]), t(&[2], vec![1i64 << 40, 1 << 40])),
            "Input dims product is causing integer overflow: (1099511627776 1099511627776)",
        ),
        (
            unravel_index(t(&[2], vec![2i32, 9]), d.clone()),
            "index is out of bound as with dims",
        ),
        (
            unravel_index(t(&[1], vec![5i32]), t(&[0], Vec::<i32>::new())),
            "index is out of bound as with dims",
        ),
    ];
    for (r, msg) in cases {
        assert_err(r, Code::InvalidArgument, msg);
    }
}

#[test]
fn new_kernels_match_tensorflow_registrations() {
    let def = |op: &str| Registry::global().kernels_for(op)[0].def.clone();
    let g = def("Gather");
    assert!(g.host_memory_args.is_empty());
    let nd = def("GatherNd");
    let tparams = &nd.constraints.iter().find(|c| c.0 == "Tparams").unwrap().1;
    assert!(tparams.contains(&DataType::Resource) && tparams.contains(&DataType::QInt32));
    assert!(!tparams.contains(&DataType::QInt16));
    let rs = def("ReverseSequence");
    let tt = &rs.constraints.iter().find(|c| c.0 == "T").unwrap().1;
    assert!(tt.contains(&DataType::String) && !tt.contains(&DataType::QInt8));
}

/// Found by scripts/hostile-cli: empty params whose other dims multiply
/// past 2^64 overflowed the inner size of Gather (V1 and V2 alike).
#[test]
fn gather_of_empty_params_with_huge_dims_is_empty() {
    let params = Tensor::zeros(DataType::Float, &[0, i64::MAX, 3, 1, 2]).unwrap();
    let indices = t(&[4, 0], Vec::<i32>::new());
    let y = gather_v1(params.clone(), indices).unwrap();
    assert_eq!(y.dims(), &[4, 0, i64::MAX, 3, 1, 2]);
    let y = gather_v1(params, t(&[2], vec![0i32, 0])).unwrap_err();
    assert_eq!(y.code(), Code::InvalidArgument, "{y}");
}
