//! The MLP example's model trains: the loss falls.

#[path = "../examples/mlp/model.rs"]
mod model;

use model::{build, synthetic_batches};
use opforge::graph::SessionOptions;

#[test]
fn a_small_mlp_learns_the_teacher() {
    opforge::opforge_ops::link();
    let (batch, sizes) = (32, [20, 32, 32, 4]);
    let data = synthetic_batches(8, batch, sizes[0], sizes[3], 3).unwrap();
    let model = build(&sizes, batch, 0.1, 11, SessionOptions::default()).unwrap();
    model.init().unwrap();
    let before: f32 = data
        .iter()
        .map(|(x, y)| model.loss(x, y).unwrap())
        .sum::<f32>()
        / data.len() as f32;
    for epoch in 0..30 {
        for (x, y) in &data {
            let l = model.step(x, y).unwrap();
            assert!(l.is_finite(), "epoch {epoch}: loss {l}");
        }
    }
    let after: f32 = data
        .iter()
        .map(|(x, y)| model.loss(x, y).unwrap())
        .sum::<f32>()
        / data.len() as f32;
    assert!(
        after < 0.5 * before,
        "loss fell only from {before} to {after}"
    );
}
