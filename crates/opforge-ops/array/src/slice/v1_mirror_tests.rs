//! Kernel tests of `Concat` (V1), `ConcatOffset`, `_ParallelConcatStart`,
//! `MirrorPad` and `MirrorPadGrad`. Expected values from TensorFlow 2.21.

use super::tests::{assert_err, concat, iota, strs, sv, v};
use super::*;
use opforge_core::num_complex::Complex;
use opforge_core::{Code, DataType};
use opforge_testing::util::{assert_close, ctx, t};
fn concat_v1(dim: Tensor, values: Vec<Tensor>) -> Result<Tensor> {
    ctx().op("Concat").input(dim).input_list(values).run1()
}

#[test]
fn concat_v1_is_concat_v2_with_the_dimension_first() {
    let a = t(&[2, 2], vec![1f32, 2., 3., 4.]);
    let b = t(&[2, 1], vec![5f32, 6.]);
    for d in [1i32, -1] {
        let y = concat_v1(Tensor::scalar(d), vec![a.clone(), b.clone()]).unwrap();
        assert_close(&y, &[2, 3], &[1., 2., 5., 3., 4., 6.], 0.0);
    }
    // A length-1 vector dimension is accepted (legacy), as for ConcatV2.
    let y = concat_v1(t(&[1], vec![0i32]), vec![a.clone(), a.clone()]).unwrap();
    assert_close(&y, &[4, 2], &[1., 2., 3., 4., 1., 2., 3., 4.], 0.0);
    let s = concat_v1(
        Tensor::scalar(0i32),
        vec![
            strs(&[1, 2], &["a", "b"]),
            strs(&[0, 2], &[]),
            strs(&[1, 2], &["c", "d"]),
        ],
    )
    .unwrap();
    assert_eq!(sv(&s), ["a", "b", "c", "d"]);
    let y = concat_v1(
        Tensor::scalar(1i32),
        vec![t(&[2, 0], Vec::<f32>::new()), t(&[2, 0], Vec::<f32>::new())],
    )
    .unwrap();
    assert_eq!(y.dims(), &[2, 0]);
    let cases: Vec<(Result<Tensor>, &str)> = vec![
        (
            concat_v1(Tensor::scalar(0i32), vec![a.clone(), b.clone()]),
            "ConcatOp : Dimension 1 in both shapes must be equal: shape[0] = [2,2] vs. shape[1] = [2,1]",
        ),
        (
            concat_v1(Tensor::scalar(2i32), vec![a.clone(), b.clone()]),
            "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got 2",
        ),
        (
            concat_v1(Tensor::scalar(-3i32), vec![a.clone(), b.clone()]),
            "ConcatOp : Expected concatenating dimensions in the range [-2, 2), but got -3",
        ),
        (
            concat_v1(Tensor::scalar(0i32), vec![a.clone(), t(&[2], vec![1f32, 2.])]),
            "ConcatOp : Ranks of all input tensors should match: shape[0] = [2,2] vs. shape[1] = [2]",
        ),
        (
            concat_v1(t(&[1, 1], vec![0i32]), vec![a.clone(), a.clone()]),
            "concat_dim tensor should be a scalar integer, but got shape [1,1]",
        ),
    ];
    for (r, msg) in cases {
        assert_err(r, Code::InvalidArgument, msg);
    }
    assert_err(
        concat(vec![a.clone(), a], t(&[1, 1], vec![0i32])),
        Code::InvalidArgument,
        "axis tensor should be a scalar integer, but got shape [1,1]",
    );
}

fn concat_offset(dim: Tensor, shapes: Vec<Tensor>) -> Result<Vec<Tensor>> {
    ctx().op("ConcatOffset").input(dim).input_list(shapes).run()
}

