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

// ---------------------------------------------------------------------------
// EditDistance: expected values from TensorFlow 2.21
// (`tf.raw_ops.EditDistance`) and its documented example.
// ---------------------------------------------------------------------------

type Sparse = (Vec<i64>, Tensor, Vec<i64>);

fn sparse(rows: &[&[i64]], values: Tensor, shape: &[i64]) -> Sparse {
    let flat: Vec<i64> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    let cols = shape.len() as i64;
    assert_eq!(flat.len() as i64, rows.len() as i64 * cols);
    (flat, values, shape.to_vec())
}

fn edit_distance(h: Sparse, tr: Sparse, normalize: bool) -> opforge_core::Result<Tensor> {
    let idx = |v: Vec<i64>, cols: usize| {
        let rows = v.len().checked_div(cols).unwrap_or(0);
        t(&[rows as i64, cols as i64], v)
    };
    let (hc, tc) = (h.2.len(), tr.2.len());
    ctx()
        .op("EditDistance")
        .input(idx(h.0, hc))
        .input(h.1)
        .input(t(&[hc as i64], h.2))
        .input(idx(tr.0, tc))
        .input(tr.1)
        .input(t(&[tc as i64], tr.2))
        .attr("normalize", normalize)
        .run1()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.flat::<f32>().unwrap().to_vec()
}

#[test]
fn edit_distance_documented_example() {
    let strs = |v: &[&str]| {
        Tensor::from_strings(
            &[v.len() as i64],
            v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        )
        .unwrap()
    };
    let h = sparse(&[&[0, 0, 0], &[1, 0, 0]], strs(&["a", "b"]), &[2, 1, 1]);
    let tr = sparse(
        &[&[0, 1, 0], &[1, 0, 0], &[1, 0, 1], &[1, 1, 0]],
        strs(&["a", "b", "c", "a"]),
        &[2, 2, 2],
    );
    let out = edit_distance(h, tr, true).unwrap();
    assert_eq!(out.dims(), &[2, 2]);
    assert_eq!(f32s(&out), [f32::INFINITY, 1.0, 0.5, 1.0]);
}

#[test]
fn edit_distance_matches_tensorflow() {
    let h = || {
        sparse(
            &[&[0, 0], &[0, 1], &[1, 0]],
            t(&[3], vec![1i32, 2, 3]),
            &[2, 2],
        )
    };
    let tr = || {
        sparse(
            &[&[0, 0], &[1, 0], &[1, 1]],
            t(&[3], vec![1i32, 3, 4]),
            &[2, 2],
        )
    };
    assert_eq!(f32s(&edit_distance(h(), tr(), true).unwrap()), [1.0, 0.5]);
    assert_eq!(f32s(&edit_distance(h(), tr(), false).unwrap()), [1.0, 1.0]);

    // No truth at all: every hypothesis row is infinitely far, normalized.
    let empty = sparse(&[], t(&[0], Vec::<i32>::new()), &[2, 2]);
    assert_eq!(
        f32s(&edit_distance(h(), empty, true).unwrap()),
        [f32::INFINITY, f32::INFINITY]
    );
    // Entries out of row-major order are taken as given (no sorting).
    let h2 = sparse(&[&[0, 1], &[0, 0]], t(&[2], vec![1i64, 2]), &[2, 2]);
    let t2 = sparse(&[&[0, 0]], t(&[1], vec![1i64]), &[2, 2]);
    assert_eq!(f32s(&edit_distance(h2, t2, false).unwrap()), [1.0, 0.0]);
    // The last index is not checked against the shape.
    let h3 = sparse(&[&[0, 5]], t(&[1], vec![1i32]), &[1, 1]);
    let t3 = sparse(&[&[0, 0]], t(&[1], vec![1i32]), &[1, 1]);
    assert_eq!(f32s(&edit_distance(h3, t3, false).unwrap()), [0.0]);
    // Rank 3, floats, truth only in one group, hypothesis only in another.
    let h4 = sparse(
        &[&[0, 0, 0], &[0, 0, 1]],
        t(&[2], vec![1.0f32, 2.0]),
        &[1, 3, 2],
    );
    let t4 = sparse(&[&[0, 2, 0]], t(&[1], vec![1.0f32]), &[1, 3, 1]);
    let out = edit_distance(h4, t4, true).unwrap();
    assert_eq!(out.dims(), &[1, 3]);
    assert_eq!(f32s(&out), [f32::INFINITY, 0.0, 1.0]);
}

