//! Tests of `Unique` and `UniqueWithCounts`: expected values written out
//! by hand.

use half::{bf16, f16};
use opforge_core::autodiff::{GradientTape, Ops};
use opforge_core::{Code, DataType, Registry, Tensor};
use opforge_testing::util::{ctx, t};

fn unique(x: Tensor, out_idx: DataType, counts: bool) -> opforge_core::Result<Vec<Tensor>> {
    let op = if counts { "UniqueWithCounts" } else { "Unique" };
    ctx().op(op).input(x).attr("out_idx", out_idx).run()
}

fn i32s(t: &Tensor) -> Vec<i32> {
    t.flat::<i32>().unwrap().to_vec()
}

fn i64s(t: &Tensor) -> Vec<i64> {
    t.flat::<i64>().unwrap().to_vec()
}

#[test]
fn unique_in_order_of_first_occurrence() {
    // TensorFlow's documented example.
    let x = t(&[9], vec![1i32, 1, 2, 4, 4, 4, 7, 8, 8]);
    let out = unique(x.clone(), DataType::Int32, false).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(i32s(&out[0]), [1, 2, 4, 7, 8]);
    assert_eq!(i32s(&out[1]), [0, 0, 1, 2, 2, 2, 3, 4, 4]);
    let out = unique(x, DataType::Int64, true).unwrap();
    assert_eq!(i32s(&out[0]), [1, 2, 4, 7, 8]);
    assert_eq!(out[1].dtype(), DataType::Int64);
    assert_eq!(i64s(&out[1]), [0, 0, 1, 2, 2, 2, 3, 4, 4]);
    assert_eq!(i64s(&out[2]), [2, 1, 3, 1, 2]);
    // Not sorted: first occurrence decides.
    let out = unique(t(&[6], vec![9i64, -3, 9, 5, -3, -3]), DataType::Int32, true).unwrap();
    assert_eq!(i64s(&out[0]), [9, -3, 5]);
    assert_eq!(i32s(&out[1]), [0, 1, 0, 2, 1, 1]);
    assert_eq!(i32s(&out[2]), [2, 3, 1]);
}

#[test]
fn unique_every_dtype() {
    let out = unique(t(&[4], vec![2.5f32, -1.0, 2.5, 0.0]), DataType::Int32, true).unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[2.5, -1.0, 0.0]);
    assert_eq!(i32s(&out[2]), [2, 1, 1]);
    let out = unique(t(&[3], vec![1.0f64, 1.0, 1.0]), DataType::Int32, false).unwrap();
    assert_eq!(out[0].flat::<f64>().unwrap(), &[1.0]);
    let h = f16::from_f32;
    let out = unique(
        t(&[3], vec![h(0.5), h(2.0), h(0.5)]),
        DataType::Int64,
        false,
    )
    .unwrap();
    assert_eq!(out[0].flat::<f16>().unwrap(), &[h(0.5), h(2.0)]);
    assert_eq!(i64s(&out[1]), [0, 1, 0]);
    let b = bf16::from_f32;
    let out = unique(
        t(&[3], vec![b(3.0), b(3.0), b(-3.0)]),
        DataType::Int32,
        false,
    )
    .unwrap();
    assert_eq!(out[0].flat::<bf16>().unwrap(), &[b(3.0), b(-3.0)]);
    let out = unique(t(&[4], vec![200u8, 1, 200, 200]), DataType::Int32, true).unwrap();
    assert_eq!(out[0].flat::<u8>().unwrap(), &[200, 1]);
    assert_eq!(i32s(&out[2]), [3, 1]);
    let out = unique(t(&[3], vec![-1i8, 1, -1]), DataType::Int32, false).unwrap();
    assert_eq!(out[0].flat::<i8>().unwrap(), &[-1, 1]);
    let out = unique(t(&[3], vec![7i16, 7, 7]), DataType::Int32, false).unwrap();
    assert_eq!(out[0].flat::<i16>().unwrap(), &[7]);
    let out = unique(t(&[3], vec![u16::MAX, 0, 0]), DataType::Int32, false).unwrap();
    assert_eq!(out[0].flat::<u16>().unwrap(), &[u16::MAX, 0]);
    let out = unique(t(&[3], vec![u32::MAX, 5, u32::MAX]), DataType::Int32, false).unwrap();
    assert_eq!(out[0].flat::<u32>().unwrap(), &[u32::MAX, 5]);
    // -1i64 and u64::MAX have the same bits but are different dtypes; in
    // one vector, distinct values stay distinct.
    let out = unique(t(&[3], vec![u64::MAX, 1, u64::MAX]), DataType::Int64, true).unwrap();
    assert_eq!(out[0].flat::<u64>().unwrap(), &[u64::MAX, 1]);
    let out = unique(
        t(&[4], vec![true, true, false, true]),
        DataType::Int32,
        true,
    )
    .unwrap();
    assert_eq!(out[0].flat::<bool>().unwrap(), &[true, false]);
    assert_eq!(i32s(&out[1]), [0, 0, 1, 0]);
    assert_eq!(i32s(&out[2]), [3, 1]);
    let words: Vec<Vec<u8>> = ["b", "a", "", "b", ""]
        .iter()
        .map(|w| w.as_bytes().to_vec())
        .collect();
    let out = unique(
        Tensor::from_strings(&[5], words).unwrap(),
        DataType::Int32,
        true,
    )
    .unwrap();
    assert_eq!(
        out[0].strings().unwrap(),
        &[b"b".to_vec(), b"a".to_vec(), b"".to_vec()]
    );
    assert_eq!(i32s(&out[1]), [0, 1, 2, 0, 2]);
    assert_eq!(i32s(&out[2]), [2, 1, 2]);
}

