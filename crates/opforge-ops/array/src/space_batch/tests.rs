//! Kernel tests of the space/batch/depth ops: expected values from
//! TensorFlow 2.21 (written out below), every check of TensorFlow's
//! kernels, empty tensors, every registered dtype family.

use half::{bf16, f16};
use num_complex::Complex;
use opforge_core::attrs::IntoAttrValue;
use opforge_core::{Code, DataType, Registry, Result, Tensor};
use opforge_testing::util::{ctx, t};

fn run(
    op: &str,
    inputs: Vec<Tensor>,
    attrs: &[(&str, opforge_core::proto::AttrValue)],
) -> Result<Tensor> {
    let mut call = ctx().op(op);
    for x in inputs {
        call = call.input(x);
    }
    for (k, v) in attrs {
        call = call.attr(k, v.clone());
    }
    call.run1()
}

fn i32m(dims: &[i64], v: Vec<i32>) -> Tensor {
    t(dims, v)
}

/// `from, from + 1, ...` in shape `dims`, as `T` (through `Cast`).
fn iota<T: opforge_core::Element>(dims: &[i64], from: i64) -> Tensor {
    let n: i64 = dims.iter().product();
    let x = t(dims, (from..from + n).collect::<Vec<i64>>());
    cast(x, T::DTYPE)
}

fn cast(x: Tensor, dtype: DataType) -> Tensor {
    run("Cast", vec![x], &[("DstT", dtype.into_attr_value())]).unwrap()
}

fn as_i64(x: &Tensor) -> Vec<i64> {
    cast(x.clone(), DataType::Int64)
        .flat::<i64>()
        .unwrap()
        .to_vec()
}

#[track_caller]
fn assert_values(got: &Tensor, dims: &[i64], want: &[i64]) {
    assert_eq!(got.dims(), dims, "{got:?}");
    assert_eq!(as_i64(got), want);
}

#[track_caller]
fn assert_err(r: Result<Tensor>, code: Code, text: &str) {
    let e = r.expect_err("the op must fail");
    assert_eq!(e.code(), code, "{e}");
    assert!(e.message().contains(text), "{e} does not contain {text:?}");
}

fn nd(op: &str, x: Tensor, block: Tensor, amounts: Tensor) -> Result<Tensor> {
    run(op, vec![x, block, amounts], &[])
}

fn v1(op: &str, x: Tensor, amounts: Tensor, block_size: i64) -> Result<Tensor> {
    run(
        op,
        vec![x, amounts],
        &[("block_size", block_size.into_attr_value())],
    )
}

fn depth(op: &str, x: Tensor, block_size: i64, format: &str) -> Result<Tensor> {
    run(
        op,
        vec![x],
        &[
            ("block_size", block_size.into_attr_value()),
            ("data_format", format.into_attr_value()),
        ],
    )
}

fn patches(x: Tensor, k: [i64; 4], s: [i64; 4], r: [i64; 4], padding: &str) -> Result<Tensor> {
    run(
        "ExtractImagePatches",
        vec![x],
        &[
            ("ksizes", k.to_vec().into_attr_value()),
            ("strides", s.to_vec().into_attr_value()),
            ("rates", r.to_vec().into_attr_value()),
            ("padding", padding.into_attr_value()),
        ],
    )
}

fn cpu_types(op: &str) -> Vec<DataType> {
    let k: Vec<_> = Registry::global()
        .kernels_for(op)
        .into_iter()
        .filter(|k| k.def.device_type == "CPU")
        .collect();
    assert_eq!(k.len(), 1, "{op}");
    k[0].def
        .constraints
        .iter()
        .find(|(a, _)| a == "T")
        .unwrap()
        .1
        .clone()
}

#[test]
fn kernels_have_tensorflows_dtypes() {
    for op in [
        "SpaceToBatchND",
        "BatchToSpaceND",
        "SpaceToBatch",
        "BatchToSpace",
    ] {
        let types = cpu_types(op);
        assert_eq!(types.len(), 12, "{op}: TF_CALL_REAL_NUMBER_TYPES");
        assert!(!types.contains(&DataType::Complex64) && !types.contains(&DataType::Bool));
    }
    // TF_CALL_ALL_TYPES (but variant, which tensors cannot hold), and qint8
    // for SpaceToDepth.
    let s2d = cpu_types("SpaceToDepth");
    assert_eq!(s2d.len(), 18);
    assert!(s2d.contains(&DataType::QInt8) && s2d.contains(&DataType::String));
    let d2s = cpu_types("DepthToSpace");
    assert_eq!(d2s.len(), 17);
    assert!(!d2s.contains(&DataType::QInt8) && d2s.contains(&DataType::Resource));
    // TF_CALL_NUMBER_TYPES.
    let eip = cpu_types("ExtractImagePatches");
    assert_eq!(eip.len(), 14);
    assert!(eip.contains(&DataType::Complex128) && !eip.contains(&DataType::Bool));
}

