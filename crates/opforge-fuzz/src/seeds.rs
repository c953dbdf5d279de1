//! Seed corpora, built from the repository's test data: the TensorFlow
//! conformance corpus (`tests/corpus/`), the op histories (`ops_history/`,
//! `examples/zero_out/ops_history/`), the CLI's hostile inputs
//! (`crates/opforge-cli/tests/data/`), the graph round-trip case table of
//! `opforge-testing` (a call of every op with a kernel, with real inputs and
//! attrs), and a compiled C op library (`data/zero_out_c.so`, built from
//! `examples/c_zero_out/zero_out.c`). The smoke test runs them directly;
//! `opforge-fuzz-seeds` writes them to `fuzz/corpus/<target>/` for
//! cargo-fuzz.

use crate::case::{KernelCase, ShapeCase};
use crate::{kernel_ops, setup, shape_ops};
use opforge_core::attrs::AttrMap;
use opforge_core::eager::Arg;
use opforge_core::graph::{Graph, NodeSpec, Output};
use opforge_core::proto::{self, GraphDef, NodeDef, OpDef, OpList};
use opforge_core::registry::Registry;
use opforge_core::tensor::json::{tensor_from_json, tensor_to_json};
use opforge_core::Tensor;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The repository root (this crate is `crates/opforge-fuzz`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn jsonl(rel: &str) -> Vec<Value> {
    read(rel)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

/// The seed inputs of target `name` (empty for an unknown target).
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    setup();
    match name {
        "spec_parser" => spec_seeds(),
        "text_format" => text_seeds(),
        "graph_def" => graph_defs().iter().map(proto::to_binary).collect(),
        "tensor_proto" => tensors()
            .iter()
            .flat_map(|t| [t.to_proto(), t.to_proto_field()])
            .filter_map(Result::ok)
            .map(|p| proto::to_binary(&p))
            .collect(),
        "tensor_json" => tensors()
            .iter()
            .filter_map(|t| tensor_to_json(t).ok())
            .chain(
                jsonl("crates/opforge-cli/tests/data/allocation_bombs.jsonl")
                    .into_iter()
                    .flat_map(|l| l["inputs"].as_array().cloned().unwrap_or_default()),
            )
            .map(|j| j.to_string().into_bytes())
            .collect(),
        "shape_inference" => shape_seeds(),
        "kernel" => kernel_cases()
            .iter()
            .filter_map(|c| c.encode(kernel_ops()))
            .collect(),
        "compat" => compat_seeds(),
        "manifest" => {
            let so = repo().join("crates/opforge-fuzz/data/zero_out_c.so");
            vec![std::fs::read(&so).unwrap_or_else(|e| panic!("{}: {e}", so.display()))]
        }
        _ => Vec::new(),
    }
}

/// Builder calls (`[["Input", "x: T"], ["Attr", "T: type"], ...]`) as
/// spec_parser lines.
fn calls_to_lines(op: &str, calls: &Value) -> Vec<u8> {
    let mut s = op.to_string();
    for call in calls.as_array().into_iter().flatten() {
        let kind = call[0].as_str().unwrap_or_default();
        let arg = call[1].as_str().unwrap_or_default();
        let prefix = match kind {
            "Input" => "i",
            "Output" => "o",
            "Attr" => "a",
            "ControlOutput" => "c",
            "Doc" => "d",
            "SetIsStateful" => "s",
            _ => continue,
        };
        s.push('\n');
        s.push_str(prefix);
        s.push(' ');
        s.push_str(arg);
    }
    s.into_bytes()
}

fn spec_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for l in jsonl("tests/corpus/op_specs.jsonl") {
        out.push(calls_to_lines(
            l["op"].as_str().unwrap_or_default(),
            &l["calls"],
        ));
    }
    for l in jsonl("tests/corpus/op_compatibility_cases.jsonl") {
        let op = l["op"].as_str().unwrap_or_default();
        out.push(calls_to_lines(op, &l["old"]));
        out.push(calls_to_lines(op, &l["new"]));
    }
    for l in jsonl("tests/corpus/op_history.jsonl") {
        let op = l["op"].as_str().unwrap_or_default();
        for v in l["version_specs"].as_array().into_iter().flatten() {
            out.push(calls_to_lines(op, v));
        }
    }
    out
}

