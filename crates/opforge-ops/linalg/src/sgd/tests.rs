//! Tests of the fused SGD update: bit-identical to `MatMul` followed by
//! `ResourceApplyGradientDescent`, in place and copy-on-write, and the
//! errors of both ops.

use super::*;
use opforge_core::eager::EagerContext;
use opforge_core::proto::TensorShapeProto;
use opforge_core::Code;
use opforge_testing::util::t;
use opforge_testing::{infer_error, infer_ok};

fn handle(c: &EagerContext, name: &str, dtype: DataType) -> Tensor {
    c.op("VarHandleOp")
        .attr("shared_name", name)
        .attr("dtype", dtype)
        .attr(
            "shape",
            TensorShapeProto {
                unknown_rank: true,
                ..Default::default()
            },
        )
        .run1()
        .unwrap()
}

fn assign(c: &EagerContext, h: &Tensor, v: Tensor) {
    c.op("AssignVariableOp")
        .input(h.clone())
        .input(v)
        .run()
        .unwrap();
}

fn read(c: &EagerContext, h: &Tensor, dtype: DataType) -> Tensor {
    c.op("ReadVariableOp")
        .input(h.clone())
        .attr("dtype", dtype)
        .run1()
        .unwrap()
}

fn fused(
    c: &EagerContext,
    h: &Tensor,
    alpha: Tensor,
    a: Tensor,
    b: Tensor,
    ta: bool,
    tb: bool,
) -> Result<()> {
    c.op(NAME)
        .input(h.clone())
        .input(alpha)
        .input(a)
        .input(b)
        .attr("transpose_a", ta)
        .attr("transpose_b", tb)
        .run()
        .map(|_| ())
}

/// The unfused update: `MatMul`, then `ResourceApplyGradientDescent`.
fn unfused(c: &EagerContext, h: &Tensor, alpha: Tensor, a: Tensor, b: Tensor, ta: bool, tb: bool) {
    let delta = c
        .op("MatMul")
        .input(a)
        .input(b)
        .attr("transpose_a", ta)
        .attr("transpose_b", tb)
        .run1()
        .unwrap();
    c.op("ResourceApplyGradientDescent")
        .input(h.clone())
        .input(alpha)
        .input(delta)
        .run()
        .unwrap();
}

/// Values with full mantissas, so that any change in rounding shows.
fn values<T: From<f32>>(n: usize, seed: usize) -> Vec<T> {
    (0..n)
        .map(|i| T::from(((i * 7919 + seed * 104_729) % 2003) as f32 / 97.3 - 10.1))
        .collect()
}

/// Both updates from the same start, for `[m, k] x [k, n]` stored as the
/// transposes say; with `hold`, a read of each variable is kept alive
/// during the update (copy-on-write) and must not change.
fn compare<T: Element + From<f32> + PartialEq + std::fmt::Debug>(
    c: &EagerContext,
    (m, k, n): (usize, usize, usize),
    ta: bool,
    tb: bool,
    hold: bool,
) {
    let dt = T::DTYPE;
    let a_dims = if ta { [k, m] } else { [m, k] }.map(|d| d as i64);
    let b_dims = if tb { [n, k] } else { [k, n] }.map(|d| d as i64);
    let a = t(&a_dims, values::<T>(m * k, 1));
    let b = t(&b_dims, values::<T>(k * n, 2));
    let start = t(&[m as i64, n as i64], values::<T>(m * n, 3));
    let alpha = Tensor::scalar(T::from(0.0173));
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let h1 = handle(c, &format!("unfused{i}"), dt);
    let h2 = handle(c, &format!("fused{i}"), dt);
    assign(c, &h1, start.deep_copy().unwrap());
    assign(c, &h2, start.deep_copy().unwrap());
    let held = hold.then(|| read(c, &h2, dt));
    for _ in 0..2 {
        unfused(c, &h1, alpha.clone(), a.clone(), b.clone(), ta, tb);
        fused(c, &h2, alpha.clone(), a.clone(), b.clone(), ta, tb).unwrap();
    }
    let (want, got) = (read(c, &h1, dt), read(c, &h2, dt));
    assert_eq!(got.dims(), want.dims());
    let (want, got) = (want.flat::<T>().unwrap(), got.flat::<T>().unwrap());
    let differ = want.iter().zip(got).filter(|(w, g)| w != g).count();
    assert_eq!(
        differ, 0,
        "{m}x{k}x{n} ta={ta} tb={tb} hold={hold}: {differ} elements differ"
    );
    if k > 0 {
        assert_ne!(
            want,
            start.flat::<T>().unwrap(),
            "the update changed nothing"
        );
    }
    if let Some(held) = held {
        assert_eq!(held.flat::<T>().unwrap(), start.flat::<T>().unwrap());
    }
}

