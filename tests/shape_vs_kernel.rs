//! Shape functions against kernels (issue 4): for the elementwise,
//! broadcasting, matmul, reduction and reshape families, when every input
//! shape is fully known, the shape the op's shape function infers equals the
//! shape its kernel produces (and where the kernel rejects the inputs, the
//! shape function does too, for the checks both make).

use opforge::eager::EagerContext;
use opforge::{Result, Tensor};
use opforge_testing::shape::{run_shape_fn, ShapeTestOp};
use proptest::prelude::*;
use std::sync::OnceLock;

fn ctx() -> &'static EagerContext {
    static CTX: OnceLock<EagerContext> = OnceLock::new();
    CTX.get_or_init(|| {
        opforge::opforge_ops::link();
        EagerContext::new(2).expect("a CPU device")
    })
}

fn shape_str(dims: &[i64]) -> String {
    let d: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", d.join(","))
}

/// A float tensor of `dims` (values do not matter).
fn ones(dims: &[i64]) -> Tensor {
    let n: i64 = dims.iter().product();
    Tensor::from_vec(dims, vec![1.0f32; n as usize]).unwrap()
}

fn int_vec(v: &[i32]) -> Tensor {
    Tensor::from_slice(&[v.len() as i64], v).unwrap()
}

/// Runs `op` eagerly and its shape function (with the op's attr defaults,
/// `attrs`, and `consts` as constant inputs), and compares output 0's shape.
/// Inputs the kernel rejects are skipped, after checking that the shape
/// function rejects them too when `both_reject` says it must.
fn compare(
    op: &str,
    inputs: Vec<Tensor>,
    attrs: &[(&str, bool)],
    consts: &[usize],
    both_reject: bool,
) -> std::result::Result<(), TestCaseError> {
    let mut call = ctx().op(op);
    for i in &inputs {
        call = call.input(i.clone());
    }
    for (k, v) in attrs {
        call = call.attr(k, *v);
    }
    let ran: Result<Tensor> = call.run1();
    let mut node = ShapeTestOp::new(op);
    for (k, v) in attrs {
        node = node.attr(k, *v);
    }
    let mut node = node.with_defaults().unwrap();
    for &i in consts {
        node = node.input_tensor(i, inputs[i].clone());
    }
    let ins: Vec<String> = inputs.iter().map(|t| shape_str(t.dims())).collect();
    let ins = ins.join(";");
    let inferred = run_shape_fn(&node, &ins);
    match ran {
        Err(e) => {
            if both_reject {
                prop_assert!(
                    inferred.is_err(),
                    "{op} on {ins}: the kernel fails ({e}) but the shape fn accepts"
                );
            }
        }
        Ok(out) => {
            let c = inferred
                .map_err(|e| TestCaseError::fail(format!("{op} on {ins}: shape fn fails: {e}")))?;
            let s = c
                .output(0)
                .ok_or_else(|| TestCaseError::fail(format!("{op} on {ins}: no output 0")))?;
            prop_assert_eq!(
                c.shape_values(s),
                Some(out.dims().to_vec()),
                "{} on {}",
                op,
                ins
            );
        }
    }
    Ok(())
}

/// A random shape of rank 0..=4 with dims 0..=3 (mostly nonzero).
fn shape(max_rank: usize) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(prop_oneof![8 => 1i64..=3, 1 => Just(0i64)], 0..=max_rank)
}

/// Two broadcast-compatible shapes: `y` takes a suffix of `x`, with some
/// dims replaced by 1 on either side (and sometimes an incompatible dim).
fn broadcast_pair() -> impl Strategy<Value = (Vec<i64>, Vec<i64>)> {
    (
        shape(4),
        0usize..=4,
        prop::collection::vec(0u8..4, 4),
        any::<bool>(),
    )
        .prop_map(|(x, cut, mods, swap)| {
            let cut = cut.min(x.len());
            let mut x = x;
            let mut y: Vec<i64> = x[cut..].to_vec();
            let off = x.len() - y.len();
            for (i, m) in mods.iter().enumerate().take(y.len()) {
                match m {
                    0 => y[i] = 1,
                    1 => x[off + i] = 1,
                    2 if y[i] == 2 => y[i] = 3, // sometimes incompatible
                    _ => {}
                }
            }
            if swap {
                (y, x)
            } else {
                (x, y)
            }
        })
}

