//! Gradient checks of the space/batch/depth ops (numeric against the
//! registered gradients, in float64 and float32, on the CPU and the fake
//! device), and `ExtractImagePatches`' gradient against TensorFlow's.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientTape, Ops, OpsExt};
use opforge_core::proto::AttrValue;
use opforge_core::{Code, Tensor};
use opforge_testing::util::{assert_close, check, ctx, t, weighted};

/// `n` distinct values.
fn xs(n: usize) -> Vec<f64> {
    (0..n).map(|i| (i as f64) * 0.37 - 1.1).collect()
}

fn ints(dims: &[i64], v: Vec<i32>) -> Tensor {
    t(dims, v)
}

#[test]
fn space_to_batch_nd_and_batch_to_space_nd_grads() {
    // Padding (SpaceToBatchND) and cropping (BatchToSpaceND) on both dims.
    let cases = [
        ("SpaceToBatchND", vec![1, 2, 3, 1], [2, 3], [1, 1, 1, 2]),
        ("BatchToSpaceND", vec![6, 2, 1, 1], [2, 3], [1, 0, 0, 1]),
        ("SpaceToBatchND", vec![2, 2, 2, 2], [2, 1], [0, 0, 1, 1]),
    ];
    for (op, dims, block, amounts) in cases {
        let n = dims.iter().product::<i64>() as usize;
        check(
            op,
            &move |o, x| {
                let b = o.constant(ints(&[2], block.to_vec()))?;
                let a = o.constant(ints(&[2, 2], amounts.to_vec()))?;
                let y = o.op1(op, &[x[0], b, a], &[])?;
                weighted(o, y)
            },
            &[(dims.clone(), xs(n))],
        );
    }
}

#[test]
fn space_to_batch_and_batch_to_space_grads() {
    let cases = [
        ("SpaceToBatch", vec![1, 3, 2, 1], [1, 0, 0, 2]),
        ("BatchToSpace", vec![4, 2, 1, 2], [0, 1, 1, 0]),
    ];
    for (op, dims, amounts) in cases {
        let n = dims.iter().product::<i64>() as usize;
        check(
            op,
            &move |o, x| {
                let a = o.constant(ints(&[2, 2], amounts.to_vec()))?;
                let y = o.op1(op, &[x[0], a], &[("block_size", 2i64.into_attr_value())])?;
                weighted(o, y)
            },
            &[(dims.clone(), xs(n))],
        );
    }
}

#[test]
fn space_to_depth_and_depth_to_space_grads() {
    for (op, dims) in [
        ("SpaceToDepth", vec![1, 4, 2, 2]),
        ("DepthToSpace", vec![2, 1, 2, 4]),
    ] {
        let n = dims.iter().product::<i64>() as usize;
        check(
            op,
            &move |o, x| {
                let y = o.op1(op, &[x[0]], &[("block_size", 2i64.into_attr_value())])?;
                weighted(o, y)
            },
            &[(dims.clone(), xs(n))],
        );
    }
}

#[test]
fn depth_grads_refuse_nchw_vect_c() {
    // The gradient function's own check (the forward op has no CPU kernel
    // for NCHW_VECT_C, so it is called directly).
    use opforge_core::autodiff::GradientContext;
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[1, 1, 1, 1, 4], vec![0f32; 4]));
    let mut attrs = opforge_core::attrs::AttrMap::new();
    attrs.insert("block_size".into(), 2i64.into_attr_value());
    attrs.insert("data_format".into(), "NCHW_VECT_C".into_attr_value());
    let (xs, grads) = ([x], [Some(x)]);
    let mut gctx = GradientContext::new(&mut tape, "SpaceToDepth", &attrs, &xs, &xs, &grads);
    let e = super::gradients::depth_grad(&mut gctx).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Cannot compute SpaceToDepth gradient with NCHW_VECT_C. NCHW_VECT_C requires qint8 data type."
    );
}

fn patch_attrs(
    k: [i64; 4],
    s: [i64; 4],
    r: [i64; 4],
    padding: &str,
) -> Vec<(&'static str, AttrValue)> {
    vec![
        ("ksizes", k.to_vec().into_attr_value()),
        ("strides", s.to_vec().into_attr_value()),
        ("rates", r.to_vec().into_attr_value()),
        ("padding", padding.into_attr_value()),
    ]
}

