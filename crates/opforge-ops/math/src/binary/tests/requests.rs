//! The binary kernels' output requests: `Add` into an accumulator (same
//! shapes, broadcasting, a scalar, sign-agnostic integers), its shape
//! checked; `InPlace` declared for the ops whose output has the inputs'
//! dtype.

use super::*;
use opforge_core::kernel::OutputBinding;
use opforge_testing::util::call_with_requests;

/// `op(x, y)` added into `acc`: the result and whether it is `acc`'s buffer.
fn add_into(op: &str, x: Tensor, y: Tensor, acc: Tensor) -> Result<(Tensor, bool)> {
    let data = acc.host_data().map(|d| d.0);
    let mut b = [OutputBinding::Add(acc)];
    let mut out = call_with_requests(op, vec![x, y], &[], &mut b)?;
    let (_, got) = out.pop().expect("one output");
    let same = got.host_data().map(|d| d.0) == data;
    Ok((got, same))
}

#[test]
fn add_requests_add_the_result_into_the_accumulator() {
    let acc = t(&[2, 3], vec![10f32, 20., 30., 40., 50., 60.]);
    let x = t(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]);
    let y = t(&[2, 3], vec![2f32, 2., 2., 3., 3., 3.]);
    let (got, same) = add_into("Mul", x.clone(), y, acc).unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[12., 24., 36., 52., 65., 78.]);
    assert!(same, "added in the accumulator's own buffer");
    // Broadcasting ([2, 3] - [3]) and a scalar.
    let acc = t(&[2, 3], vec![0f32; 6]);
    let (got, _) = add_into("Sub", x.clone(), t(&[3], vec![1f32, 2., 3.]), acc).unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[0., 0., 0., 3., 3., 3.]);
    let acc = t(&[2, 3], vec![1f32; 6]);
    let (got, _) = add_into("AddV2", Tensor::scalar(0.5f32), x, acc).unwrap();
    assert_eq!(got.flat::<f32>().unwrap(), &[2.5, 3.5, 4.5, 5.5, 6.5, 7.5]);
    // Unsigned integers wrap, as AddN does.
    let acc = t(&[2], vec![u32::MAX, 1]);
    let (got, _) = add_into("AddV2", t(&[2], vec![1u32, 2]), t(&[2], vec![0u32, 3]), acc).unwrap();
    assert_eq!(got.flat::<u32>().unwrap(), &[0, 6]);
}

#[test]
fn an_accumulator_of_another_shape_is_refused() {
    let acc = t(&[3], vec![0f32; 3]);
    let e = add_into("Mul", t(&[2], vec![1f32, 2.]), t(&[2], vec![1f32, 2.]), acc).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("accumulator of shape [3]"), "{e}");
    assert!(e.message().contains("result has shape [2]"), "{e}");
}

#[test]
fn in_place_requests_reuse_the_offered_input() {
    let x = t(&[3], vec![1f32, 2., 3.]);
    let data = x.host_data().unwrap().0;
    let mut b = [OutputBinding::InPlace { input: 0 }];
    let got = call_with_requests("Mul", vec![x, t(&[3], vec![2f32; 3])], &[], &mut b).unwrap();
    assert_eq!(got[0].1.flat::<f32>().unwrap(), &[2., 4., 6.]);
    assert_eq!(got[0].1.host_data().unwrap().0, data);
    // A comparison's output is bool: no InPlace (asked Write, a new buffer).
    let x = t(&[3], vec![1f32, 2., 3.]);
    let mut b = [OutputBinding::InPlace { input: 0 }];
    let got = call_with_requests("Less", vec![x.clone(), x], &[], &mut b).unwrap();
    assert_eq!(got[0].1.flat::<bool>().unwrap(), &[false; 3]);
}
