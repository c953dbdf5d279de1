//! Graph round trips (build -> GraphDef -> import -> run) give eager's
//! results for every standard op, on the CPU and on the fake device (every
//! value through the device interface): the runner and the case table live
//! in `opforge_testing::roundtrip`. The stateful variable ops and
//! `Placeholder` itself have dedicated tests here.
//! `every_op_with_a_cpu_kernel_has_a_case` fails when an op has a CPU kernel
//! but no case: add one to `opforge_testing::roundtrip::cases` when adding
//! an op. (Ops with only an OpDef cannot run and need none.)

use opforge::attrs::IntoAttrValue;
use opforge::graph::{Graph, NodeSpec, Output, SessionOptions};
use opforge::{Code, DataType, Registry, Tensor};
use opforge_testing::roundtrip::values::*;
use opforge_testing::roundtrip::{
    cases, check_all, every_trip, run_named, same_bits, Target, COVERED_ELSEWHERE,
};
use std::collections::BTreeSet;

fn run_all(target: &Target) {
    let failures = check_all(target);
    assert!(
        failures.is_empty(),
        "{} of {} cases differ between graph round trips and eager execution on {}:\n{}",
        failures.len(),
        cases().len(),
        target.device_name(),
        failures.join("\n")
    );
}

#[test]
fn graph_round_trips_match_eager_for_every_case_on_the_cpu() {
    opforge::opforge_ops::link();
    run_all(&Target::cpu());
}

#[test]
fn graph_round_trips_match_eager_for_every_case_on_the_fake_device() {
    opforge::opforge_ops::link();
    run_all(&Target::fake());
}

#[test]
fn placeholders_and_variables_on_every_target() {
    opforge::opforge_ops::link();
    for target in [Target::cpu(), Target::fake()] {
        placeholders_fed_and_unfed(&target);
        variables(&target);
    }
}

#[test]
fn comparison_is_bitwise() {
    assert!(same_bits(&s(f32::NAN), &s(f32::NAN)));
    assert!(!same_bits(&s(f32::NAN), &s(-f32::NAN)));
    assert!(!same_bits(&s(0.0f32), &s(-0.0f32)));
    assert!(!same_bits(&s(1.0f32), &s(1.0f64)));
    assert!(!same_bits(&f32s(&[2, 3]), &f32s(&[3, 2])));
    assert!(same_bits(&strs(&[4]), &strs(&[4])));
    assert!(!same_bits(&strs(&[2]), &str_list(&[2], &["a", "x"])));
    assert!(!same_bits(
        &handles(&[1]),
        &Tensor::zeros(DataType::Resource, &[1]).unwrap()
    ));
}