/// Every OpDef of TensorFlow 2.21 (`all_opdefs.pbtxt`).
fn all_opdefs() -> Vec<OpDef> {
    proto::from_text::<OpList>(&read("tests/corpus/all_opdefs.pbtxt"))
        .expect("all_opdefs.pbtxt parses")
        .op
}

fn text_seeds() -> Vec<Vec<u8>> {
    let with_kind = |kind: u8, text: String| {
        let mut v = vec![kind];
        v.extend_from_slice(text.as_bytes());
        v
    };
    let ops = all_opdefs();
    let mut out: Vec<Vec<u8>> = ops
        .iter()
        .map(|op| with_kind(0, proto::to_text(op)))
        .collect();
    for chunk in ops.chunks(200) {
        let list = OpList {
            op: chunk[..3.min(chunk.len())].to_vec(),
        };
        out.push(with_kind(1, proto::to_text(&list)));
    }
    for g in graph_defs().iter().take(200) {
        out.push(with_kind(2, proto::to_text(g)));
    }
    for n in node_defs() {
        out.push(with_kind(3, proto::to_text(&n)));
    }
    for op in &ops {
        for a in &op.attr {
            if let Some(v) = &a.default_value {
                out.push(with_kind(4, proto::to_text(v)));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn node_defs() -> Vec<NodeDef> {
    jsonl("tests/corpus/op_compatibility_cases.jsonl")
        .iter()
        .filter_map(|l| proto::from_json::<NodeDef>(&l["node_def"]).ok())
        .collect()
}

/// The graph round-trip case table as kernel cases.
pub fn kernel_cases() -> Vec<KernelCase> {
    let registry = Registry::global();
    let mut out: Vec<KernelCase> = opforge_testing::roundtrip::cases()
        .into_iter()
        .filter_map(|c| {
            Some(KernelCase {
                op: registry.op_def(c.op).ok()?,
                attrs: c.attrs,
                args: c.args,
            })
        })
        .collect();
    // The CLI's allocation bombs: huge attrs and shapes with no elements.
    for l in jsonl("crates/opforge-cli/tests/data/allocation_bombs.jsonl") {
        let Ok(op) = registry.op_def(l["op"].as_str().unwrap_or_default()) else {
            continue;
        };
        let attrs: AttrMap = l
            .get("node_def")
            .and_then(|n| proto::from_json::<NodeDef>(n).ok())
            .map(|n| n.attr.into_iter().collect())
            .unwrap_or_default();
        let Some(inputs) = l["inputs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| tensor_from_json(t).ok())
            .collect::<Option<Vec<Tensor>>>()
        else {
            continue;
        };
        // One tensor per argument where the counts agree (lists of one otherwise).
        if inputs.len() != op.input_arg.len() {
            continue;
        }
        let args = op
            .input_arg
            .iter()
            .zip(inputs)
            .map(|(a, t)| {
                if a.number_attr.is_empty() && a.type_list_attr.is_empty() {
                    Arg::One(t)
                } else {
                    Arg::List(vec![t])
                }
            })
            .collect();
        out.push(KernelCase { op, attrs, args });
    }
    out
}

/// Every input tensor of the kernel cases.
fn tensors() -> Vec<Tensor> {
    let mut out = Vec::new();
    for c in kernel_cases() {
        for a in c.args {
            match a {
                Arg::One(t) => out.push(t),
                Arg::List(l) => out.extend(l),
            }
        }
    }
    out
}

/// A graph per kernel case (`Const` inputs feeding the op), plus the CLI's
/// hostile GraphDefs.
fn graph_defs() -> Vec<GraphDef> {
    let mut out = Vec::new();
    for c in kernel_cases() {
        let mut g = Graph::new();
        let konst = |g: &mut Graph, name: String, t: &Tensor| {
            g.add(
                NodeSpec::new("Const", &name)
                    .attr("value", t)
                    .attr("dtype", t.dtype()),
            )
            .map(Output::from)
        };
        let mut spec = NodeSpec::new(&c.op.name, "op");
        let mut ok = true;
        for (i, arg) in c.args.iter().enumerate() {
            spec = match arg {
                Arg::One(t) => match konst(&mut g, format!("in{i}"), t) {
                    Ok(o) => spec.input(o),
                    Err(_) => {
                        ok = false;
                        break;
                    }
                },
                Arg::List(l) => {
                    let outs: Result<Vec<Output>, _> = l
                        .iter()
                        .enumerate()
                        .map(|(j, t)| konst(&mut g, format!("in{i}_{j}"), t))
                        .collect();
                    match outs {
                        Ok(o) => spec.input_list(o),
                        Err(_) => {
                            ok = false;
                            break;
                        }
                    }
                }
            };
        }
        for (k, v) in &c.attrs {
            spec = spec.attr(k, v.clone());
        }
        if ok && g.add(spec).is_ok() {
            out.push(g.to_graph_def());
        }
    }
    for f in ["huge_const", "huge_shape_fill", "huge_shape_reshape"] {
        let text = read(&format!("crates/opforge-cli/tests/data/{f}.pbtxt"));
        out.push(proto::from_text(&text).expect("the CLI's test graphs parse"));
    }
    out
}

fn shape_seeds() -> Vec<Vec<u8>> {
    let ops = shape_ops();
    let registry = Registry::global();
    let mut out = Vec::new();
    for l in jsonl("tests/corpus/shape_inference_cases.jsonl") {
        let Some(op_name) = l["op"].as_str() else {
            continue;
        };
        let Ok(op) = registry.op_def(op_name) else {
            continue;
        };
        let Ok(node) = opforge_testing::shape::ShapeTestOp::from_corpus_json(
            op_name,
            &l["node_def"],
            &l["input_tensors"],
        ) else {
            continue;
        };
        let Ok(shapes) =
            opforge_testing::shape::parse_shapes(l["ins"].as_str().unwrap_or_default())
        else {
            continue;
        };
        let case = ShapeCase {
            num_outputs: 0,
            op,
            attrs: node.attrs,
            shapes,
            tensors: node.input_tensors,
        };
        out.extend(case.encode(ops));
    }
    // The kernel cases with fully known shapes and every input constant.
    for c in kernel_cases() {
        let mut attrs = c.attrs.clone();
        opforge_core::attrs::add_defaults(&c.op, &mut attrs);
        let flat: Vec<Tensor> = c
            .args
            .iter()
            .flat_map(|a| match a {
                Arg::One(t) => vec![t.clone()],
                Arg::List(l) => l.clone(),
            })
            .collect();
        let case = ShapeCase {
            num_outputs: 0,
            shapes: flat.iter().map(|t| Some(t.dims().to_vec())).collect(),
            tensors: flat.into_iter().enumerate().collect(),
            op: c.op,
            attrs,
        };
        out.extend(case.encode(ops));
    }
    out
}

fn compat_seeds() -> Vec<Vec<u8>> {
    let pair = |old: &OpDef, new: &OpDef, node: Option<&NodeDef>| {
        let mut v = proto::to_text(old).into_bytes();
        v.push(0);
        v.extend_from_slice(proto::to_text(new).as_bytes());
        if let Some(n) = node {
            v.push(0);
            v.extend_from_slice(proto::to_text(n).as_bytes());
        }
        v
    };
    let mut out = Vec::new();
    for l in jsonl("tests/corpus/op_compatibility_cases.jsonl") {
        let (Ok(old), Ok(new)) = (
            proto::from_json::<OpDef>(&l["old_opdef"]),
            proto::from_json::<OpDef>(&l["new_opdef"]),
        ) else {
            continue;
        };
        let node = proto::from_json::<NodeDef>(&l["node_def"]).ok();
        out.push(pair(&old, &new, node.as_ref()));
    }
    for l in jsonl("tests/corpus/op_history.jsonl") {
        let versions: Vec<OpDef> = l["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| proto::from_json(v).ok())
            .collect();
        for w in versions.windows(2) {
            out.push(pair(&w[0], &w[1], None));
        }
    }
    for dir in ["ops_history", "examples/zero_out/ops_history"] {
        let files = opforge_core::compat::history_files(&repo().join(dir)).unwrap_or_default();
        for f in files {
            let Ok((_, versions)) = opforge_core::compat::read_history_file(&f) else {
                continue;
            };
            match versions.as_slice() {
                [one] => out.push(pair(one, one, None)),
                many => many
                    .windows(2)
                    .for_each(|w| out.push(pair(&w[0], &w[1], None))),
            }
        }
    }
    out
}
