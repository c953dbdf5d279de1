//! Tests of the ops that give a tensor over bytes that already exist:
//! `Bitcast` (the input's storage, seen as another type), `ImmutableConst`
//! (a file, mapped read-only), and `RefIdentity`, which has no kernel.

use super::*;
use num_complex::Complex;
use opforge_core::Code;
use opforge_testing::util::{ctx, t};

#[track_caller]
fn assert_err(r: Result<Tensor>, code: Code, text: &str) {
    let e = r.expect_err("the op must fail");
    assert_eq!(e.code(), code, "{e}");
    assert!(e.message().contains(text), "{e} does not contain {text:?}");
}

fn bitcast(x: &Tensor, to: DataType) -> Result<Tensor> {
    ctx().op("Bitcast").input(x.clone()).attr("type", to).run1()
}

/// Expected values from TensorFlow 2.21 (`tf.raw_ops.Bitcast`).
#[test]
fn bitcast_reinterprets_bytes_and_adjusts_the_last_dimension() {
    let x = t(&[2], vec![1.0f32, 2.0]);
    let y = bitcast(&x, DataType::Int32).unwrap();
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.flat::<i32>().unwrap(), &[1065353216, 1073741824]);
    assert!(y.shares_storage_with(&x), "no copy");

    // Wider: the last dimension (2 = 8 / 4) is consumed.
    let x = t(&[2, 2], vec![1i32, 2, 3, 4]);
    let y = bitcast(&x, DataType::Int64).unwrap();
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.flat::<i64>().unwrap(), &[8589934593, 17179869187]);
    let empty = bitcast(&t(&[0, 2], Vec::<i32>::new()), DataType::Int64).unwrap();
    assert_eq!(empty.dims(), &[0]);

    // Narrower: a last dimension is added.
    let c = t(&[1], vec![Complex::new(1.0f32, 2.0)]);
    let y = bitcast(&c, DataType::Float).unwrap();
    assert_eq!(y.dims(), &[1, 2]);
    assert_eq!(y.flat::<f32>().unwrap(), &[1.0, 2.0]);

    // Same size, to a quantized type.
    let q = bitcast(&t(&[1], vec![1u8]), DataType::QInt8).unwrap();
    assert_eq!((q.dtype(), q.dims()), (DataType::QInt8, &[1i64][..]));

    // Round trip is the identity, bit for bit (NaN payloads included).
    let bits = t(&[3], vec![f64::NAN, -0.0, 1e300]);
    let back = bitcast(&bitcast(&bits, DataType::UInt16).unwrap(), DataType::Double).unwrap();
    let raw = |t: &Tensor| {
        t.flat::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(raw(&back), raw(&bits));
}

#[test]
fn bitcast_refuses_a_last_dimension_that_does_not_fit() {
    // TensorFlow 2.21: "Cannot bitcast from 3 to 9" for int32 [3] and for a
    // scalar, both to int64.
    for x in [t(&[3], vec![0i32; 3]), t(&[], vec![0i32])] {
        assert_err(
            bitcast(&x, DataType::Int64),
            Code::InvalidArgument,
            "Cannot bitcast from 3 to 9",
        );
    }
}

#[test]
fn bitcast_of_unaligned_data_copies_once() {
    // A one-byte slice starting at an odd offset, seen as uint16.
    let bytes = t(&[3, 2], vec![1u8, 0, 2, 0, 3, 0]);
    let rows = bytes.slice_outer(1, 3).unwrap();
    let y = bitcast(&rows, DataType::UInt16).unwrap();
    assert_eq!(y.flat::<u16>().unwrap(), &[2, 3]);
    let odd = t(&[5], vec![9u8, 1, 0, 2, 0]).reshaped(&[5]).unwrap();
    let tail = odd.reshaped(&[5, 1]).unwrap().slice_outer(1, 5).unwrap();
    let y = bitcast(&tail.reshaped(&[2, 2]).unwrap(), DataType::UInt16).unwrap();
    assert_eq!(y.flat::<u16>().unwrap(), &[1, 2]);
    assert!(!y.shares_storage_with(&odd));
}

/// A file in the temp directory holding `bytes`, removed on drop.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(tag: &str, bytes: &[u8]) -> TempFile {
        let path = std::env::temp_dir().join(format!(
            "opforge-immutable-const-{tag}-{}",
            std::process::id()
        ));
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
    fn name(&self) -> String {
        self.0.to_str().unwrap().to_string()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn immutable_const(path: &str, dtype: DataType, dims: &[i64]) -> Result<Tensor> {
    let shape = TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| opforge_core::proto::tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    };
    ctx()
        .op("ImmutableConst")
        .attr("dtype", dtype)
        .attr("shape", shape)
        .attr("memory_region_name", path.to_string())
        .run1()
}

#[test]
fn immutable_const_maps_the_file_without_copying() {
    let values = [1.0f32, 2.0, 3.0, 4.0, 99.0];
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let file = TempFile::new("f32", &bytes);
    let y = immutable_const(&file.name(), DataType::Float, &[2, 2]).unwrap();
    assert_eq!(y.dims(), &[2, 2]);
    assert_eq!(y.flat::<f32>().unwrap(), &values[..4]);
    // The mapping outlives the file's name.
    drop(file);
    assert_eq!(y.flat::<f32>().unwrap(), &values[..4]);
    // Read-only: a kernel can never write into the mapping.
    let mut y2 = y.clone();
    drop(y);
    assert_eq!(
        y2.flat_mut::<f32>().unwrap_err().code(),
        Code::FailedPrecondition
    );

    let file = TempFile::new("empty", &[]);
    let e = immutable_const(&file.name(), DataType::Int32, &[0, 3]).unwrap();
    assert_eq!(e.dims(), &[0, 3]);
    let b = TempFile::new("bool", &[1, 0, 1]);
    let y = immutable_const(&b.name(), DataType::Bool, &[3]).unwrap();
    assert_eq!(y.flat::<bool>().unwrap(), &[true, false, true]);
}

#[test]
fn immutable_const_errors_match_tensorflow() {
    let missing = std::env::temp_dir().join("opforge-no-such-region.bin");
    let missing = missing.to_str().unwrap();
    // TensorFlow 2.21: NotFound "/tmp/x.bin; No such file or directory".
    assert_err(
        immutable_const(missing, DataType::Float, &[2]),
        Code::NotFound,
        &format!("{missing}; No such file or directory"),
    );
    let file = TempFile::new("short", &[0; 4]);
    assert_err(
        immutable_const(&file.name(), DataType::Float, &[2, 2]),
        Code::Internal,
        "Readonly memory region has wrong length (4) when allocating 16",
    );
    assert_err(
        immutable_const(&file.name(), DataType::String, &[1]),
        Code::Unimplemented,
        "Sorry, DT_STRING is not currently supported for ImmutableConstOp.",
    );
    assert_err(
        immutable_const(&file.name(), DataType::Resource, &[1]),
        Code::InvalidArgument,
        "Resource and variant dtypes are invalid for this op.",
    );
    // Not every byte is a bool (TensorFlow does not check; opforge must).
    let bad = TempFile::new("badbool", &[0, 2]);
    assert_err(
        immutable_const(&bad.name(), DataType::Bool, &[2]),
        Code::InvalidArgument,
        "bytes other than 0 and 1",
    );
}

#[test]
fn ref_identity_says_why_it_has_no_kernel() {
    let e = ctx()
        .op("RefIdentity")
        .input(t(&[1], vec![1.0f32]))
        .run1()
        .unwrap_err();
    assert!(e.message().contains("ref tensors"), "{e}");
}