#[test]
fn concat_offset_values_and_errors() {
    let s = |v: &[i32]| t(&[v.len() as i64], v.to_vec());
    let out = concat_offset(
        Tensor::scalar(1i32),
        vec![s(&[2, 3, 5]), s(&[2, 7, 5]), s(&[2, 0, 5])],
    )
    .unwrap();
    let got: Vec<Vec<i32>> = out.iter().map(v::<i32>).collect();
    assert_eq!(got, [vec![0, 0, 0], vec![0, 3, 0], vec![0, 10, 0]]);
    let out = concat_offset(Tensor::scalar(-2i32), vec![s(&[2, 3, 5]), s(&[2, 7, 5])]).unwrap();
    assert_eq!(v::<i32>(&out[1]), [0, 3, 0]);
    let out = concat_offset(
        Tensor::scalar(0i32),
        vec![t(&[2], vec![2i64, 3]), t(&[2], vec![4i64, 3])],
    )
    .unwrap();
    assert_eq!(out[1].dtype(), DataType::Int64);
    assert_eq!(v::<i64>(&out[1]), [2, 0]);
    // Neither negative sizes nor overflows are errors in TensorFlow.
    let out = concat_offset(Tensor::scalar(0i32), vec![s(&[-3, 2]), s(&[5, 2])]).unwrap();
    assert_eq!(v::<i32>(&out[1]), [-3, 0]);
    let out = concat_offset(Tensor::scalar(0i32), vec![s(&[i32::MAX]), s(&[5]), s(&[1])]).unwrap();
    assert_eq!(v::<i32>(&out[1]), [i32::MAX]);
    assert_eq!(v::<i32>(&out[2]), [i32::MAX.wrapping_add(5)]);
    let cases: Vec<(Result<Vec<Tensor>>, &str)> = vec![
        (
            concat_offset(Tensor::scalar(3i32), vec![s(&[2, 3, 5]), s(&[2, 7, 5])]),
            "Concat dim is out of range: 3 vs. 3",
        ),
        (
            concat_offset(Tensor::scalar(-4i32), vec![s(&[2, 3, 5]), s(&[2, 7, 5])]),
            "Concat dim is out of range: -4 vs. 3",
        ),
        (
            concat_offset(Tensor::scalar(1i32), vec![s(&[2, 3, 5]), s(&[2, 7, 6])]),
            "All dimensions except 1 must match. Input 1 has shape [2 7 6] and doesn't match input 0 with shape [2 3 5].",
        ),
        (
            concat_offset(Tensor::scalar(1i32), vec![s(&[2, 3, 5]), s(&[2, 7])]),
            "input 1 should contain 3 elements, but got 2",
        ),
        (
            concat_offset(
                Tensor::scalar(1i32),
                vec![t(&[1, 3], vec![2i32, 3, 5]), s(&[2, 7, 5])],
            ),
            "input 1 should be a vector, but got shape [1,3]",
        ),
        (
            concat_offset(t(&[1], vec![1i32]), vec![s(&[2, 3, 5]), s(&[2, 7, 5])]),
            "Concat dim tensor should be a scalar integer, but got shape [1]",
        ),
        (
            concat_offset(Tensor::scalar(0i32), vec![s(&[]), s(&[])]),
            "Concat dim is out of range: 0 vs. 0",
        ),
    ];
    for (r, msg) in cases {
        assert_err(r, Code::InvalidArgument, msg);
    }
}

fn parallel_concat_start(
    shape: opforge_core::proto::TensorShapeProto,
    dtype: DataType,
) -> Result<Tensor> {
    ctx()
        .op("_ParallelConcatStart")
        .attr("shape", shape)
        .attr("dtype", dtype)
        .run1()
}