// ---------------------------------------------------------------------------
// SpaceToBatchND / BatchToSpaceND / SpaceToBatch / BatchToSpace
// ---------------------------------------------------------------------------

#[test]
fn space_to_batch_nd_as_tensorflow() {
    // values from TensorFlow 2.21
    let y = nd(
        "SpaceToBatchND",
        iota::<f32>(&[2, 3, 5, 2], 1),
        i32m(&[2], vec![2, 3]),
        i32m(&[2, 2], vec![1, 0, 2, 2]),
    )
    .unwrap();
    assert_values(
        &y,
        &[12, 2, 3, 2],
        &[
            0, 0, 0, 0, 0, 0, 0, 0, 13, 14, 19, 20, 0, 0, 0, 0, 0, 0, 0, 0, 43, 44, 49, 50, 0, 0,
            0, 0, 0, 0, 0, 0, 15, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 45, 46, 0, 0, 0, 0, 0, 0, 0, 0,
            11, 12, 17, 18, 0, 0, 0, 0, 0, 0, 0, 0, 41, 42, 47, 48, 0, 0, 0, 0, 3, 4, 9, 10, 0, 0,
            23, 24, 29, 30, 0, 0, 33, 34, 39, 40, 0, 0, 53, 54, 59, 60, 0, 0, 5, 6, 0, 0, 0, 0, 25,
            26, 0, 0, 0, 0, 35, 36, 0, 0, 0, 0, 55, 56, 0, 0, 1, 2, 7, 8, 0, 0, 21, 22, 27, 28, 0,
            0, 31, 32, 37, 38, 0, 0, 51, 52, 57, 58, 0, 0,
        ],
    );
    // A leading block dim of 1 without padding folds into the batch dim (int64 arguments).
    let y = nd(
        "SpaceToBatchND",
        iota::<i64>(&[2, 2, 4, 3, 2], 1),
        t(&[2], vec![1i64, 2]),
        t(&[2, 2], vec![0i64, 0, 1, 1]),
    )
    .unwrap();
    assert_values(
        &y,
        &[4, 2, 3, 3, 2],
        &[
            0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 19, 20, 21, 22, 23, 24, 0, 0, 0, 0, 0, 0, 31,
            32, 33, 34, 35, 36, 43, 44, 45, 46, 47, 48, 0, 0, 0, 0, 0, 0, 55, 56, 57, 58, 59, 60,
            67, 68, 69, 70, 71, 72, 0, 0, 0, 0, 0, 0, 79, 80, 81, 82, 83, 84, 91, 92, 93, 94, 95,
            96, 1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 17, 18, 0, 0, 0, 0, 0, 0, 25, 26, 27, 28, 29, 30,
            37, 38, 39, 40, 41, 42, 0, 0, 0, 0, 0, 0, 49, 50, 51, 52, 53, 54, 61, 62, 63, 64, 65,
            66, 0, 0, 0, 0, 0, 0, 73, 74, 75, 76, 77, 78, 85, 86, 87, 88, 89, 90, 0, 0, 0, 0, 0, 0,
        ],
    );
    // A trailing one folds into the depth.
    let y = nd(
        "SpaceToBatchND",
        iota::<i16>(&[1, 4, 2, 3], 1),
        i32m(&[2], vec![2, 1]),
        i32m(&[2, 2], vec![0, 2, 0, 0]),
    )
    .unwrap();
    assert_values(
        &y,
        &[2, 3, 2, 3],
        &[
            1, 2, 3, 4, 5, 6, 13, 14, 15, 16, 17, 18, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 19,
            20, 21, 22, 23, 24, 0, 0, 0, 0, 0, 0,
        ],
    );
    // Three block dims, one of them 1 with padding (not folded).
    let y = nd(
        "SpaceToBatchND",
        iota::<u8>(&[1, 2, 3, 4, 1], 1),
        i32m(&[3], vec![2, 1, 2]),
        i32m(&[3, 2], vec![0, 0, 1, 0, 0, 2]),
    )
    .unwrap();
    assert_values(
        &y,
        &[4, 1, 4, 3, 1],
        &[
            0, 0, 0, 1, 3, 0, 5, 7, 0, 9, 11, 0, 0, 0, 0, 2, 4, 0, 6, 8, 0, 10, 12, 0, 0, 0, 0, 13,
            15, 0, 17, 19, 0, 21, 23, 0, 0, 0, 0, 14, 16, 0, 18, 20, 0, 22, 24, 0,
        ],
    );
}