#[test]
fn fused_update_is_bit_identical_to_matmul_then_update() {
    let c = EagerContext::new(2).unwrap();
    // One block; split into blocks over the pool (m * n * k above twice
    // the block size, both sides at least 32); an empty inner dimension.
    let shapes = [(3, 4, 5), (96, 200, 160), (200, 80, 64), (6, 0, 5)];
    for shape in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            compare::<f32>(&c, shape, ta, tb, false);
        }
        compare::<f64>(&c, shape, true, false, false);
        // Copy-on-write: a read holds the variable's buffer.
        compare::<f32>(&c, shape, true, false, true);
    }
    // A single-threaded pool takes the unsplit path.
    compare::<f32>(
        &EagerContext::new(1).unwrap(),
        (96, 200, 160),
        false,
        true,
        false,
    );
}

#[test]
fn fused_update_errors_are_those_of_the_two_ops() {
    let c = EagerContext::new(2).unwrap();
    let h = handle(&c, "e", DataType::Float);
    let m = |dims: &[i64]| t(dims, vec![1.0f32; dims.iter().product::<i64>() as usize]);
    let alpha = || Tensor::scalar(0.5f32);
    // Never assigned (ResourceApplyGradientDescent says the same).
    let e = fused(&c, &h, alpha(), m(&[2, 3]), m(&[3, 4]), false, false).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assign(&c, &h, m(&[2, 4]));
    // The product's shape is not the variable's.
    let e = fused(&c, &h, alpha(), m(&[2, 3]), m(&[3, 5]), false, false).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("var and delta do not have the same shape[2,4] [2,5]"),
        "{e}"
    );
    // MatMul's errors.
    let e = fused(&c, &h, alpha(), m(&[2, 3]), m(&[2, 4]), false, false).unwrap_err();
    assert!(
        e.message()
            .starts_with("Matrix size-incompatible: In[0]: [2,3], In[1]: [2,4]"),
        "{e}"
    );
    let e = fused(&c, &h, alpha(), m(&[6]), m(&[3, 4]), false, false).unwrap_err();
    assert!(
        e.message()
            .starts_with("In[0] and In[1] has different ndims: [6] vs. [3,4]"),
        "{e}"
    );
    // alpha must be a scalar.
    let e = fused(&c, &h, m(&[1]), m(&[2, 3]), m(&[3, 4]), false, false).unwrap_err();
    assert!(e.message().starts_with("alpha is not a scalar: [1]"), "{e}");
    // The variable's dtype.
    let e = fused(
        &c,
        &h,
        Tensor::scalar(0.5f64),
        t(&[2, 3], vec![1.0f64; 6]),
        t(&[3, 4], vec![1.0f64; 12]),
        false,
        false,
    )
    .unwrap_err();
    assert!(
        e.message()
            .starts_with("Trying to assign variable with wrong dtype. Expected float got double"),
        "{e}"
    );
    // Nothing failed half-way: the value is the assigned one.
    assert_eq!(
        read(&c, &h, DataType::Float).flat::<f32>().unwrap(),
        &[1.0; 8]
    );
    // Float types only (MatMul and the update take integers too; graph
    // rewrites leave those alone).
    let hi = handle(&c, "ei", DataType::Int32);
    assign(&c, &hi, t(&[1, 1], vec![1i32]));
    let one = || t(&[1, 1], vec![1i32]);
    let e = fused(&c, &hi, Tensor::scalar(1i32), one(), one(), false, false).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message()
            .contains("not in the list of allowed values: float, double"),
        "{e}"
    );
}

#[test]
fn shape_function() {
    use opforge_testing::shape::ShapeTestOp;
    let op = ShapeTestOp::new(NAME)
        .attr("T", DataType::Float)
        .attr("transpose_a", false)
        .attr("transpose_b", false);
    infer_ok!(op, "[];[];[2,3];[3,4]", "");
    infer_ok!(op, "?;?;?;?", "");
    infer_ok!(op, "[];[];[2,?];[3,4]", "");
    infer_error!(
        op,
        "[];[1];[2,3];[3,4]",
        "Shape must be rank 0 but is rank 1"
    );
    infer_error!(
        op,
        "[];[];[2,3,1];[3,4]",
        "Shape must be rank 2 but is rank 3"
    );
    infer_error!(
        op,
        "[];[];[2,3];[2,4]",
        "Dimensions must be equal, but are 3 and 2"
    );
    let op = op.attr("transpose_a", true).attr("transpose_b", true);
    infer_ok!(op, "[];[];[3,2];[4,3]", "");
    infer_error!(
        op,
        "[];[];[2,3];[4,3]",
        "Dimensions must be equal, but are 2 and 3"
    );
}

#[test]
fn registered_as_built() {
    let def = resource_apply_gradient_descent_mat_mul()
        .finalize()
        .unwrap();
    assert_eq!(def.name, NAME);
    let r = opforge_core::registry::Registry::global();
    assert!(r.lookup(NAME).is_ok());
    assert!(matches!(
        r.attr::<opforge_core::autodiff::Gradient>(NAME).as_deref(),
        Some(opforge_core::autodiff::GradientFn::NotDifferentiable)
    ));
}
