//! The standard op library against TensorFlow 2.21: every op that TensorFlow
//! also has is registered with exactly TensorFlow's OpDef (docs aside), and
//! every op of the standard library has a CPU kernel.

use opforge::proto::{self, OpDef, OpList};
use opforge::Registry;
use std::collections::HashMap;

fn tf_opdefs() -> HashMap<String, OpDef> {
    let path = format!(
        "{}/tests/corpus/all_opdefs.pbtxt",
        env!("CARGO_MANIFEST_DIR")
    );
    let list: OpList = proto::from_text(&std::fs::read_to_string(path).unwrap()).unwrap();
    list.op.into_iter().map(|o| (o.name.clone(), o)).collect()
}

fn strip_docs(mut op: OpDef) -> OpDef {
    op.summary.clear();
    op.description.clear();
    for a in op.input_arg.iter_mut().chain(op.output_arg.iter_mut()) {
        a.description.clear();
    }
    for a in &mut op.attr {
        a.description.clear();
    }
    op
}

#[test]
fn registered_ops_that_tensorflow_has_match_its_opdefs_exactly() {
    opforge::opforge_ops::link();
    let tf = tf_opdefs();
    let registry = Registry::global();
    registry.verify().unwrap();
    let mut diffs = Vec::new();
    for name in registry.names() {
        let Some(want) = tf.get(&name) else { continue };
        let got = strip_docs(registry.op_def(&name).unwrap());
        if got != *want {
            diffs.push(format!(
                "{name}:\n--- opforge\n{}--- TensorFlow 2.21\n{}",
                proto::to_text(&got),
                proto::to_text(want)
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} ops differ from TensorFlow:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The standard library's ops are exactly those of its committed op
/// history (`ops_history/`): an op added without being recorded (`opforge
/// compat update`), or recorded and no longer registered, fails here, as
/// TensorFlow's ops-history test fails. Each has a CPU kernel unless it
/// declares why not. (No hand-kept list of the ops: the history is the one
/// record, and `opforge compat check` keeps each op compatible with it.)
#[test]
fn the_registered_ops_are_the_recorded_ones_each_with_a_cpu_kernel() {
    opforge::opforge_ops::link();
    let registry = Registry::global();
    registry.verify().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ops_history");
    let history = opforge::compat::read_history(&dir).unwrap();
    let recorded: Vec<&String> = history.keys().collect();
    let registered = registry.names();
    let unrecorded: Vec<&String> = registered
        .iter()
        .filter(|op| !history.contains_key(*op))
        .collect();
    let unregistered: Vec<&&String> = recorded
        .iter()
        .filter(|op| registry.lookup(op).is_err())
        .collect();
    assert!(
        unrecorded.is_empty() && unregistered.is_empty(),
        "registered but not in {dir}: {unrecorded:?} (run `opforge compat update` and commit \
         the new files); in {dir} but not registered: {unregistered:?}",
        dir = dir.display()
    );
    let without_kernel: Vec<&String> = registered
        .iter()
        .filter(|op| {
            registry
                .attr::<opforge::op_def::WithoutKernel>(op)
                .is_none()
                && !registry
                    .kernels_for(op)
                    .iter()
                    .any(|k| k.def.device_type == "CPU")
        })
        .collect();
    assert!(
        without_kernel.is_empty(),
        "standard ops without a CPU kernel or a reason for having none: {without_kernel:?}"
    );
}

/// The standard ops that have no CPU kernel, each with why. Every other
/// registered standard op must have one (issue 16: an op that passes graph
/// construction and fails only at run time with NOT_FOUND is a bug unless
/// it is listed here and says so in `ops show` / `ops list`).
const WITHOUT_CPU_KERNEL: &[(&str, &str)] = &[(
    "RefIdentity",
    "ref tensors (TensorFlow 1's reference variables) do not exist in opforge",
)];

#[test]
fn the_standard_ops_without_a_cpu_kernel_are_the_documented_ones() {
    opforge::opforge_ops::link();
    let registry = Registry::global();
    let without: Vec<String> = registry
        .names()
        .into_iter()
        .filter(|op| {
            !registry
                .kernels_for(op)
                .iter()
                .any(|k| k.def.device_type == "CPU")
        })
        .collect();
    let documented: Vec<&str> = WITHOUT_CPU_KERNEL.iter().map(|(op, _)| *op).collect();
    assert_eq!(without, documented, "standard ops without a CPU kernel");
    for (op, _) in WITHOUT_CPU_KERNEL {
        let why = registry
            .attr::<opforge::op_def::WithoutKernel>(op)
            .unwrap_or_else(|| panic!("{op} must declare why it has no kernel (without_kernel)"));
        assert!(!why.is_empty());
    }
    // And no op declares `without_kernel` while having a kernel.
    for op in registry.names() {
        if registry
            .attr::<opforge::op_def::WithoutKernel>(&op)
            .is_some()
        {
            assert!(
                registry.kernels_for(&op).is_empty(),
                "{op} has a kernel after all"
            );
        }
    }
}