#[test]
fn parallel_concat_start_is_zeros_of_its_shape() {
    let shape = |d: &[i64]| TensorShape::new(d).unwrap().to_proto();
    let y = parallel_concat_start(shape(&[2, 3]), DataType::Float).unwrap();
    assert_close(&y, &[2, 3], &[0.0; 6], 0.0);
    let y = parallel_concat_start(shape(&[2]), DataType::String).unwrap();
    assert_eq!(sv(&y), ["", ""]);
    let y = parallel_concat_start(shape(&[3]), DataType::Bool).unwrap();
    assert_eq!(v::<bool>(&y), [false; 3]);
    let y = parallel_concat_start(shape(&[0, 4]), DataType::Complex128).unwrap();
    assert_eq!(y.dims(), &[0, 4]);
    let y = parallel_concat_start(shape(&[]), DataType::Int64).unwrap();
    assert_eq!(v::<i64>(&y), [0]);
    // An unknown rank is a scalar, as in TensorFlow.
    let unknown = opforge_core::proto::TensorShapeProto {
        unknown_rank: true,
        ..Default::default()
    };
    let y = parallel_concat_start(unknown, DataType::Float).unwrap();
    assert_eq!(y.dims(), &[] as &[i64]);
    let mut partial = shape(&[2, 3]);
    partial.dim[0].size = -1;
    assert_err(
        parallel_concat_start(partial, DataType::Float),
        Code::InvalidArgument,
        "Shape [?,3] is not fully defined",
    );
}

fn mirror_pad(x: Tensor, paddings: Tensor, mode: &str) -> Result<Tensor> {
    ctx()
        .op("MirrorPad")
        .input(x)
        .input(paddings)
        .attr("mode", mode)
        .run1()
}

fn mirror_pad_grad(x: Tensor, paddings: Tensor, mode: &str) -> Result<Tensor> {
    ctx()
        .op("MirrorPadGrad")
        .input(x)
        .input(paddings)
        .attr("mode", mode)
        .run1()
}

#[test]
fn mirror_pad_values() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    let p = t(&[2, 2], vec![1i32, 1, 2, 2]);
    let y = mirror_pad(x.clone(), p.clone(), "REFLECT").unwrap();
    assert_eq!(y.dims(), &[4, 7]);
    assert_eq!(
        v::<i32>(&y),
        [6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1]
    );
    let y = mirror_pad(x.clone(), p, "SYMMETRIC").unwrap();
    assert_eq!(
        v::<i32>(&y),
        [2, 1, 1, 2, 3, 3, 2, 2, 1, 1, 2, 3, 3, 2, 5, 4, 4, 5, 6, 6, 5, 5, 4, 4, 5, 6, 6, 5]
    );
    let y = mirror_pad(x.clone(), t(&[2, 2], vec![2i32, 2, 3, 3]), "SYMMETRIC").unwrap();
    assert_eq!(y.dims(), &[6, 9]);
    assert_eq!(
        v::<i32>(&y)[..18],
        [6, 5, 4, 4, 5, 6, 6, 5, 4, 3, 2, 1, 1, 2, 3, 3, 2, 1]
    );
    let y = mirror_pad(x.clone(), t(&[2, 2], vec![1i64, 1, 0, 2]), "REFLECT").unwrap();
    assert_eq!(
        v::<i32>(&y),
        [4, 5, 6, 5, 4, 1, 2, 3, 2, 1, 4, 5, 6, 5, 4, 1, 2, 3, 2, 1]
    );
    let x3 = iota(&[2, 3, 4]);
    let y = mirror_pad(
        x3.clone(),
        t(&[3, 2], vec![1i32, 0, 2, 1, 0, 3]),
        "SYMMETRIC",
    )
    .unwrap();
    assert_eq!(y.dims(), &[3, 6, 7]);
    let want = [
        4, 5, 6, 7, 7, 6, 5, 0, 1, 2, 3, 3, 2, 1, 0, 1, 2, 3, 3, 2, 1, 4, 5, 6, 7, 7, 6, 5, 8, 9,
        10, 11, 11, 10, 9, 8, 9, 10, 11, 11, 10, 9, 4, 5, 6, 7, 7, 6, 5, 0, 1, 2, 3, 3, 2, 1, 0, 1,
        2, 3, 3, 2, 1, 4, 5, 6, 7, 7, 6, 5, 8, 9, 10, 11, 11, 10, 9, 8, 9, 10, 11, 11, 10, 9, 16,
        17, 18, 19, 19, 18, 17, 12, 13, 14, 15, 15, 14, 13, 12, 13, 14, 15, 15, 14, 13, 16, 17, 18,
        19, 19, 18, 17, 20, 21, 22, 23, 23, 22, 21, 20, 21, 22, 23, 23, 22, 21,
    ];
    assert_eq!(v::<i32>(&y), want);
    let y = mirror_pad(x3, t(&[3, 2], vec![1i32, 1, 0, 2, 3, 0]), "REFLECT").unwrap();
    assert_eq!(y.dims(), &[4, 5, 7]);
    let want = [
        15, 14, 13, 12, 13, 14, 15, 19, 18, 17, 16, 17, 18, 19, 23, 22, 21, 20, 21, 22, 23, 19, 18,
        17, 16, 17, 18, 19, 15, 14, 13, 12, 13, 14, 15, 3, 2, 1, 0, 1, 2, 3, 7, 6, 5, 4, 5, 6, 7,
        11, 10, 9, 8, 9, 10, 11, 7, 6, 5, 4, 5, 6, 7, 3, 2, 1, 0, 1, 2, 3,
    ];
    assert_eq!(v::<i32>(&y)[..70], want);
    assert_eq!(v::<i32>(&y)[70..], want);
    // Strings, bool, a scalar, empty tensors.
    let y = mirror_pad(
        strs(&[3], &["a", "b", "c"]),
        t(&[1, 2], vec![2i32, 1]),
        "REFLECT",
    )
    .unwrap();
    assert_eq!(sv(&y), ["c", "b", "a", "b", "c", "b"]);
    let y = mirror_pad(
        t(&[2], vec![true, false]),
        t(&[1, 2], vec![1i32, 1]),
        "SYMMETRIC",
    )
    .unwrap();
    assert_eq!(v::<bool>(&y), [true, true, false, false]);
    let y = mirror_pad(
        Tensor::scalar(3.0f32),
        t(&[0, 2], Vec::<i32>::new()),
        "SYMMETRIC",
    )
    .unwrap();
    assert_eq!(v::<f32>(&y), [3.0]);
    let y = mirror_pad(
        t(&[0, 3], Vec::<f32>::new()),
        t(&[2, 2], vec![0i32, 0, 1, 1]),
        "SYMMETRIC",
    )
    .unwrap();
    assert_eq!(y.dims(), &[0, 5]);
    let y = mirror_pad(t(&[1, 1], vec![7i32]), t(&[2, 2], vec![0i32; 4]), "REFLECT").unwrap();
    assert_eq!(v::<i32>(&y), [7]);
}