#[test]
fn batch_to_space_nd_as_tensorflow() {
    // values from TensorFlow 2.21
    let y = nd(
        "BatchToSpaceND",
        iota::<f32>(&[12, 2, 2, 1], 1),
        i32m(&[2], vec![2, 3]),
        i32m(&[2, 2], vec![1, 0, 2, 1]),
    )
    .unwrap();
    assert_values(
        &y,
        &[2, 3, 3, 1],
        &[
            41, 26, 34, 19, 4, 12, 43, 28, 36, 45, 30, 38, 23, 8, 16, 47, 32, 40,
        ],
    );
    let y = nd(
        "BatchToSpaceND",
        iota::<f64>(&[8, 1, 3, 2, 1], 1),
        i32m(&[3], vec![2, 2, 2]),
        i32m(&[3, 2], vec![0, 1, 1, 2, 0, 0]),
    )
    .unwrap();
    assert_values(
        &y,
        &[1, 1, 3, 4, 1],
        &[13, 19, 14, 20, 3, 9, 4, 10, 15, 21, 16, 22],
    );
}

#[test]
fn space_to_batch_and_batch_to_space_v1_as_tensorflow() {
    // values from TensorFlow 2.21
    let y = v1(
        "SpaceToBatch",
        iota::<f32>(&[1, 4, 3, 1], 1),
        i32m(&[2, 2], vec![0, 0, 1, 0]),
        2,
    )
    .unwrap();
    assert_values(
        &y,
        &[4, 2, 2, 1],
        &[0, 2, 0, 8, 1, 3, 7, 9, 0, 5, 0, 11, 4, 6, 10, 12],
    );
    let crops = t(&[2, 2], vec![0i64, 1, 1, 0]);
    let y = v1("BatchToSpace", iota::<f32>(&[4, 2, 2, 1], 1), crops, 2).unwrap();
    assert_values(&y, &[1, 3, 3, 1], &[5, 2, 6, 13, 10, 14, 7, 4, 8]);
}

#[test]
fn batch_to_space_inverts_space_to_batch_for_every_dtype() {
    let block = i32m(&[2], vec![2, 3]);
    let pads = i32m(&[2, 2], vec![1, 1, 0, 3]);
    let inputs = [
        iota::<f32>(&[3, 2, 3, 2], 1),
        iota::<f64>(&[3, 2, 3, 2], -5),
        iota::<i8>(&[3, 2, 3, 2], -9),
        iota::<u16>(&[3, 2, 3, 2], 7),
        iota::<u32>(&[3, 2, 3, 2], 7),
        iota::<u64>(&[3, 2, 3, 2], 7),
        iota::<i32>(&[3, 2, 3, 2], 7),
        t(
            &[3, 2, 3, 2],
            (0..36).map(|v| f16::from_f32(v as f32)).collect(),
        ),
        t(
            &[3, 2, 3, 2],
            (0..36).map(|v| bf16::from_f32(v as f32)).collect(),
        ),
    ];
    for x in inputs {
        let y = nd("SpaceToBatchND", x.clone(), block.clone(), pads.clone()).unwrap();
        assert_eq!(y.dims(), &[18, 2, 2, 2]);
        assert_eq!(y.dtype(), x.dtype());
        // Padding is zero: 36 of the 72 elements.
        assert!(as_i64(&y).iter().filter(|&&v| v == 0).count() >= 36);
        let back = nd("BatchToSpaceND", y, block.clone(), pads.clone()).unwrap();
        assert_eq!(back.dims(), x.dims());
        assert_eq!(as_i64(&back), as_i64(&x));
    }
}

#[test]
fn space_batch_identity_and_empty_tensors() {
    // No block dims, or only trivial ones: the input itself.
    let x = iota::<f32>(&[1, 4, 4, 1], 1);
    for (block, pads) in [
        (i32m(&[0], vec![]), i32m(&[0, 2], vec![])),
        (i32m(&[2], vec![1, 1]), i32m(&[2, 2], vec![0; 4])),
    ] {
        for op in ["SpaceToBatchND", "BatchToSpaceND"] {
            let y = nd(op, x.clone(), block.clone(), pads.clone()).unwrap();
            assert_values(&y, &[1, 4, 4, 1], &as_i64(&x));
        }
    }
    // Empty batch, spatial and depth dims.
    let block = i32m(&[2], vec![2, 2]);
    let zero = i32m(&[2, 2], vec![0; 4]);
    let y = nd(
        "SpaceToBatchND",
        iota::<f32>(&[0, 2, 2, 3], 0),
        block.clone(),
        zero.clone(),
    )
    .unwrap();
    assert_eq!(y.dims(), &[0, 1, 1, 3]);
    let y = nd(
        "SpaceToBatchND",
        iota::<f32>(&[2, 0, 2, 3], 0),
        block.clone(),
        zero.clone(),
    )
    .unwrap();
    assert_eq!(y.dims(), &[8, 0, 1, 3]);
    let y = nd(
        "SpaceToBatchND",
        iota::<f32>(&[1, 2, 2, 0], 0),
        block.clone(),
        zero.clone(),
    )
    .unwrap();
    assert_eq!(y.dims(), &[4, 1, 1, 0]);
    // An empty spatial dim padded to a block: all padding.
    let pads = i32m(&[2, 2], vec![1, 1, 0, 0]);
    let y = nd(
        "SpaceToBatchND",
        iota::<i32>(&[1, 0, 2, 1], 0),
        block.clone(),
        pads,
    )
    .unwrap();
    assert_values(&y, &[4, 1, 1, 1], &[0, 0, 0, 0]);
    let y = nd(
        "BatchToSpaceND",
        iota::<f32>(&[0, 2, 2, 3], 0),
        block.clone(),
        zero.clone(),
    )
    .unwrap();
    assert_eq!(y.dims(), &[0, 4, 4, 3]);
    let y = nd(
        "BatchToSpaceND",
        iota::<f32>(&[4, 1, 1, 0], 0),
        block.clone(),
        zero,
    )
    .unwrap();
    assert_eq!(y.dims(), &[1, 2, 2, 0]);
    // Negative blocks whose product is positive pass TensorFlow's check
    // when the dims they act on are empty.
    let y = nd(
        "BatchToSpaceND",
        iota::<f32>(&[4, 0, 0, 1], 0),
        i32m(&[2], vec![-2, -2]),
        i32m(&[2, 2], vec![0; 4]),
    )
    .unwrap();
    assert_eq!(y.dims(), &[1, 0, 0, 1]);
}