const CASES: u32 = 64;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn elementwise_unary(dims in shape(4)) {
        compare("Tanh", vec![ones(&dims)], &[], &[], false)?;
    }

    #[test]
    fn broadcasting_binary((x, y) in broadcast_pair(), mul in any::<bool>()) {
        let op = if mul { "Mul" } else { "AddV2" };
        compare(op, vec![ones(&x), ones(&y)], &[], &[], true)?;
    }

    #[test]
    fn mat_mul(m in 0i64..4, k in 0i64..4, n in 0i64..4, ta: bool, tb: bool, bad in 0u8..8) {
        let k2 = if bad == 0 { k + 1 } else { k };
        let a = if ta { [k, m] } else { [m, k] };
        let b = if tb { [n, k2] } else { [k2, n] };
        compare(
            "MatMul",
            vec![ones(&a), ones(&b)],
            &[("transpose_a", ta), ("transpose_b", tb)],
            &[],
            true,
        )?;
    }

    #[test]
    fn batch_mat_mul_v2(
        (bx, by) in broadcast_pair(),
        m in 0i64..4, k in 0i64..4, n in 0i64..4,
        ax: bool, ay: bool,
    ) {
        // Batch shapes of rank <= 2 keep the tensors small.
        let bx: Vec<i64> = bx.into_iter().take(2).collect();
        let by: Vec<i64> = by.into_iter().take(2).collect();
        let mut x = bx;
        x.extend(if ax { [k, m] } else { [m, k] });
        let mut y = by;
        y.extend(if ay { [n, k] } else { [k, n] });
        compare(
            "BatchMatMulV2",
            vec![ones(&x), ones(&y)],
            &[("adj_x", ax), ("adj_y", ay)],
            &[],
            true,
        )?;
    }

    #[test]
    fn reductions(
        dims in shape(4),
        picks in prop::collection::vec(-5i32..5, 0..4),
        keep_dims: bool,
        max in any::<bool>(),
        scalar_axis in any::<bool>(),
    ) {
        let op = if max { "Max" } else { "Sum" };
        let r = dims.len() as i32;
        // Mostly valid axes (in [-r, r)); sometimes out of range.
        let axes: Vec<i32> = picks
            .iter()
            .map(|&p| if r > 0 && p.abs() < 4 { p.rem_euclid(2 * r) - r } else { p })
            .collect();
        let axes_t = match axes.first() {
            Some(&a) if scalar_axis => Tensor::scalar(a),
            _ => int_vec(&axes),
        };
        // TensorFlow's kernels reject duplicate axes; its shape function does not.
        let mut norm: Vec<i32> = axes.iter().map(|&a| if a < 0 { a + r } else { a }).collect();
        norm.sort_unstable();
        let unique = norm.windows(2).all(|w| w[0] != w[1]);
        compare(op, vec![ones(&dims), axes_t], &[("keep_dims", keep_dims)], &[1], unique)?;
    }

    #[test]
    fn reshape(
        factors in prop::collection::vec(1i64..=3, 0..5),
        cut in prop::collection::vec(any::<bool>(), 5),
        infer in prop::option::of(0usize..5),
        perturb in 0u8..8,
    ) {
        // The input: the product of the factors as one dim (plus a 2-split);
        // the target: a random grouping of the same factors.
        let total: i64 = factors.iter().product();
        let input = if total % 2 == 0 { vec![2, total / 2] } else { vec![total] };
        let mut target: Vec<i64> = Vec::new();
        let mut cur = 1;
        for (i, f) in factors.iter().enumerate() {
            cur *= f;
            if cut[i] || i + 1 == factors.len() {
                target.push(cur);
                cur = 1;
            }
        }
        if let Some(i) = infer {
            if i < target.len() {
                target[i] = -1;
            }
        }
        if perturb == 0 {
            // Sometimes a size that does not fit.
            target.push(2);
        }
        let shape: Vec<i32> = target.iter().map(|&d| d as i32).collect();
        compare("Reshape", vec![ones(&input), int_vec(&shape)], &[], &[1], true)?;
    }
}
