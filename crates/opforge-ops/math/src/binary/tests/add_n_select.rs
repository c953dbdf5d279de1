//! Tests of `AddN`, `Select` and `SelectV2`.

use super::*;

pub(super) fn add_n(inputs: Vec<Tensor>) -> Result<Tensor> {
    ctx().op("AddN").input_list(inputs).run1()
}

#[test]
pub(super) fn add_n_sums_same_shape_inputs() {
    let a = t(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    let b = t(&[2, 2], vec![10.0f32, 20.0, 30.0, 40.0]);
    let c = t(&[2, 2], vec![100.0f32, 200.0, 300.0, 400.0]);
    let got = add_n(vec![a.clone(), b.clone(), c.clone()]).unwrap();
    assert_close(&got, &[2, 2], &[111.0, 222.0, 333.0, 444.0], 0.0);
    // The inputs are not changed when shared.
    assert_eq!(a.flat::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    // A uniquely owned input is summed into in place.
    let owned = t(&[2, 2], vec![1.0f32, 1.0, 1.0, 1.0]);
    let ptr = owned.bytes().unwrap().as_ptr();
    let got = add_n(vec![a.clone(), owned, b.clone()]).unwrap();
    assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
    assert_close(&got, &[2, 2], &[12.0, 23.0, 34.0, 45.0], 0.0);
    let got = add_n(vec![
        t(&[3], vec![i32::MAX, 1, -1]),
        t(&[3], vec![1i32, 2, -2]),
    ])
    .unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[i32::MIN, 3, -3]);
    let got = add_n(vec![
        t(&[1], vec![Complex::new(1.0f64, 1.0)]),
        t(&[1], vec![Complex::new(2.0f64, -3.0)]),
    ])
    .unwrap();
    assert_eq!(
        got.flat::<Complex<f64>>().unwrap(),
        &[Complex::new(3.0, -2.0)]
    );
    // One input passes through; empty inputs give an empty sum.
    let one = t(&[2], vec![5u8, 6]);
    let got = add_n(vec![one.clone()]).unwrap();
    assert!(got.shares_storage_with(&one));
    let got = add_n(vec![
        t(&[0, 2], Vec::<f64>::new()),
        t(&[0, 2], Vec::<f64>::new()),
    ])
    .unwrap();
    assert_eq!(got.dims(), &[0, 2]);
}

#[test]
pub(super) fn add_n_of_many_large_inputs() {
    let n = 50_000;
    let inputs: Vec<Tensor> = (0..5)
        .map(|k| t(&[n as i64], (0..n).map(|i| (i * k) as f64).collect()))
        .collect();
    let got = add_n(inputs).unwrap();
    let v = got.flat::<f64>().unwrap();
    for i in [0, 1, 25_000, n - 1] {
        assert_eq!(v[i], (i * 10) as f64);
    }
}

#[test]
pub(super) fn add_n_shape_mismatch_is_an_error() {
    let err = add_n(vec![
        t(&[2], vec![1.0f32, 2.0]),
        t(&[2], vec![1.0f32, 2.0]),
        t(&[3], vec![1.0f32, 2.0, 3.0]),
    ])
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains(
            "Inputs to operation AddN of type AddN must have the same size and shape.  Input 0: [2] != input 2: [3]"
        ),
        "{err}"
    );
    // [2,1] and [2] do not broadcast in AddN.
    let err = add_n(vec![t(&[2, 1], vec![1i64, 2]), t(&[2], vec![1i64, 2])]).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

pub(super) fn select(op: &str, c: Tensor, x: Tensor, y: Tensor) -> Result<Tensor> {
    ctx().op(op).input(c).input(x).input(y).run1()
}

#[test]
pub(super) fn select_scalar_vector_and_elementwise_conditions() {
    let x = t(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]);
    let y = t(&[3, 2], vec![-1i32, -2, -3, -4, -5, -6]);
    // Vector condition picks rows.
    let got = select(
        "Select",
        t(&[3], vec![true, false, true]),
        x.clone(),
        y.clone(),
    )
    .unwrap();
    assert_eq!(got.dims(), &[3, 2]);
    assert_eq!(got.flat::<i32>().unwrap(), &[1, 2, -3, -4, 5, 6]);
    // Scalar condition picks a whole input.
    let got = select("Select", Tensor::scalar(false), x.clone(), y.clone()).unwrap();
    assert!(got.shares_storage_with(&y));
    // Same-shape condition picks elements.
    let c = t(&[3, 2], vec![true, false, false, true, true, false]);
    let got = select("Select", c, x.clone(), y.clone()).unwrap();
    assert_eq!(got.flat::<i32>().unwrap(), &[1, -2, -3, 4, 5, -6]);
    // Vector then/else with a vector condition: elementwise.
    let got = select(
        "Select",
        t(&[2], vec![false, true]),
        t(&[2], vec![1.0f64, 2.0]),
        t(&[2], vec![3.0f64, 4.0]),
    )
    .unwrap();
    assert_eq!(got.flat::<f64>().unwrap(), &[3.0, 2.0]);
    // Strings and a rank-3 then with a vector condition.
    let s = |v: &[&str]| Tensor::from_strings(&[2, 1, 1], strs(v)).unwrap();
    let got = select(
        "Select",
        t(&[2], vec![false, true]),
        s(&["a", "b"]),
        s(&["c", "d"]),
    )
    .unwrap();
    assert_eq!(got.strings().unwrap(), &strs(&["c", "b"])[..]);
    let got = select(
        "Select",
        t(&[0], Vec::<bool>::new()),
        t(&[0, 2], Vec::<f32>::new()),
        t(&[0, 2], Vec::<f32>::new()),
    )
    .unwrap();
    assert_eq!(got.dims(), &[0, 2]);
}