#[test]
fn every_op_with_a_cpu_kernel_has_a_case() {
    opforge::opforge_ops::link();
    let kernels = Registry::global();
    let covered: BTreeSet<&str> = cases()
        .iter()
        .map(|c| c.op)
        .chain(COVERED_ELSEWHERE.iter().map(|(op, _)| *op))
        .collect();
    let with_kernel: Vec<String> = Registry::global()
        .names()
        .into_iter()
        .filter(|op| {
            kernels
                .kernels_for(op)
                .iter()
                .any(|k| k.def.device_type == "CPU")
        })
        .collect();
    assert!(
        with_kernel.iter().any(|op| op == "MatMul"),
        "the standard op library is not linked: {with_kernel:?}"
    );
    let missing: Vec<&String> = with_kernel
        .iter()
        .filter(|op| !covered.contains(op.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "ops with a CPU kernel but no graph round-trip case (add one to opforge_testing::roundtrip::cases): {missing:?}"
    );
    let stale: Vec<&&str> = covered
        .iter()
        .filter(|op| !with_kernel.iter().any(|k| k == *op))
        .collect();
    assert!(
        stale.is_empty(),
        "cases for ops without a CPU kernel: {stale:?}"
    );
}

// ---- Ops with dedicated tests ---------------------------------------------

fn placeholders_fed_and_unfed(target: &Target) {
    let ctx = target.ctx();
    let value = f32s(&[2]);
    let placeholder = |name| {
        NodeSpec::new("Placeholder", name)
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[2]))
    };
    let eager_err = ctx
        .op("Placeholder")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[2]))
        .run1()
        .unwrap_err();
    let mut g = Graph::new();
    g.add(placeholder("Placeholder")).unwrap();
    for (trip, g) in every_trip(g) {
        let sess = target.session(g, SessionOptions::default()).unwrap();
        // Unfed: the error eager execution (which cannot feed it) gives.
        let e = run_named(&sess, trip, &[], &["Placeholder:0"], &[]).unwrap_err();
        assert_eq!(
            (e.code(), eager_err.code()),
            (Code::InvalidArgument, Code::InvalidArgument)
        );
        let p = trip.prefix();
        let want = format!("You must feed a value for placeholder tensor '{p}Placeholder' with dtype float and shape [2]");
        assert!(e.message().starts_with(&want), "{trip:?}: {e}");
        assert!(
            eager_err.message().starts_with(&want.replace(p, "")),
            "{eager_err}"
        );
        // Fed: the fed value, bit for bit.
        let feed = [("Placeholder:0".to_string(), value.clone())];
        let out = run_named(&sess, trip, &feed, &["Placeholder:0"], &[]).unwrap();
        assert!(same_bits(&out[0], &value), "{trip:?}: {out:?}");
    }
}

/// The updates of `variable_sequence`, in order.
const UPDATES: [&str; 3] = [
    "AssignVariableOp",
    "AssignAddVariableOp",
    "AssignSubVariableOp",
];

const FUSED: &str = "_ResourceApplyGradientDescentMatMul";