#[test]
fn space_to_batch_checks_as_tensorflow() {
    let x = iota::<f32>(&[1, 4, 4, 1], 1);
    let s2b = |x: &Tensor, b: Tensor, p: Tensor| nd("SpaceToBatchND", x.clone(), b, p);
    let inv = Code::InvalidArgument;
    let zero = || i32m(&[2, 2], vec![0; 4]);
    assert_err(
        s2b(&x, i32m(&[1, 1], vec![2]), i32m(&[1, 2], vec![0, 0])),
        inv,
        "block_shape rank should be 1 instead of 2",
    );
    assert_err(
        nd(
            "SpaceToBatchND",
            iota::<f32>(&[2, 2], 0),
            i32m(&[2], vec![2, 2]),
            zero(),
        ),
        inv,
        "input rank should be >= 3 instead of 2",
    );
    assert_err(
        s2b(&x, i32m(&[2], vec![2, 2]), i32m(&[1, 2], vec![0, 0])),
        inv,
        "paddings should have shape [2, 2] instead of [1,2]",
    );
    assert_err(
        s2b(&x, i32m(&[2], vec![2, -2]), zero()),
        inv,
        "All values in block_shape must be positive, got value, -2 at index 1.",
    );
    assert_err(
        s2b(&x, i32m(&[2], vec![0, 2]), zero()),
        inv,
        "All values in block_shape must be positive, got value, 0 at index 0.",
    );
    assert_err(
        s2b(&x, i32m(&[2], vec![3, 2]), zero()),
        inv,
        "padded_shape[0]=4 is not divisible by block_shape[0]=3",
    );
    assert_err(
        s2b(&x, i32m(&[2], vec![2, 2]), i32m(&[2, 2], vec![-2, 0, 0, 0])),
        inv,
        "Paddings must be non-negative",
    );
    assert_err(
        nd(
            "SpaceToBatchND",
            iota::<f32>(&[1, 2, 2, 2, 2, 2, 1], 0),
            i32m(&[5], vec![2; 5]),
            i32m(&[5, 2], vec![0; 10]),
        ),
        inv,
        "Maximum number of non-combined block dimensions is 5 but must not exceed 4",
    );
    assert_err(
        v1("SpaceToBatch", iota::<f32>(&[1, 4, 4], 0), zero(), 2),
        inv,
        "Input rank should be: 4instead of: 3",
    );
    // Overflows are errors, not wrapped values.
    let big = 1i64 << 40;
    assert_err(
        nd(
            "SpaceToBatchND",
            iota::<f32>(&[2, 2, 2, 1], 0),
            t(&[2], vec![big, big]),
            t(&[2, 2], vec![0i64, big - 2, 0, big - 2]),
        ),
        inv,
        "Product of block sizes must be positive",
    );
    assert_err(
        nd(
            "SpaceToBatchND",
            iota::<f32>(&[1, 2, 1], 0),
            t(&[1], vec![2i64]),
            t(&[1, 2], vec![i64::MAX, 0]),
        ),
        inv,
        "padded_shape[0] overflows int64",
    );
    assert_err(
        nd("SpaceToBatchND", iota::<f32>(&[2, 2, 1], 0), t(&[1], vec![1i64 << 62]), t(&[1, 2], vec![0i64, (1 << 62) - 2])),
        inv,
        "Negative output dimension size caused by overflow when multiplying 2 and 4611686018427387904",
    );
    // The allocation limit applies to the output.
    let e = nd(
        "SpaceToBatchND",
        iota::<f32>(&[1, 1, 1, 1], 0),
        t(&[2], vec![1i64 << 20, 1 << 20]),
        t(&[2, 2], vec![0i64, (1 << 20) - 1, 0, (1 << 20) - 1]),
    )
    .unwrap_err();
    assert!(
        matches!(e.code(), Code::ResourceExhausted | Code::InvalidArgument),
        "{e}"
    );
}

