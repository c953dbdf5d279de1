//! Kernel tests of the basic array ops.

use super::*;
use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::{Code, Registry};
use opforge_testing::util::{assert_close, ctx, t};

fn err_of(r: Result<Tensor>) -> Status {
    r.expect_err("the op must fail")
}

#[track_caller]
fn assert_err(r: Result<Tensor>, code: Code, text: &str) {
    let e = err_of(r);
    assert_eq!(e.code(), code, "{e}");
    assert!(e.message().contains(text), "{e} does not contain {text:?}");
}

fn strs(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    index_values(t, "test").unwrap()
}

#[test]
fn every_op_is_registered_with_a_cpu_kernel() {
    opforge_testing::util::assert_one_cpu_kernel_each("crates/opforge-ops/array/src/basic/");
    for name in [
        "Reshape",
        "Fill",
        "ExpandDims",
        "BroadcastTo",
        "Range",
        "Shape",
    ] {
        let k = &Registry::global().kernels_for(name)[0];
        assert!(
            !k.def.host_memory_args.is_empty(),
            "{name} keeps args in host memory"
        );
    }
}

#[test]
fn const_returns_its_value_without_copying() {
    let value = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let run = || {
        ctx()
            .op("Const")
            .attr("value", &value)
            .attr("dtype", DataType::Float)
            .run1()
            .unwrap()
    };
    let (a, b) = (run(), run());
    assert_eq!(a, value);
    assert!(
        a.shares_storage_with(&b),
        "both runs return the stored tensor"
    );
    let s = Tensor::from_strings(&[2], strs(&["a", "bc"])).unwrap();
    let out = ctx()
        .op("Const")
        .attr("value", &s)
        .attr("dtype", DataType::String)
        .run1()
        .unwrap();
    assert_eq!(out, s);
    assert_err(
        ctx()
            .op("Const")
            .attr("value", &value)
            .attr("dtype", DataType::Int32)
            .run1(),
        Code::InvalidArgument,
        "Type mismatch between value (float) and dtype (int32)",
    );
}

#[test]
fn identity_family_passes_inputs_through() {
    let x = t(&[3], vec![1i64, 2, 3]);
    for op in ["Identity", "StopGradient"] {
        let y = ctx().op(op).input(x.clone()).run1().unwrap();
        assert_eq!(y, x);
        assert!(y.shares_storage_with(&x), "{op} does not copy");
    }
    let s = Tensor::from_strings(&[2], strs(&["x", "y"])).unwrap();
    let y = ctx().op("Identity").input(s.clone()).run1().unwrap();
    assert!(y.shares_storage_with(&s));
    let b = t(&[], vec![true]);
    let outs = ctx()
        .op("IdentityN")
        .input_list(vec![x.clone(), s.clone(), b.clone()])
        .run()
        .unwrap();
    assert_eq!(outs, vec![x.clone(), s, b]);
    assert!(outs[0].shares_storage_with(&x));
    let e = Tensor::zeros(DataType::Half, &[0, 4]).unwrap();
    assert_eq!(ctx().op("Identity").input(e.clone()).run1().unwrap(), e);
}