#[test]
fn mirror_pad_errors() {
    let x = t(&[2, 3], vec![1i32, 2, 3, 4, 5, 6]);
    let p = |v: Vec<i32>| t(&[v.len() as i64 / 2, 2], v);
    let cases: Vec<(Result<Tensor>, &str)> =
        vec![
        (
            mirror_pad(x.clone(), p(vec![2, 0, 0, 0]), "REFLECT"),
            "paddings must be less than the dimension size: 2, 0 not less than 2",
        ),
        (
            mirror_pad(x.clone(), p(vec![0, 0, 0, 3]), "REFLECT"),
            "paddings must be less than the dimension size: 0, 3 not less than 3",
        ),
        (
            mirror_pad(x.clone(), p(vec![3, 0, 0, 0]), "SYMMETRIC"),
            "paddings must be no greater than the dimension size: 3, 0 greater than 2",
        ),
        (
            mirror_pad(x.clone(), p(vec![-1, 5, 0, 0]), "SYMMETRIC"),
            "paddings must be non-negative: -1 5",
        ),
        (
            mirror_pad(x.clone(), p(vec![3, 0, -1, 0]), "REFLECT"),
            "paddings must be less than the dimension size: 3, 0 not less than 2",
        ),
        (
            mirror_pad(x.clone(), t(&[2, 3], vec![1i32, 0, 0, 0, 0, 0]), "SYMMETRIC"),
            "paddings must be a matrix with 2 columns: [2,3]",
        ),
        (
            mirror_pad(x.clone(), t(&[2], vec![1i32, 0]), "SYMMETRIC"),
            "paddings must be a matrix with 2 columns: [2]",
        ),
        (
            mirror_pad(x.clone(), p(vec![1, 0]), "SYMMETRIC"),
            "The first dimension of paddings must be the rank of inputs[1,2], [2,3]",
        ),
        (
            mirror_pad(t(&[0, 3], Vec::<f32>::new()), p(vec![1, 0, 1, 1]), "SYMMETRIC"),
            "paddings must be no greater than the dimension size: 1, 0 greater than 0",
        ),
        (
            mirror_pad(t(&[0, 3], Vec::<f32>::new()), p(vec![0, 0, 1, 1]), "REFLECT"),
            "paddings must be less than the dimension size: 0, 0 not less than 0",
        ),
        (
            mirror_pad(
                x.clone(),
                t(&[2, 2], vec![1i64, 1, 0, 1 << 62]),
                "REFLECT",
            ),
            "paddings must be less than the dimension size: 0, 4611686018427387904 not less than 3",
        ),
    ];
    for (r, msg) in cases {
        assert_err(r, Code::InvalidArgument, msg);
    }
    assert_err(
        mirror_pad(t(&[1; 6], vec![0f32]), p(vec![1, 0]), "REFLECT"),
        Code::Unimplemented,
        "inputs rank not in [0,5]: 6",
    );
    // A huge zero-size dimension padded symmetrically overflows no sum.
    assert!(mirror_pad(
        Tensor::zeros_with_shape(DataType::Float, TensorShape::new(&[0, 1 << 62]).unwrap())
            .unwrap(),
        t(&[2, 2], vec![0i64, 0, 1 << 62, 1 << 62]),
        "SYMMETRIC",
    )
    .is_err());
}