#[test]
fn batch_to_space_checks_as_tensorflow() {
    let x = iota::<f32>(&[4, 2, 2, 1], 1);
    let b2s = |b: Tensor, c: Tensor| nd("BatchToSpaceND", x.clone(), b, c);
    let inv = Code::InvalidArgument;
    let zero = || i32m(&[2, 2], vec![0; 4]);
    assert_err(
        b2s(i32m(&[1, 1], vec![2]), i32m(&[1, 2], vec![0, 0])),
        inv,
        "block_shape rank should be 1 instead of 2",
    );
    assert_err(
        nd(
            "BatchToSpaceND",
            iota::<f32>(&[2, 2], 0),
            i32m(&[2], vec![2, 2]),
            zero(),
        ),
        inv,
        "input rank should be >= 3 instead of 2",
    );
    assert_err(
        b2s(i32m(&[2], vec![2, 2]), i32m(&[1, 2], vec![0, 0])),
        inv,
        "crops should have shape [2, 2] instead of [1,2]",
    );
    assert_err(
        b2s(i32m(&[2], vec![2, -2]), zero()),
        inv,
        "Product of block sizes must be positive, got -4",
    );
    assert_err(
        b2s(i32m(&[2], vec![0, 2]), zero()),
        inv,
        "Product of block sizes must be positive, got 0",
    );
    assert_err(
        b2s(i32m(&[2], vec![-2, -2]), zero()),
        inv,
        "cropped_shape[0]=-4 must be non-negative",
    );
    assert_err(
        nd(
            "BatchToSpaceND",
            iota::<f32>(&[3, 2, 2, 1], 0),
            i32m(&[2], vec![2, 2]),
            zero(),
        ),
        inv,
        "Input batch dimension (3) is not divisible by product of block sizes (4)",
    );
    assert_err(
        b2s(i32m(&[2], vec![2, 2]), i32m(&[2, 2], vec![0, -1, 0, 0])),
        inv,
        "Crops must be non-negative",
    );
    assert_err(
        b2s(i32m(&[2], vec![2, 2]), i32m(&[2, 2], vec![3, 2, 0, 0])),
        inv,
        "cropped_shape[0]=-1 must be non-negative",
    );
    assert_err(
        nd(
            "BatchToSpaceND",
            iota::<f32>(&[32, 2, 2, 2, 2, 2, 1], 0),
            i32m(&[5], vec![2; 5]),
            i32m(&[5, 2], vec![0; 10]),
        ),
        inv,
        "Maximum number of non-combined block dimensions is 5 but must not exceed 4",
    );
    assert_err(
        v1("BatchToSpace", iota::<f32>(&[4, 4, 4], 0), zero(), 2),
        inv,
        "Input rank should be: 4instead of: 3",
    );
    assert_err(
        nd(
            "BatchToSpaceND",
            x.clone(),
            t(&[2], vec![1i64 << 32, 1 << 32]),
            t(&[2, 2], vec![0i64; 4]),
        ),
        inv,
        "Product of block sizes must be positive",
    );
    assert_err(
        nd(
            "BatchToSpaceND",
            iota::<f32>(&[2, 2, 1], 0),
            t(&[1], vec![2i64]),
            t(&[1, 2], vec![i64::MAX, 0]),
        ),
        inv,
        "cropped_shape[0]=",
    );
    // Kernel-construction check of the V1 ops (the OpDef's minimum is 2).
    let e = v1("BatchToSpace", x.clone(), zero(), 1).unwrap_err();
    assert_eq!(e.code(), inv, "{e}");
}

// ---------------------------------------------------------------------------
// SpaceToDepth / DepthToSpace
// ---------------------------------------------------------------------------

