//! The tensors of the round-trip cases: values with the special cases
//! kernels must carry through (NaN, infinities, -0, subnormals, wrapping
//! integers, empty and non-UTF-8 strings, resource handles).

use opforge_core::eager::EagerContext;
use opforge_core::half::{bf16, f16};
use opforge_core::num_complex::Complex;
use opforge_core::proto;
use opforge_core::{DataType, Element, Tensor, TensorShape};

/// Floats with the special values kernels must carry through.
pub const FLOATS: [f64; 12] = [
    -2.5,
    0.5,
    1.0,
    -0.0,
    3.75,
    f64::NAN,
    0.0,
    f64::INFINITY,
    -1.25,
    10.0,
    f64::NEG_INFINITY,
    1e-40,
];
/// Finite floats (for ops whose interesting path is not NaN handling).
pub const FINITE: [f64; 7] = [-2.5, 0.5, 1.0, 3.75, -1.25, 0.0, 2.0];
/// The `INTS` test values.
pub const INTS: [i64; 9] = [-3, 0, 2, 7, -1, 5, 1, -8, 4];
/// Non-zero integers (divisors).
pub const NONZERO: [i64; 5] = [3, -2, 1, 5, -7];

/// Test tensor helper `n_of`.
pub fn n_of(dims: &[i64]) -> usize {
    dims.iter().product::<i64>() as usize
}

/// A tensor of shape `dims` cycling through `pattern` (from offset `skip`).
pub fn cycle<T: Element>(dims: &[i64], pattern: &[T], skip: usize) -> Tensor {
    let v: Vec<T> = pattern
        .iter()
        .cycle()
        .skip(skip)
        .take(n_of(dims))
        .copied()
        .collect();
    Tensor::from_vec(dims, v).unwrap()
}

/// Test tensor helper `conv`.
pub fn conv<A: Copy, T>(pattern: &[A], f: impl Fn(A) -> T) -> Vec<T> {
    pattern.iter().map(|&v| f(v)).collect()
}

/// Test tensor helper `f32s`.
pub fn f32s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, |v| v as f32), 0)
}
/// Other float values of the same shape (a second operand).
pub fn f32b(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, |v| v as f32), 5)
}
/// Test tensor helper `fin32`.
pub fn fin32(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FINITE, |v| v as f32), 0)
}
/// Test tensor helper `f64s`.
pub fn f64s(dims: &[i64]) -> Tensor {
    cycle(dims, &FLOATS, 2)
}
/// Test tensor helper `f64b`.
pub fn f64b(dims: &[i64]) -> Tensor {
    cycle(dims, &FLOATS, 7)
}
/// Test tensor helper `fin64`.
pub fn fin64(dims: &[i64]) -> Tensor {
    cycle(dims, &FINITE, 3)
}
/// Test tensor helper `f16s`.
pub fn f16s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, f16::from_f64), 0)
}
/// Finite half-precision floats (`Maximum` then meets NaN on one side only).
pub fn fin16(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FINITE, f16::from_f64), 1)
}
/// Test tensor helper `bf16s`.
pub fn bf16s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&FLOATS, bf16::from_f64), 1)
}
/// Test tensor helper `c64s`.
pub fn c64s(dims: &[i64]) -> Tensor {
    let v = conv(&FINITE, |v| Complex::new(v as f32, (1.5 - v) as f32));
    cycle(dims, &v, 0)
}
/// Test tensor helper `i32s`.
pub fn i32s(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&INTS, |v| v as i32), 0)
}
/// Test tensor helper `i32nz`.
pub fn i32nz(dims: &[i64]) -> Tensor {
    cycle(dims, &conv(&NONZERO, |v| v as i32), 0)
}
/// Test tensor helper `i64s`.
pub fn i64s(dims: &[i64]) -> Tensor {
    cycle(dims, &INTS, 3)
}
/// Test tensor helper `i64nz`.
pub fn i64nz(dims: &[i64]) -> Tensor {
    cycle(dims, &NONZERO, 1)
}
/// Test tensor helper `u8s`.
pub fn u8s(dims: &[i64]) -> Tensor {
    cycle(dims, &[0u8, 7, 200, 1, 255, 3], 0)
}
/// Test tensor helper `bools`.
pub fn bools(dims: &[i64]) -> Tensor {
    cycle(dims, &[true, false, false, true, true], 0)
}
/// Test tensor helper `bools_b`.
pub fn bools_b(dims: &[i64]) -> Tensor {
    cycle(dims, &[true, false, false, true, true], 2)
}
/// `INTS` cast to `dtype` (wrapping around for unsigned types).
pub fn ints_as(dtype: DataType, dims: &[i64]) -> Tensor {
    let v: Vec<i64> = INTS.iter().cycle().take(n_of(dims)).copied().collect();
    let x = Tensor::from_vec(dims, v).unwrap();
    let ctx = EagerContext::default_cpu();
    ctx.op("Cast").input(x).attr("DstT", dtype).run1().unwrap()
}
/// Resource handles of two variables.
pub fn handles(dims: &[i64]) -> Tensor {
    let h = |name: &str, dt: DataType| opforge_core::resource::ResourceHandle {
        device: "/job:localhost/replica:0/task:0/device:CPU:0".into(),
        container: "c".into(),
        name: name.into(),
        type_name: "Var".into(),
        dtypes_and_shapes: vec![(dt, shape(&[2, 1]))],
    };
    let pattern = [h("v0", DataType::Float), h("v1", DataType::Int64)];
    let v = pattern.iter().cycle().take(n_of(dims)).cloned().collect();
    Tensor::from_resource_handles(dims, v).unwrap()
}
/// Strings, including empty, non-ASCII, NUL and invalid UTF-8 ones.
pub fn strs(dims: &[i64]) -> Tensor {
    let words: [&[u8]; 7] = [
        b"a",
        b"",
        b"bc",
        "d\u{e9}f".as_bytes(),
        b"\0x",
        b"\xff\xfe\\\"",
        b"gh",
    ];
    let v = words.iter().cycle().take(n_of(dims));
    Tensor::from_strings(dims, v.map(|w| w.to_vec()).collect()).unwrap()
}
/// Test tensor helper `str_list`.
pub fn str_list(dims: &[i64], words: &[&str]) -> Tensor {
    Tensor::from_strings(dims, words.iter().map(|w| w.as_bytes().to_vec()).collect()).unwrap()
}
/// A tensor of exactly these values.
pub fn t<T: Element>(dims: &[i64], v: &[T]) -> Tensor {
    Tensor::from_slice(dims, v).unwrap()
}
/// Test tensor helper `s`.
pub fn s<T: Element>(v: T) -> Tensor {
    Tensor::scalar(v)
}
/// Test tensor helper `shape`.
pub fn shape(dims: &[i64]) -> proto::TensorShapeProto {
    TensorShape::new(dims).unwrap().to_proto()
}
/// Test tensor helper `unknown_shape`.
pub fn unknown_shape() -> proto::TensorShapeProto {
    proto::TensorShapeProto {
        unknown_rank: true,
        ..Default::default()
    }
}