#[test]
fn shape_size_and_rank() {
    let x = Tensor::zeros(DataType::Float, &[2, 3, 4]).unwrap();
    let s = ctx().op("Shape").input(x.clone()).run1().unwrap();
    assert_eq!(s.dtype(), DataType::Int32);
    assert_eq!(s.flat::<i32>().unwrap(), &[2, 3, 4]);
    let s = ctx()
        .op("Shape")
        .input(x.clone())
        .attr("out_type", DataType::Int64)
        .run1()
        .unwrap();
    assert_eq!(s.flat::<i64>().unwrap(), &[2, 3, 4]);
    let n = ctx().op("Size").input(x.clone()).run1().unwrap();
    assert_eq!(n.dims(), &[] as &[i64]);
    assert_eq!(n.scalar_value::<i32>().unwrap(), 24);
    let r = ctx().op("Rank").input(x.clone()).run1().unwrap();
    assert_eq!(r.scalar_value::<i32>().unwrap(), 3);
    // Scalars and empty tensors.
    let scalar = t(&[], vec![7u8]);
    let s = ctx().op("Shape").input(scalar.clone()).run1().unwrap();
    assert_eq!(s.dims(), &[0]);
    assert_eq!(
        ctx()
            .op("Rank")
            .input(scalar)
            .run1()
            .unwrap()
            .scalar_value::<i32>()
            .unwrap(),
        0
    );
    let e = Tensor::from_strings(&[0, 5], vec![]).unwrap();
    assert_eq!(
        i64s(&ctx().op("Shape").input(e.clone()).run1().unwrap()),
        vec![0, 5]
    );
    assert_eq!(i64s(&ctx().op("Size").input(e).run1().unwrap()), vec![0]);
    // A dimension past int32 (no elements, so no memory).
    let big = Tensor::zeros(DataType::Float, &[0, 3_000_000_000]).unwrap();
    assert_err(
        ctx().op("Shape").input(big.clone()).run1(),
        Code::InvalidArgument,
        "Shape output type is 32-bit  but dim 1 is 3000000000",
    );
    let s = ctx()
        .op("Shape")
        .input(big.clone())
        .attr("out_type", DataType::Int64)
        .run1()
        .unwrap();
    assert_eq!(i64s(&s), vec![0, 3_000_000_000]);
    let outs = ctx().op("ShapeN").input_list(vec![big, x.clone()]).run();
    assert!(outs
        .unwrap_err()
        .message()
        .contains("ShapeN output type is 32-bit but shape 0 dim 1 is 3000000000"));
}

#[test]
fn shape_n_of_two_inputs() {
    let a = t(&[2, 1], vec![1.0f64, 2.0]);
    let b = Tensor::from_strings(&[3], strs(&["a", "b", "c"])).unwrap();
    let outs = ctx()
        .op("ShapeN")
        .input_list(vec![a.clone(), a.clone()])
        .run()
        .unwrap();
    assert_eq!(outs.len(), 2);
    assert_eq!(outs[0].flat::<i32>().unwrap(), &[2, 1]);
    assert_eq!(outs[1].flat::<i32>().unwrap(), &[2, 1]);
    let b2 = Tensor::from_strings(&[1, 1, 2], strs(&["d", "e"])).unwrap();
    let outs = ctx()
        .op("ShapeN")
        .input_list(vec![b, b2])
        .attr("out_type", DataType::Int64)
        .run()
        .unwrap();
    assert_eq!(outs[0].flat::<i64>().unwrap(), &[3]);
    assert_eq!(outs[1].flat::<i64>().unwrap(), &[1, 1, 2]);
}

fn reshape(x: &Tensor, shape: Vec<i32>) -> Result<Tensor> {
    let n = shape.len() as i64;
    ctx()
        .op("Reshape")
        .input(x.clone())
        .input(t(&[n], shape))
        .run1()
}

#[test]
fn reshape_infers_minus_one_and_shares_storage() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    let y = reshape(&x, vec![3, -1]).unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[1, 2, 3, 4, 5, 6]);
    assert!(y.shares_storage_with(&x), "Reshape does not copy");
    let y = ctx()
        .op("Reshape")
        .input(x.clone())
        .input(t(&[3], vec![-1i64, 1, 2]))
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[3, 1, 2]);
    assert_eq!(reshape(&x, vec![6]).unwrap().dims(), &[6]);
    // A scalar shape argument means a vector (TensorFlow's legacy form).
    let s = ctx()
        .op("Reshape")
        .input(x.clone())
        .input(t(&[], vec![6i32]))
        .run1()
        .unwrap();
    assert_eq!(s.dims(), &[6]);
    // To and from scalars.
    let one = t(&[1, 1], vec![9.5f32]);
    assert_eq!(reshape(&one, vec![]).unwrap().dims(), &[] as &[i64]);
    // Empty tensors: -1 next to a 0 is inferred from the other dims.
    let e = Tensor::zeros(DataType::Float, &[2, 0]).unwrap();
    assert_eq!(reshape(&e, vec![0, -1]).unwrap().dims(), &[0, 2]);
    assert_eq!(reshape(&e, vec![5, 0, 7]).unwrap().dims(), &[5, 0, 7]);
    // Strings.
    let s = Tensor::from_strings(&[4], strs(&["a", "b", "c", "d"])).unwrap();
    let r = reshape(&s, vec![2, 2]).unwrap();
    assert_eq!(r.dims(), &[2, 2]);
    assert_eq!(r.strings().unwrap(), s.strings().unwrap());
    assert!(r.shares_storage_with(&s));
}