#[test]
fn space_to_depth_and_depth_to_space_as_tensorflow() {
    // values from TensorFlow 2.21
    let y = depth("SpaceToDepth", iota::<i32>(&[2, 4, 6, 2], 0), 2, "NHWC").unwrap();
    assert_values(
        &y,
        &[2, 2, 3, 8],
        &[
            0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23,
            24, 25, 26, 27, 36, 37, 38, 39, 28, 29, 30, 31, 40, 41, 42, 43, 32, 33, 34, 35, 44, 45,
            46, 47, 48, 49, 50, 51, 60, 61, 62, 63, 52, 53, 54, 55, 64, 65, 66, 67, 56, 57, 58, 59,
            68, 69, 70, 71, 72, 73, 74, 75, 84, 85, 86, 87, 76, 77, 78, 79, 88, 89, 90, 91, 80, 81,
            82, 83, 92, 93, 94, 95,
        ],
    );
    let y = depth("DepthToSpace", iota::<i32>(&[2, 2, 3, 4], 0), 2, "NHWC").unwrap();
    assert_values(
        &y,
        &[2, 4, 6, 1],
        &[
            0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11, 12, 13, 16, 17, 20, 21, 14, 15, 18, 19, 22, 23,
            24, 25, 28, 29, 32, 33, 26, 27, 30, 31, 34, 35, 36, 37, 40, 41, 44, 45, 38, 39, 42, 43,
            46, 47,
        ],
    );
    let y = depth("SpaceToDepth", iota::<u8>(&[1, 3, 6, 1], 0), 3, "NHWC").unwrap();
    assert_values(
        &y,
        &[1, 1, 2, 9],
        &[0, 1, 2, 6, 7, 8, 12, 13, 14, 3, 4, 5, 9, 10, 11, 15, 16, 17],
    );
    // The two invert each other, for every kind of element.
    let strings = Tensor::from_strings(
        &[1, 2, 2, 1],
        ["a", "b", "c", "d"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect(),
    )
    .unwrap();
    let y = depth("SpaceToDepth", strings.clone(), 2, "NHWC").unwrap();
    assert_eq!(y.dims(), &[1, 1, 1, 4]);
    assert_eq!(y.strings().unwrap(), strings.strings().unwrap());
    let bools = t(
        &[1, 1, 2, 4],
        vec![true, false, false, true, true, true, false, false],
    );
    let y = depth("DepthToSpace", bools.clone(), 2, "NHWC").unwrap();
    assert_eq!(y.dims(), &[1, 2, 4, 1]);
    assert_eq!(
        y.flat::<bool>().unwrap(),
        &[true, false, true, true, false, true, false, false]
    );
    let back = depth("SpaceToDepth", y, 2, "NHWC").unwrap();
    assert_eq!(back.flat::<bool>().unwrap(), bools.flat::<bool>().unwrap());
    let c = t(
        &[1, 2, 2, 2],
        (0..8)
            .map(|v| Complex::new(v as f64, -(v as f64)))
            .collect(),
    );
    let y = depth(
        "DepthToSpace",
        depth("SpaceToDepth", c.clone(), 2, "NHWC").unwrap(),
        2,
        "NHWC",
    )
    .unwrap();
    assert_eq!(
        y.flat::<Complex<f64>>().unwrap(),
        c.flat::<Complex<f64>>().unwrap()
    );
    let q = iota::<u8>(&[1, 2, 2, 1], 0)
        .bitcast(DataType::QInt8)
        .unwrap();
    let y = depth("SpaceToDepth", q, 2, "NHWC").unwrap();
    assert_eq!(y.dtype(), DataType::QInt8);
    assert_eq!(y.dims(), &[1, 1, 1, 4]);
}

#[test]
fn space_to_depth_and_depth_to_space_empty() {
    let y = depth("SpaceToDepth", iota::<f32>(&[0, 4, 4, 1], 0), 2, "NHWC").unwrap();
    assert_eq!(y.dims(), &[0, 2, 2, 4]);
    let y = depth("DepthToSpace", iota::<f32>(&[1, 0, 4, 4], 0), 2, "NHWC").unwrap();
    assert_eq!(y.dims(), &[1, 0, 8, 1]);
    let y = depth("DepthToSpace", iota::<f32>(&[1, 2, 2, 0], 0), 2, "NHWC").unwrap();
    assert_eq!(y.dims(), &[1, 4, 4, 0]);
    // Huge dims around an empty one do not overflow.
    let e = Tensor::from_vec::<f32>(&[0, 1 << 40, 1 << 40, 4], vec![]).unwrap();
    let y = depth("DepthToSpace", e, 2, "NHWC").unwrap();
    assert_eq!(y.dims(), &[0, 1 << 41, 1 << 41, 1]);
}

#[test]
fn space_to_depth_and_depth_to_space_check_as_tensorflow() {
    let inv = Code::InvalidArgument;
    assert_err(
        depth("SpaceToDepth", iota::<f32>(&[1, 3, 4, 1], 0), 2, "NHWC"),
        inv,
        "Image width 4 and height 3 should be divisible by block_size: 2",
    );
    assert_err(
        depth("SpaceToDepth", iota::<f32>(&[3, 4, 1], 0), 2, "NHWC"),
        inv,
        "Input rank should be 4 instead of 3",
    );
    assert_err(
        depth("DepthToSpace", iota::<f32>(&[1, 3, 4, 3], 0), 2, "NHWC"),
        inv,
        "Input depth dimension 3 should be divisible by: 4",
    );
    assert_err(
        depth("DepthToSpace", iota::<f32>(&[3, 4, 1], 0), 2, "NHWC"),
        inv,
        "Input rank should be: 4 instead of: 3",
    );
    // TensorFlow's CPU kernels take NHWC only.
    for op in ["SpaceToDepth", "DepthToSpace"] {
        for format in ["NCHW", "NCHW_VECT_C"] {
            assert_err(
                depth(op, iota::<f32>(&[1, 4, 4, 4], 0), 2, format),
                inv,
                &format!("Only NHWC data_format supported on CPU. Got {format}"),
            );
        }
    }
}

// ---------------------------------------------------------------------------
// ExtractImagePatches
// ---------------------------------------------------------------------------

const ONES: [i64; 4] = [1, 1, 1, 1];

#[test]
fn extract_image_patches_as_tensorflow() {
    // values from TensorFlow 2.21
    let x = iota::<f32>(&[2, 5, 4, 2], 1);
    let y = patches(x.clone(), [1, 2, 2, 1], [1, 2, 1, 1], ONES, "VALID").unwrap();
    assert_values(
        &y,
        &[2, 2, 3, 8],
        &[
            1, 2, 3, 4, 9, 10, 11, 12, 3, 4, 5, 6, 11, 12, 13, 14, 5, 6, 7, 8, 13, 14, 15, 16, 17,
            18, 19, 20, 25, 26, 27, 28, 19, 20, 21, 22, 27, 28, 29, 30, 21, 22, 23, 24, 29, 30, 31,
            32, 41, 42, 43, 44, 49, 50, 51, 52, 43, 44, 45, 46, 51, 52, 53, 54, 45, 46, 47, 48, 53,
            54, 55, 56, 57, 58, 59, 60, 65, 66, 67, 68, 59, 60, 61, 62, 67, 68, 69, 70, 61, 62, 63,
            64, 69, 70, 71, 72,
        ],
    );
    let y = patches(x, [1, 3, 2, 1], [1, 2, 3, 1], ONES, "SAME").unwrap();
    assert_values(
        &y,
        &[2, 3, 2, 12],
        &[
            0, 0, 0, 0, 1, 2, 3, 4, 9, 10, 11, 12, 0, 0, 0, 0, 7, 8, 0, 0, 15, 16, 0, 0, 9, 10, 11,
            12, 17, 18, 19, 20, 25, 26, 27, 28, 15, 16, 0, 0, 23, 24, 0, 0, 31, 32, 0, 0, 25, 26,
            27, 28, 33, 34, 35, 36, 0, 0, 0, 0, 31, 32, 0, 0, 39, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            41, 42, 43, 44, 49, 50, 51, 52, 0, 0, 0, 0, 47, 48, 0, 0, 55, 56, 0, 0, 49, 50, 51, 52,
            57, 58, 59, 60, 65, 66, 67, 68, 55, 56, 0, 0, 63, 64, 0, 0, 71, 72, 0, 0, 65, 66, 67,
            68, 73, 74, 75, 76, 0, 0, 0, 0, 71, 72, 0, 0, 79, 80, 0, 0, 0, 0, 0, 0,
        ],
    );
    // Rates (dilated patches).
    let x = t(&[1, 5, 4, 1], (0..20).map(|v| (2 * v + 1) as f64).collect());
    let y = patches(x.clone(), [1, 2, 2, 1], ONES, [1, 2, 3, 1], "SAME").unwrap();
    assert_values(
        &y,
        &[1, 5, 4, 4],
        &[
            0, 0, 0, 13, 0, 0, 9, 15, 0, 0, 11, 0, 0, 0, 13, 0, 0, 5, 0, 21, 1, 7, 17, 23, 3, 0,
            19, 0, 5, 0, 21, 0, 0, 13, 0, 29, 9, 15, 25, 31, 11, 0, 27, 0, 13, 0, 29, 0, 0, 21, 0,
            37, 17, 23, 33, 39, 19, 0, 35, 0, 21, 0, 37, 0, 0, 29, 0, 0, 25, 31, 0, 0, 27, 0, 0, 0,
            29, 0, 0, 0,
        ],
    );
    let y = patches(x, [1, 2, 2, 1], ONES, [1, 2, 2, 1], "VALID").unwrap();
    assert_values(
        &y,
        &[1, 3, 2, 4],
        &[
            1, 5, 17, 21, 3, 7, 19, 23, 9, 13, 25, 29, 11, 15, 27, 31, 17, 21, 33, 37, 19, 23, 35,
            39,
        ],
    );
    let y = patches(
        iota::<i8>(&[1, 3, 3, 1], 0),
        [1, 2, 2, 1],
        ONES,
        ONES,
        "SAME",
    )
    .unwrap();
    assert_values(
        &y,
        &[1, 3, 3, 4],
        &[
            0, 1, 3, 4, 1, 2, 4, 5, 2, 0, 5, 0, 3, 4, 6, 7, 4, 5, 7, 8, 5, 0, 8, 0, 6, 7, 0, 0, 7,
            8, 0, 0, 8, 0, 0, 0,
        ],
    );
    // A stride larger than the kernel.
    let y = patches(
        iota::<i32>(&[1, 7, 1, 1], 1),
        [1, 3, 1, 1],
        [1, 4, 1, 1],
        ONES,
        "SAME",
    )
    .unwrap();
    assert_values(&y, &[1, 2, 1, 3], &[1, 2, 3, 5, 6, 7]);
    // Complex: [[1j, 1+1j], [2+1j, 3+1j]], a 2x2 SAME patch.
    let c = t(
        &[1, 2, 2, 1],
        (0..4).map(|v| Complex::new(v as f32, 1.0)).collect(),
    );
    let y = patches(c, [1, 2, 2, 1], ONES, ONES, "SAME").unwrap();
    let z = Complex::new(0.0f32, 0.0);
    let v = |r: f32| Complex::new(r, 1.0f32);
    assert_eq!(y.dims(), &[1, 2, 2, 4]);
    assert_eq!(
        y.flat::<Complex<f32>>().unwrap(),
        &[
            v(0.),
            v(1.),
            v(2.),
            v(3.),
            v(1.),
            z,
            v(3.),
            z,
            v(2.),
            v(3.),
            z,
            z,
            v(3.),
            z,
            z,
            z
        ]
    );
    // ksizes with extra values: TensorFlow's kernel reads the first four.
    let y = patches(
        iota::<f32>(&[1, 2, 2, 1], 1),
        [1, 1, 1, 1],
        ONES,
        ONES,
        "VALID",
    )
    .unwrap();
    assert_values(&y, &[1, 2, 2, 1], &[1, 2, 3, 4]);
}

#[test]
fn extract_image_patches_empty() {
    let k = [1, 2, 2, 1];
    let y = patches(iota::<f32>(&[0, 3, 3, 1], 0), k, ONES, ONES, "VALID").unwrap();
    assert_eq!(y.dims(), &[0, 2, 2, 4]);
    let y = patches(iota::<f32>(&[1, 0, 3, 1], 0), k, ONES, ONES, "SAME").unwrap();
    assert_eq!(y.dims(), &[1, 0, 3, 4]);
    let y = patches(iota::<f32>(&[1, 3, 3, 0], 0), k, ONES, ONES, "SAME").unwrap();
    assert_eq!(y.dims(), &[1, 3, 3, 0]);
    // A kernel one larger than the input, VALID: no patches.
    let y = patches(
        iota::<f32>(&[2, 5, 4, 2], 0),
        [1, 6, 2, 1],
        ONES,
        ONES,
        "VALID",
    )
    .unwrap();
    assert_eq!(y.dims(), &[2, 0, 3, 24]);
}

#[test]
fn extract_image_patches_checks_as_tensorflow() {
    let x = || iota::<f32>(&[2, 5, 4, 2], 0);
    let unimpl = Code::Unimplemented;
    assert_err(
        patches(x(), [2, 2, 2, 1], ONES, ONES, "VALID"),
        unimpl,
        "Only support ksizes across space.",
    );
    assert_err(
        patches(x(), [1, 2, 2, 2], ONES, ONES, "VALID"),
        unimpl,
        "Only support ksizes across space.",
    );
    assert_err(
        patches(x(), [1, 2, 2, 1], [2, 1, 1, 1], ONES, "VALID"),
        unimpl,
        "Only support strides across space.",
    );
    assert_err(
        patches(x(), [1, 2, 2, 1], ONES, [1, 1, 1, 2], "VALID"),
        unimpl,
        "Only support rates across space.",
    );
    let oor = Code::OutOfRange;
    assert_err(
        patches(x(), [1, 0, 2, 1], ONES, ONES, "VALID"),
        oor,
        "ksizes is out of range.",
    );
    assert_err(
        patches(x(), [1, 2, 2, 1], [1, 0, 1, 1], ONES, "VALID"),
        oor,
        "strides is out of range.",
    );
    assert_err(
        patches(x(), [1, 2, 2, 1], ONES, [1, 1, 0, 1], "VALID"),
        oor,
        "rates is out of range.",
    );
    let inv = Code::InvalidArgument;
    assert_err(
        patches(
            iota::<f32>(&[5, 4, 2], 0),
            [1, 2, 2, 1],
            ONES,
            ONES,
            "VALID",
        ),
        inv,
        "input must be 4-dimensional[5,4,2]",
    );
    assert_err(
        patches(x(), [1, 3, 2, 1], ONES, [1, 3, 1, 1], "VALID"),
        inv,
        "Computed output size would be negative: -1 [input_size: 5, effective_filter_size: 7, stride: 1]",
    );
    // Attrs beyond int32 (TensorFlow reads them as int32).
    assert_err(
        patches(x(), [1, 1 << 33, 2, 1], ONES, ONES, "VALID"),
        inv,
        "ksizes",
    );
    // Huge kernels give errors, not overflows (TensorFlow's CHECK fails here).
    assert_err(
        patches(x(), [1, i32::MAX as i64, 2, 1], ONES, [1, 2, 1, 1], "VALID"),
        inv,
        "Computed output size would be negative",
    );
    let max = i32::MAX as i64;
    let empty = iota::<f32>(&[0, 5, 4, 2], 0);
    let y = patches(empty, [1, max, 1, 1], ONES, [1, max, 1, 1], "SAME").unwrap();
    assert_eq!(y.dims(), &[0, 5, 4, 2 * max]);
    // The output is allocated through the kernel context (its limit applies).
    assert_err(
        patches(x(), [1, max, 1, 1], ONES, [1, max, 1, 1], "SAME"),
        Code::ResourceExhausted,
        "OOM when allocating",
    );
}