#[test]
fn extract_image_patches_grad() {
    let cases = [
        (
            vec![1, 3, 4, 1],
            patch_attrs([1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID"),
        ),
        (
            vec![2, 3, 3, 2],
            patch_attrs([1, 2, 2, 1], [1, 2, 1, 1], [1, 1, 1, 1], "SAME"),
        ),
        (
            vec![1, 4, 5, 1],
            patch_attrs([1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 2, 1], "SAME"),
        ),
        (
            vec![1, 5, 3, 1],
            patch_attrs([1, 2, 1, 1], [1, 3, 2, 1], [1, 2, 1, 1], "VALID"),
        ),
    ];
    for (dims, attrs) in cases {
        let n = dims.iter().product::<i64>() as usize;
        check(
            "ExtractImagePatches",
            &move |o, x| {
                let y = o.op1("ExtractImagePatches", &[x[0]], &attrs)?;
                weighted(o, y)
            },
            &[(dims.clone(), xs(n))],
        );
    }
}

/// The gradient of `sum(patches * range)` against TensorFlow's.
#[test]
fn extract_image_patches_grad_as_tensorflow() {
    // values from TensorFlow 2.21
    let cases = [
        (
            patch_attrs([1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 2, 1], "SAME"),
            vec![
                26., 28., 50., 52., 78., 81., 54., 56., 78., 80., 38., 40., 62., 64., 96., 99.,
                66., 68., 90., 92., 146., 148., 170., 172., 258., 261., 174., 176., 198., 200.,
                158., 160., 182., 184., 276., 279., 186., 188., 210., 212.,
            ],
        ),
        (
            patch_attrs([1, 2, 2, 1], [1, 3, 2, 1], ONES, "VALID"),
            vec![
                0., 1., 2., 3., 8., 9., 10., 11., 0., 0., 4., 5., 6., 7., 12., 13., 14., 15., 0.,
                0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.,
            ],
        ),
    ];
    for (attrs, want) in cases {
        let mut tape = GradientTape::new(ctx(), false);
        let x = tape.watch(t(&[1, 4, 5, 2], (1..=40).map(f64::from).collect()));
        let y = tape.op1("ExtractImagePatches", &[x], &attrs).unwrap();
        let n = tape.op1("Size", &[y], &[]).unwrap();
        let zero = tape.constant(Tensor::scalar(0i32)).unwrap();
        let one = tape.constant(Tensor::scalar(1i32)).unwrap();
        let w = tape.op1("Range", &[zero, n, one], &[]).unwrap();
        let w = tape
            .op1(
                "Cast",
                &[w],
                &[("DstT", opforge_core::DataType::Double.into_attr_value())],
            )
            .unwrap();
        let s = tape.shape_of(y).unwrap();
        let w = tape.reshape(w, s).unwrap();
        let yw = tape.mul(y, w).unwrap();
        let axes = tape.int_vector(&[0, 1, 2, 3]).unwrap();
        let total = tape.op1("Sum", &[yw, axes], &[]).unwrap();
        let g = tape.gradient(total, &[x]).unwrap()[0].unwrap();
        assert_close(tape.value(g).unwrap(), &[1, 4, 5, 2], &want, 0.0);
    }
}

const ONES: [i64; 4] = [1, 1, 1, 1];

/// A 64x64 image with a 3x3 kernel: the gradient of `sum(patches)` counts
/// the patches covering each pixel. The former `MatMul(OneHot(..))` sum
/// needed a `[64 * 64 * 9, 64 * 64]` one-hot matrix (about 600 MB in
/// float32); `UnsortedSegmentSum` needs memory linear in the image.
#[test]
fn extract_image_patches_grad_of_a_large_image() {
    let (h, w) = (64usize, 64usize);
    let mut tape = GradientTape::new(ctx(), false);
    let x = tape.watch(t(&[1, h as i64, w as i64, 1], vec![1.0f32; h * w]));
    let attrs = patch_attrs([1, 3, 3, 1], ONES, ONES, "SAME");
    let y = tape.op1("ExtractImagePatches", &[x], &attrs).unwrap();
    let g = tape.gradient(y, &[x]).unwrap();
    let covering = |i: usize, n: usize| if i == 0 || i == n - 1 { 2.0 } else { 3.0 };
    let want: Vec<f64> = (0..h * w)
        .map(|p| covering(p / w, h) * covering(p % w, w))
        .collect();
    assert_close(
        tape.value(g[0].unwrap()).unwrap(),
        &[1, h as i64, w as i64, 1],
        &want,
        0.0,
    );
}
