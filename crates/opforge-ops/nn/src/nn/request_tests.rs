//! The nn kernels' output requests: `SparseSoftmaxCrossEntropyWithLogits`
//! handles `Null` for its backprop.

use super::tests::sparse;
use opforge_testing::util::t;

#[test]
fn sparse_cross_entropy_skips_the_backprop_nobody_reads() {
    use opforge_core::kernel::OutputBinding;
    // Rows enough to be sharded over the pool.
    let (rows, cols) = (300usize, 7usize);
    let f: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.25)
        .collect();
    let labels: Vec<i32> = (0..rows).map(|r| (r * 5 % cols) as i32).collect();
    let ft = t(&[rows as i64, cols as i64], f);
    let lt = t(&[rows as i64], labels);
    let both = sparse(ft.clone(), lt.clone()).unwrap();
    let mut b = [OutputBinding::Write, OutputBinding::Null];
    let got = opforge_testing::util::call_with_requests(
        "SparseSoftmaxCrossEntropyWithLogits",
        vec![ft, lt],
        &[],
        &mut b,
    )
    .unwrap();
    assert_eq!(got.len(), 1, "only the loss comes back");
    assert_eq!(got[0].0, 0);
    assert_eq!(
        got[0].1.flat::<f32>().unwrap(),
        both[0].flat::<f32>().unwrap()
    );
}
