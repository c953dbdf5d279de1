//! The story of TensorFlow's guide ("Create an op", backwards
//! compatibility), told with `ZeroOut`'s committed history: four versions,
//! each a compatible change of the one before, and a graph saved with the
//! first version that still loads and runs with the latest.
//!
//! 1. `to_zero: int32 -> zeroed: int32`
//! 2. polymorphic: `T: {float, int32} = DT_INT32`
//! 3. `+ preserve_index: int = 0`
//! 4. `T: realnumbertype = DT_INT32` (the registered op)
//!
//! `ZeroOut` is the `zero_out` example op library's (`examples/zero_out`,
//! whose history is `examples/zero_out/ops_history/`): this test builds it
//! and loads it into the global registry, next to the standard library.

use opforge::compat::{self, check, check_history, check_node_def, validate_node_def};
use opforge::graph::{Graph, Session};
use opforge::proto::{self, GraphDef, NodeDef, OpDef};
use opforge::{DataType, OpDefBuilder, Registry};
use opforge_loader::Loader;
use std::path::Path;
use std::sync::OnceLock;

fn history() -> Vec<OpDef> {
    let path = format!(
        "{}/examples/zero_out/ops_history/ZeroOut.pbtxt",
        env!("CARGO_MANIFEST_DIR")
    );
    compat::read_history_file(Path::new(&path))
        .unwrap_or_else(|e| panic!("{e}"))
        .1
}

/// Links the standard library and loads the `zero_out` example library into
/// the global registry (once; the loader stays for the process).
fn load() {
    static LOADER: OnceLock<Loader> = OnceLock::new();
    LOADER.get_or_init(|| {
        opforge::opforge_ops::link();
        let lib = opforge_testing::examples::build_example(
            "zero_out",
            false,
            Path::new(env!("CARGO_TARGET_TMPDIR")),
        );
        let loader = Loader::new(Registry::global().clone());
        loader.load(&lib).unwrap();
        loader
    });
}

fn registered() -> OpDef {
    load();
    Registry::global().op_def("ZeroOut").unwrap()
}

#[test]
fn every_version_is_a_compatible_change() {
    let versions = history();
    assert_eq!(versions.len(), 4);
    // The versions are the guide's specs.
    let specs: [&[&str]; 4] = [
        &[],
        &["T: {float, int32} = DT_INT32"],
        &["T: {float, int32} = DT_INT32", "preserve_index: int = 0"],
        &["T: realnumbertype = DT_INT32", "preserve_index: int = 0"],
    ];
    for (i, attrs) in specs.iter().enumerate() {
        let ty = if attrs.is_empty() { "int32" } else { "T" };
        let mut b = OpDefBuilder::new("ZeroOut");
        for a in *attrs {
            b = b.attr(*a);
        }
        let op = b
            .input(format!("to_zero: {ty}"))
            .output(format!("zeroed: {ty}"))
            .finalize()
            .unwrap();
        assert_eq!(versions[i], op, "version {}", i + 1);
    }
    // The latest is the registered op, docs aside.
    assert_eq!(versions[3], compat::strip_docs(&registered()));
    for (i, pair) in versions.windows(2).enumerate() {
        assert_eq!(check(&pair[0], &pair[1]), Ok(()), "{} -> {}", i + 1, i + 2);
        assert_eq!(
            compat::attr_defaults_unchanged(&pair[0], &pair[1]),
            Ok(()),
            "{} -> {}",
            i + 1,
            i + 2
        );
        // Against every earlier version too, as `opforge compat check` does.
        let result = check_history(&versions[..=i], &pair[1]);
        assert!(result.changed && result.is_ok(), "{result:?}");
    }
    // Going back is not compatible: version 4 -> 1 drops both attrs.
    let back = check(&versions[3], &versions[0]).unwrap_err();
    assert_eq!(back[0].message, "Attr 'T' removed");
    assert_eq!(back[1].message, "Attr 'preserve_index' removed");
}

/// A GraphDef written with version 1: no attrs on the ZeroOut node.
const V1_NODE: &str = r#"name: "zero_out" op: "ZeroOut" input: "x""#;

#[test]
fn a_version_1_node_validates_against_the_latest_op() {
    let versions = history();
    let node: NodeDef = proto::from_text(V1_NODE).unwrap();
    let latest = registered();
    // As written, it lacks the new attrs...
    let err = validate_node_def(&node, &latest).unwrap_err();
    assert!(
        err.message()
            .starts_with("NodeDef missing attrs 'T', 'preserve_index' from Op<name=ZeroOut;"),
        "{err}"
    );
    // ...which their defaults fill in, keeping its signature.
    let report = check_node_def(&node, &versions[0], &latest);
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        report.summary,
        "{{node zero_out}} = ZeroOut[T=DT_INT32, preserve_index=0](x)"
    );
    for v in &versions[1..] {
        assert!(check_node_def(&node, &versions[0], v).is_ok());
    }
}

#[test]
fn a_version_1_graph_imports_with_the_latest_op() {
    load();
    let def: GraphDef = proto::from_text(&format!(
        r#"node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_INT32 }} }} }}
           node {{ {V1_NODE} }}
           versions {{ producer: 21 }}"#
    ))
    .unwrap();
    let g = Graph::from_graph_def(&def).unwrap();
    let node = g.node(g.find("zero_out").unwrap()).unwrap();
    assert_eq!(
        node.attrs["T"].value,
        Some(proto::attr_value::Value::Type(DataType::Int32 as i32))
    );
    assert_eq!(
        node.attrs["preserve_index"].value,
        Some(proto::attr_value::Value::I(0))
    );
    assert_eq!(node.input_types, [DataType::Int32]);
    assert_eq!(node.output_types, [DataType::Int32]);
    // Exported again, the node carries the defaults and still validates.
    let exported = g.to_graph_def();
    let zero_out = exported.node.iter().find(|n| n.name == "zero_out").unwrap();
    validate_node_def(zero_out, &registered()).unwrap();
}

/// Runs a graph saved with version 1 (a `Const` input and a `ZeroOut` node
/// without attrs) with the latest op.
/// `Const` comes from the standard library, `ZeroOut` and its kernel from
/// the example library.
#[test]
fn a_version_1_graph_runs_with_the_latest_op_and_gives_the_same_result() {
    load();
    let def: GraphDef = proto::from_text(&format!(
        r#"node {{
             name: "x" op: "Const"
             attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
             attr {{ key: "value" value {{ tensor {{
               dtype: DT_INT32
               tensor_shape {{ dim {{ size: 2 }} dim {{ size: 3 }} }}
               int_val: 7 int_val: -2 int_val: 3 int_val: 4 int_val: 5 int_val: 6
             }} }} }}
           }}
           node {{ {V1_NODE} }}"#
    ))
    .unwrap();
    let g = Graph::from_graph_def(&def).unwrap_or_else(|e| panic!("import: {e}"));
    let session = Session::new(g).unwrap();
    let out = session
        .run_by_name(&[], &["zero_out"], &[])
        .unwrap_or_else(|e| panic!("run: {e}"));
    // Version 1's semantics, by hand: every element zeroed except the first.
    assert_eq!(out[0].dtype(), DataType::Int32);
    assert_eq!(out[0].dims(), [2, 3]);
    assert_eq!(out[0].flat::<i32>().unwrap(), [7, 0, 0, 0, 0, 0]);
}