#[test]
pub(super) fn select_errors() {
    let x = t(&[3, 2], vec![0i32; 6]);
    let err = select("Select", t(&[2], vec![true, false]), x.clone(), x.clone()).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("Number of batches of 'then' must match size of 'cond', but saw: 3 vs. 2"),
        "{err}"
    );
    let err = select(
        "Select",
        Tensor::scalar(true),
        x.clone(),
        t(&[2, 3], vec![0i32; 6]),
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("'then' and 'else' must have the same size.  but received: [3,2] vs. [2,3]"),
        "{err}"
    );
    let err = select(
        "Select",
        t(&[3], vec![true; 3]),
        x.clone(),
        t(&[3, 1], vec![0i32; 3]),
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("'then' and 'else' must have the same size"),
        "{err}"
    );
    let err = select(
        "Select",
        t(&[2], vec![true; 2]),
        Tensor::scalar(1i32),
        Tensor::scalar(2i32),
    )
    .unwrap_err();
    assert!(
        err.message()
            .contains("'then' must be at least a vector, but saw shape: []"),
        "{err}"
    );
    let err = select("Select", t(&[3, 1], vec![true; 3]), x.clone(), x).unwrap_err();
    assert!(
        err.message().contains(
            "Inputs to operation Select of type Select must have the same size and shape.  Input 0: [3,1] != input 1: [3,2]"
        ),
        "{err}"
    );
}

#[test]
pub(super) fn select_v2_broadcasts_three_ways() {
    // condition [2,1,1], then [1,3,1], else [2] -> [2,3,2]
    let c = t(&[2, 1, 1], vec![true, false]);
    let x = t(&[1, 3, 1], vec![1.0f32, 2.0, 3.0]);
    let y = t(&[2], vec![-1.0f32, -2.0]);
    let got = select("SelectV2", c, x, y).unwrap();
    assert_eq!(got.dims(), &[2, 3, 2]);
    assert_close(
        &got,
        &[2, 3, 2],
        &[
            1.0, 1.0, 2.0, 2.0, 3.0, 3.0, -1.0, -2.0, -1.0, -2.0, -1.0, -2.0,
        ],
        0.0,
    );
    // Scalar condition with broadcasting then/else.
    let got = select(
        "SelectV2",
        Tensor::scalar(true),
        t(&[2, 1], vec![1i64, 2]),
        t(&[3], vec![7i64, 8, 9]),
    )
    .unwrap();
    assert_eq!(got.dims(), &[2, 3]);
    assert_eq!(got.flat::<i64>().unwrap(), &[1, 1, 1, 2, 2, 2]);
    // The condition alone has the output shape.
    let got = select(
        "SelectV2",
        t(&[2, 2], vec![true, false, false, true]),
        Tensor::scalar(1u8),
        Tensor::scalar(0u8),
    )
    .unwrap();
    assert_eq!(got.flat::<u8>().unwrap(), &[1, 0, 0, 1]);
    let s = Tensor::from_strings(&[2], strs(&["t0", "t1"])).unwrap();
    let e = Tensor::from_strings(&[], strs(&["e"])).unwrap();
    let got = select("SelectV2", t(&[2, 1], vec![false, true]), s, e).unwrap();
    assert_eq!(got.strings().unwrap(), &strs(&["e", "e", "t0", "t1"])[..]);
    let got = select(
        "SelectV2",
        t(&[0, 1], Vec::<bool>::new()),
        t(&[3], vec![1i32; 3]),
        Tensor::scalar(0i32),
    )
    .unwrap();
    assert_eq!(got.dims(), &[0, 3]);
    let err = select(
        "SelectV2",
        t(&[2], vec![true; 2]),
        t(&[3], vec![0i32; 3]),
        Tensor::scalar(0i32),
    )
    .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message()
            .contains("condition [2], then [3], and else [] must be broadcastable"),
        "{err}"
    );
}

#[test]
pub(super) fn select_v2_forwards_then_or_else() {
    let e = t(&[3], vec![10i32, 20, 30]);
    let ptr = e.bytes().unwrap().as_ptr();
    let got = select(
        "SelectV2",
        t(&[3], vec![true, false, true]),
        Tensor::scalar(0i32),
        e,
    )
    .unwrap();
    assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
    assert_eq!(got.flat::<i32>().unwrap(), &[0, 20, 0]);
    let x = t(&[3], vec![1.0f64, 2.0, 3.0]);
    let ptr = x.bytes().unwrap().as_ptr();
    let got = select(
        "SelectV2",
        t(&[3], vec![true, false, true]),
        x,
        t(&[1], vec![-1.0f64]),
    )
    .unwrap();
    assert_eq!(got.bytes().unwrap().as_ptr(), ptr);
    assert_eq!(got.flat::<f64>().unwrap(), &[1.0, -1.0, 3.0]);
}