#[test]
fn mirror_pad_grad_values() {
    let g = t(&[4, 7], (1..=28).map(|v| v as f32).collect());
    let p = |v: Vec<i32>| t(&[v.len() as i64 / 2, 2], v);
    let y = mirror_pad_grad(g.clone(), p(vec![1, 1, 2, 2]), "REFLECT").unwrap();
    assert_close(&y, &[2, 3], &[76., 108., 68., 48., 66., 40.], 0.0);
    let y = mirror_pad_grad(g.clone(), p(vec![1, 1, 2, 2]), "SYMMETRIC").unwrap();
    assert_close(&y, &[2, 3], &[24., 45., 36., 80., 129., 92.], 0.0);
    let y = mirror_pad_grad(g.clone(), p(vec![2, 0, 0, 3]), "SYMMETRIC").unwrap();
    assert_close(&y, &[2, 4], &[23., 60., 60., 60., 23., 60., 60., 60.], 0.0);
    let y = mirror_pad_grad(g, p(vec![0, 1, 3, 0]), "REFLECT").unwrap();
    assert_close(
        &y,
        &[3, 4],
        &[4., 8., 8., 8., 36., 72., 72., 72., 18., 36., 36., 36.],
        0.0,
    );
    let g3 = t(&[5, 6, 7], (0..210).map(|v| v as f64).collect());
    let y = mirror_pad_grad(g3.clone(), p(vec![1, 1, 2, 0, 0, 3]), "REFLECT").unwrap();
    let want = [
        118., 118., 118., 59., 236., 236., 236., 118., 236., 236., 236., 118., 160., 160., 160.,
        80., 606., 606., 606., 303., 1212., 1212., 1212., 606., 1212., 1212., 1212., 606., 732.,
        732., 732., 366., 286., 286., 286., 143., 572., 572., 572., 286., 572., 572., 572., 286.,
        328., 328., 328., 164.,
    ];
    assert_close(&y, &[3, 4, 4], &want, 0.0);
    let y = mirror_pad_grad(g3, p(vec![2, 1, 0, 2, 3, 1]), "SYMMETRIC").unwrap();
    let want = [
        262., 262., 400., 290., 290., 442., 720., 720., 1094., 720., 720., 1094., 603., 603., 915.,
        645., 645., 978., 1500., 1500., 2271., 1500., 1500., 2271.,
    ];
    assert_close(&y, &[2, 4, 3], &want, 0.0);
    // Complex, int8 and uint8 (which wrap, as TensorFlow's do).
    let c = t(
        &[4],
        vec![
            Complex::new(1f32, 1.),
            Complex::new(2., 0.),
            Complex::new(3., 0.),
            Complex::new(4., 0.),
        ],
    );
    let y = mirror_pad_grad(c, p(vec![1, 1]), "SYMMETRIC").unwrap();
    assert_eq!(
        v::<Complex<f32>>(&y),
        [Complex::new(3., 1.), Complex::new(7., 0.)]
    );
    let y = mirror_pad_grad(t(&[6], vec![1i8, 2, 3, 4, 5, 6]), p(vec![2, 1]), "REFLECT").unwrap();
    assert_eq!(v::<i8>(&y), [3, 12, 6]);
    let y = mirror_pad_grad(t(&[4], vec![200u8; 4]), p(vec![1, 1]), "SYMMETRIC").unwrap();
    assert_eq!(v::<u8>(&y), [144, 144]);
    let y = mirror_pad_grad(
        Tensor::scalar(3.0f32),
        t(&[0, 2], Vec::<i32>::new()),
        "REFLECT",
    )
    .unwrap();
    assert_eq!(v::<f32>(&y), [3.0]);
}