#[test]
fn reshape_errors_use_tensorflow_wording() {
    let x = t(&[2, 3], vec![0u8; 6]);
    let cases: &[(Vec<i32>, &str)] = &[
        (
            vec![2, 2],
            "Input to reshape is a tensor with 6 values, but the requested shape has 4",
        ),
        (vec![-1, -1], "Only one input size may be -1, not both 0 and 1"),
        (
            vec![-1, 4],
            "Input to reshape is a tensor with 6 values, but the requested shape requires a multiple of 4",
        ),
        (vec![3, -2], "Size 1 must be non-negative, not -2"),
    ];
    for (shape, msg) in cases {
        assert_err(reshape(&x, shape.clone()), Code::InvalidArgument, msg);
    }
    assert_err(
        ctx()
            .op("Reshape")
            .input(x.clone())
            .input(t(&[1, 2], vec![3i32, 2]))
            .run1(),
        Code::InvalidArgument,
        "sizes input must be 1-D, not [1,2]",
    );
    assert_err(
        ctx()
            .op("Reshape")
            .input(x)
            .input(t(&[3], vec![1i64 << 40, 1 << 40, 1 << 40]))
            .run1(),
        Code::InvalidArgument,
        "has too many elements",
    );
}

fn expand(x: &Tensor, dim: i32) -> Result<Tensor> {
    ctx()
        .op("ExpandDims")
        .input(x.clone())
        .input(t(&[], vec![dim]))
        .run1()
}

#[test]
fn expand_dims_accepts_minus_rank_minus_one_to_rank() {
    let x = t(&[2, 3], vec![1.0f64; 6]);
    for (dim, want) in [
        (0, vec![1, 2, 3]),
        (1, vec![2, 1, 3]),
        (2, vec![2, 3, 1]),
        (-1, vec![2, 3, 1]),
        (-2, vec![2, 1, 3]),
        (-3, vec![1, 2, 3]),
    ] {
        let y = expand(&x, dim).unwrap();
        assert_eq!(y.dims(), want.as_slice(), "dim {dim}");
        assert!(y.shares_storage_with(&x));
    }
    let y = ctx()
        .op("ExpandDims")
        .input(t(&[], vec![true]))
        .input(t(&[1], vec![0i64]))
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[1]);
    for dim in [3, -4] {
        assert_err(
            expand(&x, dim),
            Code::InvalidArgument,
            &format!("Tried to expand dim index {dim} for tensor with 2 dimensions."),
        );
    }
    assert_err(
        ctx()
            .op("ExpandDims")
            .input(x)
            .input(t(&[2], vec![0i32, 1]))
            .run1(),
        Code::InvalidArgument,
        "'dim' must be a tensor with a single value",
    );
}

fn squeeze(x: &Tensor, dims: Vec<i64>) -> Result<Tensor> {
    ctx()
        .op("Squeeze")
        .input(x.clone())
        .attr("squeeze_dims", dims)
        .run1()
}

#[test]
fn squeeze_all_or_specific_dims() {
    let x = t(&[1, 2, 1, 3], (0..6).collect::<Vec<i32>>());
    let y = squeeze(&x, vec![]).unwrap();
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 1, 2, 3, 4, 5]);
    assert!(y.shares_storage_with(&x));
    assert_eq!(squeeze(&x, vec![0]).unwrap().dims(), &[2, 1, 3]);
    assert_eq!(squeeze(&x, vec![-2]).unwrap().dims(), &[1, 2, 3]);
    assert_eq!(squeeze(&x, vec![2, 0]).unwrap().dims(), &[2, 3]);
    let ones = t(&[1, 1], vec![5i8]);
    assert_eq!(squeeze(&ones, vec![]).unwrap().dims(), &[] as &[i64]);
    let y = t(&[1, 3], vec![1u16, 2, 3]);
    assert_err(
        squeeze(&y, vec![1]),
        Code::InvalidArgument,
        "Can not squeeze dim[1], expected a dimension of 1, got 3",
    );
    assert_err(
        squeeze(&x, vec![4]),
        Code::InvalidArgument,
        "Tried to squeeze dim index 4 for tensor with 4 dimensions.",
    );
    let e = Tensor::zeros(DataType::Float, &[1, 0, 1]).unwrap();
    assert_eq!(squeeze(&e, vec![]).unwrap().dims(), &[0]);
}