#[test]
fn unique_floats_compare_by_value() {
    // -0 == +0 (the first one is kept); NaN equals nothing, not even NaN.
    let x = t(&[5], vec![-0.0f32, 0.0, f32::NAN, f32::NAN, 1.0]);
    let out = unique(x, DataType::Int32, true).unwrap();
    let y = out[0].flat::<f32>().unwrap();
    assert_eq!(y.len(), 4);
    assert!(y[0] == 0.0 && y[0].is_sign_negative());
    assert!(y[1].is_nan() && y[2].is_nan());
    assert_eq!(y[3], 1.0);
    assert_eq!(i32s(&out[1]), [0, 0, 1, 2, 3]);
    assert_eq!(i32s(&out[2]), [2, 1, 1, 1]);
}

#[test]
fn unique_empty_and_rank_errors() {
    let out = unique(t(&[0], Vec::<f32>::new()), DataType::Int64, true).unwrap();
    for o in &out {
        assert_eq!(o.dims(), &[0]);
    }
    assert_eq!(out[1].dtype(), DataType::Int64);
    for counts in [false, true] {
        for x in [
            Tensor::scalar(1i32),
            t(&[2, 2], vec![1i32, 2, 3, 4]),
            t(&[0, 1], Vec::<i32>::new()),
        ] {
            let e = unique(x, DataType::Int32, counts).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{e}");
            assert!(
                e.message().starts_with("unique expects a 1D vector."),
                "{e}"
            );
        }
    }
    // No complex kernel (TensorFlow registers the real number types).
    let c = t(
        &[1],
        vec![opforge_core::num_complex::Complex::new(1f32, 0.)],
    );
    assert!(unique(c, DataType::Int32, false).is_err());
}

#[test]
fn kernels_are_those_of_tensorflow() {
    for op in ["Unique", "UniqueWithCounts"] {
        let k: Vec<_> = Registry::global()
            .kernels_for(op)
            .into_iter()
            .filter(|k| k.def.device_type == "CPU")
            .collect();
        assert_eq!(k.len(), 1);
        let t = &k[0]
            .def
            .constraints
            .iter()
            .find(|(a, _)| a == "T")
            .unwrap()
            .1;
        assert_eq!(t.len(), 14, "{op}: 12 real number types, string, bool");
        assert!(t.contains(&DataType::String) && t.contains(&DataType::Bool));
        assert!(!t.contains(&DataType::Complex64));
    }
}

#[test]
fn unique_has_no_gradient() {
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[3], vec![1.0f32, 1.0, 2.0]));
    let y = tape
        .call(
            "Unique",
            &[opforge_core::autodiff::SymArg::One(x)],
            &Default::default(),
        )
        .unwrap();
    let e = tape.gradient(y[0], &[x]).unwrap_err();
    assert!(e.message().contains("No gradient defined"), "{e}");
}