#[test]
fn edit_distance_is_levenshtein_for_longer_sequences() {
    // kitten -> sitting: 3 edits; normalized by the truth's length (7).
    let chars = |s: &str| s.bytes().map(i64::from).collect::<Vec<i64>>();
    let row = |s: &str| -> Vec<Vec<i64>> { (0..s.len() as i64).map(|i| vec![0, i]).collect() };
    let (hs, ts) = ("kitten", "sitting");
    let hr = row(hs);
    let tr = row(ts);
    let hrows: Vec<&[i64]> = hr.iter().map(Vec::as_slice).collect();
    let trows: Vec<&[i64]> = tr.iter().map(Vec::as_slice).collect();
    let h = sparse(&hrows, t(&[6], chars(hs)), &[1, 6]);
    let tt = sparse(&trows, t(&[7], chars(ts)), &[1, 7]);
    assert_eq!(f32s(&edit_distance(h, tt, false).unwrap()), [3.0]);
    let h = sparse(&hrows, t(&[6], chars(hs)), &[1, 6]);
    let tt = sparse(&trows, t(&[7], chars(ts)), &[1, 7]);
    assert_eq!(f32s(&edit_distance(h, tt, true).unwrap()), [3.0 / 7.0]);
    // NaN equals nothing, not even itself.
    let h = sparse(&[&[0, 0]], t(&[1], vec![f64::NAN]), &[1, 1]);
    let tt = sparse(&[&[0, 0]], t(&[1], vec![f64::NAN]), &[1, 1]);
    assert_eq!(f32s(&edit_distance(h, tt, false).unwrap()), [1.0]);
}

#[test]
fn edit_distance_errors_match_tensorflow() {
    let one = || t(&[1], vec![1i32]);
    let check = |h: Sparse, tr: Sparse, code: Code, text: &str| {
        let e = edit_distance(h, tr, false).unwrap_err();
        assert_eq!(e.code(), code, "{e}");
        assert!(e.message().contains(text), "{e}");
    };
    check(
        sparse(&[&[3, 0]], one(), &[1, 1]),
        sparse(&[&[0, 0]], one(), &[1, 1]),
        Code::Internal,
        "Got an inner product 3 which would require writing to outside of the buffer for the \
         output tensor (max elements 1)",
    );
    check(
        sparse(&[&[0, 0]], one(), &[1, 1]),
        sparse(&[&[0, 0]], t(&[2], vec![1i32, 2]), &[1, 1]),
        Code::InvalidArgument,
        "Expected truth_values.NumElements == #rows(truth_indices), their shapes are: [2] and [1,2]",
    );
    check(
        sparse(&[&[0, 0, 0]], one(), &[1, 1, 1]),
        sparse(&[&[0, 0]], one(), &[1, 1]),
        Code::InvalidArgument,
        "Expected truth and hypothesis to have matching ranks, but their shapes are: [2] and [3]",
    );
    check(
        sparse(&[&[0]], one(), &[1]),
        sparse(&[&[0]], one(), &[1]),
        Code::InvalidArgument,
        "Input SparseTensors must have rank at least 2, but truth_shape rank is: 1",
    );
    check(
        sparse(&[&[0, 0]], one(), &[0, 1]),
        sparse(&[&[0, 0]], one(), &[0, 1]),
        Code::InvalidArgument,
        "Got output shape [0] which has 0 elements",
    );
    check(
        sparse(&[&[0, 0]], one(), &[-5, 1]),
        sparse(&[&[0, 0]], one(), &[1, 1]),
        Code::InvalidArgument,
        "-5",
    );
    // Group indices whose inner product overflows int64 are out of range.
    check(
        sparse(&[&[i64::MAX, i64::MAX, 0]], one(), &[1, 4, 1]),
        sparse(&[&[0, 0, 0]], one(), &[1, 4, 1]),
        Code::Internal,
        "which would require writing to outside of the buffer",
    );
    // Mismatched value dtypes are refused before the kernel runs.
    let e = ctx()
        .op("EditDistance")
        .input(t(&[1, 2], vec![0i64, 0]))
        .input(one())
        .input(t(&[2], vec![1i64, 1]))
        .input(t(&[1, 2], vec![0i64, 0]))
        .input(t(&[1], vec![1.0f32]))
        .input(t(&[2], vec![1i64, 1]))
        .run1()
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
}

#[test]
fn edit_distance_has_no_gradient() {
    let registry = Registry::global();
    assert!(registry
        .attr::<opforge_core::autodiff::Gradient>("EditDistance")
        .is_none());
}