fn fill(dims: Vec<i32>, value: Tensor) -> Result<Tensor> {
    let n = dims.len() as i64;
    ctx().op("Fill").input(t(&[n], dims)).input(value).run1()
}

#[test]
fn fill_every_dtype_family() {
    let y = fill(vec![2, 3], t(&[], vec![7.5f32])).unwrap();
    assert_close(&y, &[2, 3], &[7.5; 6], 0.0);
    let y = ctx()
        .op("Fill")
        .input(t(&[2], vec![2i64, 2]))
        .input(t(&[], vec![-3i64]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i64>().unwrap(), &[-3; 4]);
    let y = fill(vec![3], t(&[], vec![true])).unwrap();
    assert_eq!(y.flat::<bool>().unwrap(), &[true; 3]);
    let c = Complex::new(1.5f64, -2.0);
    let y = fill(vec![2], t(&[], vec![c])).unwrap();
    assert_eq!(y.flat::<Complex<f64>>().unwrap(), &[c, c]);
    let y = fill(vec![2], t(&[], vec![Complex::new(0.5f32, 1.0)])).unwrap();
    assert_eq!(y.dtype(), DataType::Complex64);
    assert_eq!(y.flat::<Complex<f32>>().unwrap()[1], Complex::new(0.5, 1.0));
    let y = fill(vec![1, 2], t(&[], vec![f16::from_f32(0.25)])).unwrap();
    assert_eq!(y.flat::<f16>().unwrap(), &[f16::from_f32(0.25); 2]);
    let y = fill(vec![2], t(&[], vec![bf16::from_f32(-1.0)])).unwrap();
    assert_eq!(y.flat::<bf16>().unwrap(), &[bf16::from_f32(-1.0); 2]);
    let y = fill(vec![2], t(&[], vec![200u8])).unwrap();
    assert_eq!(y.flat::<u8>().unwrap(), &[200, 200]);
    let q = t(&[], vec![-5i8]).bitcast(DataType::QInt8).unwrap();
    let y = fill(vec![3], q).unwrap();
    assert_eq!(y.dtype(), DataType::QInt8);
    assert_eq!(
        y.bitcast(DataType::Int8).unwrap().flat::<i8>().unwrap(),
        &[-5; 3]
    );
    let s = Tensor::from_strings(&[], strs(&["hi"])).unwrap();
    let y = fill(vec![2, 1], s).unwrap();
    assert_eq!(y.dims(), &[2, 1]);
    assert_eq!(y.strings().unwrap(), &strs(&["hi", "hi"])[..]);
    // A one-element vector value and a scalar dims (legacy forms).
    let y = ctx()
        .op("Fill")
        .input(t(&[], vec![2i32]))
        .input(t(&[1], vec![4u32]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<u32>().unwrap(), &[4, 4]);
    // Empty and large (sharded) outputs.
    assert_eq!(
        fill(vec![0, 3], t(&[], vec![1.0f64])).unwrap().dims(),
        &[0, 3]
    );
    let y = fill(vec![300, 301], t(&[], vec![9i16])).unwrap();
    assert!(y.flat::<i16>().unwrap().iter().all(|&v| v == 9));
    assert_eq!(y.num_elements(), 300 * 301);
}

#[test]
fn fill_errors() {
    assert_err(
        fill(vec![2, -1], t(&[], vec![1.0f32])),
        Code::InvalidArgument,
        "Dimension -1 must be >= 0",
    );
    assert_err(
        fill(vec![2], t(&[2], vec![1.0f32, 2.0])),
        Code::InvalidArgument,
        "value must represent a scalar, got shape [2]",
    );
    assert_err(
        ctx()
            .op("Fill")
            .input(t(&[1, 1], vec![2i32]))
            .input(t(&[], vec![1.0f32]))
            .run1(),
        Code::InvalidArgument,
        "dims must represent a vector, got shape [1,1]",
    );
}

#[test]
fn zeros_like_and_ones_like() {
    let x = t(&[2, 2], vec![1.5f32, -2.0, 3.0, 4.0]);
    let z = ctx().op("ZerosLike").input(x.clone()).run1().unwrap();
    assert_close(&z, &[2, 2], &[0.0; 4], 0.0);
    let o = ctx().op("OnesLike").input(x.clone()).run1().unwrap();
    assert_close(&o, &[2, 2], &[1.0; 4], 0.0);
    assert_eq!(
        x.flat::<f32>().unwrap()[0],
        1.5,
        "the shared input is untouched"
    );
    let o = ctx()
        .op("OnesLike")
        .input(t(&[3], vec![7i64, 8, 9]))
        .run1()
        .unwrap();
    assert_eq!(o.flat::<i64>().unwrap(), &[1, 1, 1]);
    let o = ctx()
        .op("OnesLike")
        .input(t(&[2], vec![false, true]))
        .run1()
        .unwrap();
    assert_eq!(o.flat::<bool>().unwrap(), &[true, true]);
    let o = ctx()
        .op("OnesLike")
        .input(t(&[1], vec![Complex::new(3.0f64, 4.0)]))
        .run1()
        .unwrap();
    assert_eq!(o.flat::<Complex<f64>>().unwrap(), &[Complex::new(1.0, 0.0)]);
    let o = ctx()
        .op("OnesLike")
        .input(t(&[1], vec![f16::from_f32(5.0)]))
        .run1()
        .unwrap();
    assert_eq!(o.flat::<f16>().unwrap(), &[f16::ONE]);
    let z = ctx()
        .op("ZerosLike")
        .input(t(&[2], vec![true, true]))
        .run1()
        .unwrap();
    assert_eq!(z.flat::<bool>().unwrap(), &[false, false]);
    let s = Tensor::from_strings(&[2], strs(&["a", "b"])).unwrap();
    let z = ctx().op("ZerosLike").input(s).run1().unwrap();
    assert_eq!(z.strings().unwrap(), &strs(&["", ""])[..]);
    let e = Tensor::zeros(DataType::Int32, &[0]).unwrap();
    assert_eq!(ctx().op("OnesLike").input(e).run1().unwrap().dims(), &[0]);
}

fn broadcast_to(x: &Tensor, shape: Vec<i32>) -> Result<Tensor> {
    let n = shape.len() as i64;
    ctx()
        .op("BroadcastTo")
        .input(x.clone())
        .input(t(&[n], shape))
        .run1()
}

#[test]
fn broadcast_to_repeats_along_size_one_and_new_dims() {
    let x = t(&[3], vec![1i32, 2, 3]);
    let y = broadcast_to(&x, vec![2, 3]).unwrap();
    assert_eq!(y.dims(), &[2, 3]);
    assert_eq!(y.flat::<i32>().unwrap(), &[1, 2, 3, 1, 2, 3]);
    let c = t(&[2, 1], vec![1.0f32, 2.0]);
    let y = broadcast_to(&c, vec![2, 3]).unwrap();
    assert_close(&y, &[2, 3], &[1.0, 1.0, 1.0, 2.0, 2.0, 2.0], 0.0);
    let y = broadcast_to(&c, vec![2, 2, 2]).unwrap();
    assert_close(
        &y,
        &[2, 2, 2],
        &[1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0],
        0.0,
    );
    let s = t(&[], vec![4u64]);
    assert_eq!(
        broadcast_to(&s, vec![2, 2]).unwrap().flat::<u64>().unwrap(),
        &[4; 4]
    );
    let one = t(&[1, 1], vec![6i8]);
    assert_eq!(
        broadcast_to(&one, vec![3]).unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(
        broadcast_to(&one, vec![2, 1, 2])
            .unwrap()
            .flat::<i8>()
            .unwrap(),
        &[6; 4]
    );
    let strings = Tensor::from_strings(&[2, 1], strs(&["a", "b"])).unwrap();
    let y = broadcast_to(&strings, vec![2, 2]).unwrap();
    assert_eq!(y.strings().unwrap(), &strs(&["a", "a", "b", "b"])[..]);
    // Same shape: passed through.
    let y = broadcast_to(&x, vec![3]).unwrap();
    assert!(y.shares_storage_with(&x));
    // Empty output: no check of the values, as TensorFlow.
    assert_eq!(broadcast_to(&x, vec![0, 3]).unwrap().dims(), &[0, 3]);
    // Large: the rows are sharded.
    let row: Vec<f64> = (0..257).map(f64::from).collect();
    let y = broadcast_to(&t(&[1, 257], row.clone()), vec![300, 257]).unwrap();
    let flat = y.flat::<f64>().unwrap();
    for r in [0, 151, 299] {
        assert_eq!(&flat[r * 257..(r + 1) * 257], row.as_slice());
    }
}

#[test]
fn broadcast_to_errors() {
    let x = t(&[2], vec![0i32, 1]);
    assert_err(
        broadcast_to(&x, vec![3]),
        Code::InvalidArgument,
        "Incompatible shapes: [2] vs. [3]",
    );
    assert_err(
        broadcast_to(&x, vec![2, 1]),
        Code::InvalidArgument,
        "Unable to broadcast tensor of shape [2] to tensor of shape [2,1]",
    );
    assert_err(
        broadcast_to(&t(&[1, 2], vec![0i32, 1]), vec![2]),
        Code::InvalidArgument,
        "Rank of input (2) must be no greater than rank of output shape (1).",
    );
    assert_err(
        broadcast_to(&x, vec![-2]),
        Code::InvalidArgument,
        "Dimension -2 must be >= 0",
    );
}

fn shape_args(op: &str, a: Vec<i32>, b: Vec<i32>) -> Result<Vec<Tensor>> {
    let (na, nb) = (a.len() as i64, b.len() as i64);
    ctx().op(op).input(t(&[na], a)).input(t(&[nb], b)).run()
}

#[test]
fn broadcast_args() {
    let r = shape_args("BroadcastArgs", vec![2, 1], vec![3]).unwrap();
    assert_eq!(r[0].flat::<i32>().unwrap(), &[2, 3]);
    let r = shape_args("BroadcastArgs", vec![], vec![4, 1]).unwrap();
    assert_eq!(r[0].flat::<i32>().unwrap(), &[4, 1]);
    let r = ctx()
        .op("BroadcastArgs")
        .input(t(&[1], vec![5i64]))
        .input(t(&[3], vec![2i64, 1, 1]))
        .run1()
        .unwrap();
    assert_eq!(r.flat::<i64>().unwrap(), &[2, 1, 5]);
    let e = shape_args("BroadcastArgs", vec![2, 3], vec![4]).unwrap_err();
    assert!(
        e.message().contains("Incompatible shapes: [2,3] vs. [4]"),
        "{e}"
    );
    let e = ctx()
        .op("BroadcastArgs")
        .input(t(&[1, 1], vec![1i32]))
        .input(t(&[1], vec![1i32]))
        .run()
        .unwrap_err();
    assert!(e.message().contains("In[0] must be a vector.[1,1]"), "{e}");
}

#[test]
fn broadcast_gradient_args_match_tensorflow() {
    // (s0, s1, r0, r1) as TensorFlow's BCast computes them.
    // (s0, s1, r0, r1)
    type Case = (Vec<i32>, Vec<i32>, Vec<i32>, Vec<i32>);
    let cases: &[Case] = &[
        (vec![2, 3], vec![3], vec![], vec![0]),
        (vec![3], vec![2, 3], vec![0], vec![]),
        // Identical shapes take BCast's fast path: nothing to reduce.
        (vec![1], vec![1], vec![], vec![]),
        (vec![2, 3], vec![2, 3], vec![], vec![]),
        (vec![2, 1], vec![1, 3], vec![1], vec![0]),
        // A dimension where both are 1 is reported for both.
        (vec![1, 1], vec![2, 1], vec![0, 1], vec![1]),
        (vec![], vec![2, 3], vec![0, 1], vec![]),
        (vec![4, 1, 5], vec![1, 3, 1], vec![1], vec![0, 2]),
    ];
    for (s0, s1, r0, r1) in cases {
        let r = shape_args("BroadcastGradientArgs", s0.clone(), s1.clone()).unwrap();
        assert_eq!(
            r[0].flat::<i32>().unwrap(),
            r0.as_slice(),
            "{s0:?} vs {s1:?}"
        );
        assert_eq!(
            r[1].flat::<i32>().unwrap(),
            r1.as_slice(),
            "{s0:?} vs {s1:?}"
        );
    }
    let r = ctx()
        .op("BroadcastGradientArgs")
        .input(t(&[2], vec![2i64, 3]))
        .input(t(&[1], vec![3i64]))
        .run()
        .unwrap();
    assert_eq!(r[1].flat::<i64>().unwrap(), &[0]);
    assert_eq!(r[0].dims(), &[0]);
    let e = shape_args("BroadcastGradientArgs", vec![2, 3], vec![4]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("Incompatible shapes: [2,3] vs. [4]"),
        "{e}"
    );
}

fn range<T: Element>(start: T, limit: T, delta: T) -> Result<Tensor> {
    ctx()
        .op("Range")
        .input(t(&[], vec![start]))
        .input(t(&[], vec![limit]))
        .input(t(&[], vec![delta]))
        .run1()
}

#[test]
fn range_integer_and_float() {
    assert_eq!(
        range(0i32, 10, 3).unwrap().flat::<i32>().unwrap(),
        &[0, 3, 6, 9]
    );
    assert_eq!(
        range(10i32, 1, -3).unwrap().flat::<i32>().unwrap(),
        &[10, 7, 4]
    );
    assert_eq!(
        range(-2i64, 2, 1).unwrap().flat::<i64>().unwrap(),
        &[-2, -1, 0, 1]
    );
    assert_eq!(range(3i32, 3, 1).unwrap().dims(), &[0]);
    assert_eq!(
        range(0u32, 5, 2).unwrap().flat::<u32>().unwrap(),
        &[0, 2, 4]
    );
    assert_eq!(
        range(5i8, -5, -4).unwrap().flat::<i8>().unwrap(),
        &[5, 1, -3]
    );
    assert_eq!(
        range(i64::MAX - 2, i64::MAX, 1)
            .unwrap()
            .flat::<i64>()
            .unwrap(),
        &[i64::MAX - 2, i64::MAX - 1]
    );
    let y = range(0.0f32, 1.0, 0.25).unwrap();
    assert_close(&y, &[4], &[0.0, 0.25, 0.5, 0.75], 0.0);
    // ceil(|(2 - 1) / 0.3|) = 4 elements.
    let y = range(1.0f64, 2.0, 0.3).unwrap();
    assert_close(&y, &[4], &[1.0, 1.3, 1.6, 1.9], 1e-12);
    let y = range(1.0f64, 0.0, -0.5).unwrap();
    assert_close(&y, &[2], &[1.0, 0.5], 0.0);
    let y = range(f16::from_f32(0.0), f16::from_f32(2.0), f16::from_f32(0.5)).unwrap();
    assert_close(&y, &[4], &[0.0, 0.5, 1.0, 1.5], 0.0);
    let y = range(
        bf16::from_f32(1.0),
        bf16::from_f32(-1.0),
        bf16::from_f32(-1.0),
    )
    .unwrap();
    assert_close(&y, &[2], &[1.0, 0.0], 0.0);
    // One-element vectors are accepted as scalars.
    let y = ctx()
        .op("Range")
        .input(t(&[1], vec![0i32]))
        .input(t(&[], vec![2i32]))
        .input(t(&[], vec![1i32]))
        .run1()
        .unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[0, 1]);
}

#[test]
fn range_errors() {
    assert_err(
        range(1i32, 5, 0),
        Code::InvalidArgument,
        "Requires delta != 0: 0",
    );
    assert_err(
        range(5i32, 1, 1),
        Code::InvalidArgument,
        "Requires start <= limit when delta > 0: 5/1",
    );
    assert_err(
        range(1i64, 5, -1),
        Code::InvalidArgument,
        "Requires start >= limit when delta < 0: 1/5",
    );
    assert_err(
        range(20.0f32, 1.0, 2.0),
        Code::InvalidArgument,
        "Requires start <= limit when delta > 0: 20/1",
    );
    assert_err(
        range(0.5f64, 1.5, -0.25),
        Code::InvalidArgument,
        "Requires start >= limit when delta < 0: 0.5/1.5",
    );
    assert_err(
        range(0.0f32, f32::INFINITY, 1.0),
        Code::InvalidArgument,
        "Requires ((limit - start) / delta) <= 9223372036854775807",
    );
    assert_err(
        ctx()
            .op("Range")
            .input(t(&[], vec![1.0f32]))
            .input(t(&[], vec![20.0f32]))
            .input(t(&[1, 1], vec![2.0f32]))
            .run1(),
        Code::InvalidArgument,
        "delta must be a scalar, not shape [1,1]",
    );
}

fn invert(x: Tensor) -> Result<Tensor> {
    ctx().op("InvertPermutation").input(x).run1()
}

#[test]
fn invert_permutation() {
    let y = invert(t(&[5], vec![3i32, 4, 0, 2, 1])).unwrap();
    assert_eq!(y.flat::<i32>().unwrap(), &[2, 4, 3, 0, 1]);
    let y = invert(t(&[3], vec![1i64, 2, 0])).unwrap();
    assert_eq!(y.flat::<i64>().unwrap(), &[2, 0, 1]);
    assert_eq!(invert(t(&[0], Vec::<i32>::new())).unwrap().dims(), &[0]);
    assert_err(
        invert(t(&[3], vec![0i32, 3, 1])),
        Code::InvalidArgument,
        "3 is not between 0 and 3",
    );
    assert_err(
        invert(t(&[3], vec![0i32, -1, 1])),
        Code::InvalidArgument,
        "-1 is not between 0 and 3",
    );
    assert_err(
        invert(t(&[3], vec![1i32, 1, 0])),
        Code::InvalidArgument,
        "1 is duplicated in the input.",
    );
    assert_err(
        invert(t(&[1, 1], vec![0i32])),
        Code::InvalidArgument,
        "invert_permutation expects a 1D vector.",
    );
}

#[test]
fn floats_print_as_tensorflow_does() {
    assert_eq!(fmt_float(5.0, true), "5");
    assert_eq!(fmt_float(0.25, true), "0.25");
    assert_eq!(fmt_float(f64::from(0.1f32), true), "0.1");
    assert_eq!(fmt_float(0.1, false), "0.1");
    assert_eq!(fmt_float(1e20, false), "1e+20");
    assert_eq!(fmt_float(1e-5, true), "1e-05");
    assert_eq!(fmt_float(123456.0, true), "123456");
    assert_eq!(fmt_float(1234567.0, true), "1234567");
    assert_eq!(fmt_float(-2.5, false), "-2.5");
    assert_eq!(fmt_float(f64::NEG_INFINITY, true), "-inf");
}

#[test]
fn helpers() {
    assert_eq!(strides_of(&[2, 3, 4]), vec![12, 4, 1]);
    assert_eq!(strides_of(&[]), Vec::<usize>::new());
    assert_eq!(
        int_values(&t(&[2], vec![200u8, 3]), "x").unwrap(),
        vec![200, 3]
    );
    assert!(int_values(&t(&[1], vec![1.0f32]), "x").is_err());
    assert_eq!(carrier_of(DataType::Half).unwrap(), DataType::UInt16);
    assert_eq!(carrier_of(DataType::Complex64).unwrap(), DataType::UInt64);
    assert_eq!(carrier_of(DataType::Bool).unwrap(), DataType::Bool);
}

/// TensorFlow 2.21 answers `[1, 0]` for `tf.reshape(tf.zeros([0]), [-1, 0])`,
/// eagerly and in a `tf.function`: with a zero in the requested shape, the
/// zero-size input dimensions are left out of the element count, so the
/// missing dimension is 1. (Issue 16 expected a rejection; TensorFlow does
/// not reject it, and opforge matches TensorFlow.)
#[test]
fn reshape_of_an_empty_tensor_with_an_inferred_dimension_matches_tensorflow() {
    let y = ctx()
        .op("Reshape")
        .input(t(&[0], Vec::<f32>::new()))
        .input(t(&[2], vec![-1i32, 0]))
        .run1()
        .unwrap();
    assert_eq!(y.dims(), &[1, 0]);
}