/// Creates a variable, assigns, assign-adds and assign-subs `values`,
/// applies a gradient-descent step (alpha 2, delta `values[1]`; for a float
/// matrix also the fused one, delta `values[1] x values[2]^T`), reads it,
/// destroys it and reads it again, eagerly and in a graph (ordered by
/// control edges, with the values in `Const`s or fed `Placeholder`s).
fn variable_sequence(target: &Target, values: [Tensor; 3], fed: bool) {
    let ctx = target.ctx();
    let dtype = values[0].dtype();
    let handle_attrs = [
        ("shared_name", "v".into_attr_value()),
        ("dtype", dtype.into_attr_value()),
        ("shape", shape(values[0].dims()).into_attr_value()),
    ];
    // Eagerly.
    let h = handle_attrs
        .iter()
        .fold(ctx.op("VarHandleOp"), |o, (k, v)| o.attr(k, v.clone()))
        .run1()
        .unwrap();
    for (update, v) in UPDATES.into_iter().zip(&values) {
        ctx.op(update)
            .input(h.clone())
            .input(v.clone())
            .run()
            .unwrap();
    }
    let alpha = ctx
        .op("Cast")
        .input(Tensor::scalar(2i32))
        .attr("DstT", dtype)
        .run1()
        .unwrap();
    ctx.op("ResourceApplyGradientDescent")
        .input(h.clone())
        .input(alpha.clone())
        .input(values[1].clone())
        .run()
        .unwrap();
    // A float matrix variable also takes the fused update whose gradient
    // is a matrix product (graph rewrites make it): values[1] x values[2]^T.
    let fused = matches!(dtype, DataType::Float | DataType::Double) && values[0].rank() == 2;
    if fused {
        ctx.op(FUSED)
            .input(h.clone())
            .input(alpha.clone())
            .input(values[1].clone())
            .input(values[2].clone())
            .attr("transpose_b", true)
            .run()
            .unwrap();
    }
    let read = || {
        ctx.op("ReadVariableOp")
            .input(h.clone())
            .attr("dtype", dtype)
            .run1()
    };
    let value = target.to_host(&read().unwrap()).unwrap();
    ctx.op("DestroyResourceOp").input(h.clone()).run().unwrap();
    let gone = read().unwrap_err();
    // As a graph.
    let mut g = Graph::new();
    let spec = handle_attrs
        .iter()
        .fold(NodeSpec::new("VarHandleOp", "h"), |n, (k, v)| {
            n.attr(k, v.clone())
        });
    let hid = g.add(spec).unwrap();
    let mut feeds = Vec::new();
    let mut prev = Vec::new();
    for (i, (update, v)) in UPDATES.into_iter().zip(&values).enumerate() {
        let name = format!("value{i}");
        let src = if fed {
            feeds.push((format!("{name}:0"), v.clone()));
            NodeSpec::new("Placeholder", &name).attr("dtype", dtype)
        } else {
            NodeSpec::new("Const", &name)
                .attr("value", v)
                .attr("dtype", dtype)
        };
        let vid = g.add(src).unwrap();
        let mut spec = NodeSpec::new(update, update).input(hid).input(vid);
        spec.control_inputs = prev;
        prev = vec![g.add(spec).unwrap()];
    }
    let aid = g
        .add(
            NodeSpec::new("Const", "alpha")
                .attr("value", &target.to_host(&alpha).unwrap())
                .attr("dtype", dtype),
        )
        .unwrap();
    let mut spec = NodeSpec::new("ResourceApplyGradientDescent", "sgd")
        .input(hid)
        .input(aid)
        .input(Output::new(g.find("value1").unwrap(), 0));
    spec.control_inputs = prev;
    prev = vec![g.add(spec).unwrap()];
    if fused {
        let mut spec = NodeSpec::new(FUSED, "fused_sgd")
            .input(hid)
            .input(aid)
            .input(Output::new(g.find("value1").unwrap(), 0))
            .input(Output::new(g.find("value2").unwrap(), 0))
            .attr("transpose_b", true);
        spec.control_inputs = prev;
        prev = vec![g.add(spec).unwrap()];
    }
    for (op, name) in [
        ("ReadVariableOp", "read"),
        ("DestroyResourceOp", "destroy"),
        ("ReadVariableOp", "read_gone"),
    ] {
        let mut spec = NodeSpec::new(op, name).input(hid);
        if op == "ReadVariableOp" {
            spec = spec.attr("dtype", dtype);
        }
        spec.control_inputs = prev;
        prev = vec![g.add(spec).unwrap()];
    }
    for (trip, g) in every_trip(g) {
        let sess = target.session(g, SessionOptions::default()).unwrap();
        // Twice: the second run's assign re-creates the destroyed variable.
        for _ in 0..2 {
            let out = run_named(&sess, trip, &feeds, &["h:0", "read:0"], &["destroy"]).unwrap();
            let handles = (out[0].resource_handles(), h.resource_handles());
            assert!(same_bits(&out[0], &h), "{trip:?}: handle {handles:?}");
            assert!(
                same_bits(&out[1], &value),
                "{trip:?}: read {:?}, eager {value:?}",
                out[1]
            );
        }
        let e = run_named(&sess, trip, &feeds, &["read_gone:0"], &[]).unwrap_err();
        assert_eq!(e.code(), gone.code(), "{trip:?}: {e}, eager {gone}");
    }
}

fn variables(target: &Target) {
    variable_sequence(
        target,
        [fin32(&[2, 2]), f32s(&[2, 2]), f32b(&[2, 2])],
        false,
    );
    variable_sequence(target, [fin64(&[3]), f64s(&[3]), f64b(&[3])], true);
    variable_sequence(
        target,
        [i32s(&[4]), i32nz(&[4]), t(&[4], &[7i32; 4])],
        false,
    );
    variable_sequence(target, [s(i64::MAX), s(1i64), s(-5i64)], true);
    variable_sequence(target, [c64s(&[2]), c64s(&[2]), c64s(&[2])], false);
}