#[test]
fn mirror_pad_grad_errors() {
    let g = t(&[4, 7], vec![0f32; 28]);
    let p = |v: Vec<i32>| t(&[v.len() as i64 / 2, 2], v);
    let cases: Vec<(Result<Tensor>, &str)> = vec![
        (
            mirror_pad_grad(g.clone(), p(vec![2, 1, 0, 0]), "REFLECT"),
            "paddings must be less than the output dimension size: 2, 1 not less than 1",
        ),
        (
            mirror_pad_grad(g.clone(), p(vec![2, 1, 0, 0]), "SYMMETRIC"),
            "paddings must be no greater than the output dimension size: 2, 1 greater than 1",
        ),
        (
            mirror_pad_grad(g.clone(), p(vec![3, 1, 0, 0]), "SYMMETRIC"),
            "Total paddings must be less than the input dimension size: 4 was not less than 4",
        ),
        (
            mirror_pad_grad(g.clone(), p(vec![3, 3, 0, 0]), "SYMMETRIC"),
            "Total paddings must be less than the input dimension size: 6 was not less than 4",
        ),
        (
            mirror_pad_grad(g.clone(), p(vec![-1, 0, 0, 0]), "SYMMETRIC"),
            "Paddings must be non-negative: -1, 0",
        ),
        (
            mirror_pad_grad(g.clone(), t(&[2, 3], vec![1i32, 0, 0, 0, 0, 0]), "SYMMETRIC"),
            "paddings must be a matrix with 2 columns: [2,3]",
        ),
        (
            mirror_pad_grad(g.clone(), p(vec![1, 0]), "SYMMETRIC"),
            "The first dimension of paddings must be the rank of inputs[1,2] [4,7]",
        ),
        (
            mirror_pad_grad(t(&[0, 5], Vec::<f32>::new()), p(vec![0, 0, 1, 1]), "SYMMETRIC"),
            "Total paddings must be less than the input dimension size: 0 was not less than 0",
        ),
        (
            mirror_pad_grad(
                t(&[8], (0..8).map(|v| v as f32).collect()),
                p(vec![3, 2]),
                "REFLECT",
            ),
            "paddings must be less than the output dimension size: 3, 2 not less than 3",
        ),
        (
            mirror_pad_grad(
                t(&[2, 2], vec![0f32; 4]),
                t(&[2, 2], vec![i64::MAX, i64::MAX, 0, 0]),
                "REFLECT",
            ),
            "Total paddings must be less than the input dimension size: 18446744073709551614 was not less than 2",
        ),
    ];
    for (r, msg) in cases {
        assert_err(r, Code::InvalidArgument, msg);
    }
    assert_err(
        mirror_pad_grad(
            t(&[1; 7], vec![0f32]),
            t(&[7, 2], vec![0i32; 14]),
            "REFLECT",
        ),
        Code::Unimplemented,
        "inputs rank not in [0,5]: 7",
    );
}
