//! # opforge-fuzz
//!
//! The bodies of opforge's fuzz targets, one function per target taking
//! arbitrary bytes. A target returns normally on every input, valid or not
//! (bad input is an error value inside opforge); a panic, an abort or a
//! hang is a finding. The same bodies run in two places:
//!
//! * `fuzz/` (its own workspace, not a member of this one): the cargo-fuzz
//!   crate, one `fuzz_targets/<target>.rs` per target calling the body here,
//!   run with coverage guidance on nightly by `scripts/fuzz [TARGET]
//!   [SECONDS]`;
//! * `tests/smoke.rs` of this crate, on stable, in `cargo test --workspace`
//!   (so in CI on every push): each target gets its seed corpus
//!   ([`seeds`]), the regression inputs under `regressions/<target>/`, and a
//!   fixed number of deterministic mutations of the seeds ([`mutate`]). That
//!   run has no coverage guidance; it catches what the seeds and their near
//!   neighbours reach.
//!
//! Structured targets ([`shape_inference`], [`kernel`]) decode the bytes into
//! a case ([`case`]): an index into the sorted list of registered ops, attrs
//! filled by type from the OpDef, input shapes or tensors (with zero, huge,
//! unknown dims and unknown ranks), so almost every input reaches an op.
//!
//! Every target first calls [`setup`]: the standard ops are linked and the
//! allocation limit is [`ALLOCATION_LIMIT`], so a hostile size is a
//! `ResourceExhausted` error, not an allocation that kills the fuzzer.
#![warn(missing_docs)]

pub mod bytes;
pub mod case;
pub mod mutate;
pub mod seeds;

use case::{KernelCase, ShapeCase};
use opforge_core::compat as core_compat;
use opforge_core::eager::EagerContext;
use opforge_core::graph::Graph;
use opforge_core::op_def::{parse_arg_spec, parse_attr_spec, validate_op_def};
use opforge_core::proto::{self, AttrValue, GraphDef, NodeDef, OpDef, OpList, TensorProto};
use opforge_core::registry::Registry;
use opforge_core::shape_inference::{InferenceContext, ShapeFn};
use opforge_core::tensor::json::{tensor_from_json, tensor_to_json};
use opforge_core::{Code, OpDefBuilder, Tensor};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The allocation limit inside the targets: 16 MiB per tensor.
pub const ALLOCATION_LIMIT: u64 = 16 << 20;

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// Every target, by name (the names of `fuzz/fuzz_targets/*.rs` and of the
/// corpus directories).
pub const TARGETS: &[(&str, Target)] = &[
    ("spec_parser", spec_parser),
    ("text_format", text_format),
    ("graph_def", graph_def),
    ("tensor_proto", tensor_proto),
    ("tensor_json", tensor_json),
    ("shape_inference", shape_inference),
    ("kernel", kernel),
    ("compat", compat),
    ("manifest", manifest),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// What a structured target's input decodes to (for failure reports);
/// `None` for the other targets.
pub fn describe(name: &str, data: &[u8]) -> Option<String> {
    setup();
    match name {
        "shape_inference" => ShapeCase::decode(data, shape_ops(), op_def).map(|c| c.describe()),
        "kernel" => KernelCase::decode(data, kernel_ops(), op_def).map(|c| c.describe()),
        _ => None,
    }
}

/// Links the standard ops and sets the allocation limit (once per process).
pub fn setup() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        opforge::opforge_ops::link();
        opforge_core::tensor::set_max_allocation(ALLOCATION_LIMIT);
    });
}

/// The registered ops with a shape function, sorted (what a
/// [`ShapeCase`]'s op index picks from).
pub fn shape_ops() -> &'static [String] {
    static OPS: OnceLock<Vec<String>> = OnceLock::new();
    OPS.get_or_init(|| {
        setup();
        let mut ops = Registry::global().ops_with_attr::<ShapeFn>();
        ops.sort();
        ops
    })
}

/// The registered ops with a CPU kernel, sorted (what a [`KernelCase`]'s op
/// index picks from).
pub fn kernel_ops() -> &'static [String] {
    static OPS: OnceLock<Vec<String>> = OnceLock::new();
    OPS.get_or_init(|| {
        setup();
        let r = Registry::global();
        let mut ops: Vec<String> = r
            .names()
            .into_iter()
            .filter(|op| r.kernels_for(op).iter().any(|k| k.def.device_type == "CPU"))
            .collect();
        ops.sort();
        ops
    })
}

fn op_def(name: &str) -> Option<OpDef> {
    Registry::global().op_def(name).ok()
}

/// The text of `data` (invalid UTF-8 replaced), so every input reaches the
/// parsers.
fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// A message printed, parsed back and printed again gives the same text
/// (and the binary encoding too).
fn round_trip<M: prost::Message + prost::Name + Default>(m: &M) {
    let printed = proto::to_text(m);
    let back: M = proto::from_text(&printed)
        .unwrap_or_else(|e| panic!("printed text does not parse back: {e}\n{printed}"));
    assert_eq!(proto::to_text(&back), printed, "text round trip changed");
    let binary: M = proto::from_binary(&proto::to_binary(m))
        .unwrap_or_else(|e| panic!("binary encoding does not decode: {e}"));
    assert_eq!(
        proto::to_text(&binary),
        printed,
        "binary round trip changed"
    );
}

/// The spec-string parser and `OpDefBuilder`: line 1 is the op name; each
/// further line is `a SPEC` (attr), `i SPEC` (input), `o SPEC` (output), `c
/// NAME` (control output), `d TEXT` (doc) or `s` (stateful). Each spec also
/// goes through `parse_attr_spec` / `parse_arg_spec`; an OpDef the builder
/// accepts must validate and survive the text and binary round trips.
pub fn spec_parser(data: &[u8]) {
    setup();
    let s = text(data);
    let mut lines = s.split('\n');
    let mut b = OpDefBuilder::new(lines.next().unwrap_or_default());
    for line in lines {
        let (kind, spec) = line.split_at(line.char_indices().nth(1).map_or(line.len(), |(i, _)| i));
        let spec = spec.trim_start_matches(' ');
        b = match kind {
            "a" => {
                let _ = parse_attr_spec(spec);
                b.attr(spec)
            }
            "i" => {
                let _ = parse_arg_spec(spec);
                b.input(spec)
            }
            "o" => {
                let _ = parse_arg_spec(spec);
                b.output(spec)
            }
            "c" => b.control_output(spec),
            "d" => b.doc(spec),
            "s" => b.stateful(),
            _ => b,
        };
    }
    if let Ok(op) = b.finalize() {
        if let Err(e) = validate_op_def(&op) {
            panic!("OpDefBuilder accepted an OpDef that does not validate: {e}");
        }
        round_trip(&op);
        let _ = core_compat::summarize_op_def(&op);
        let _ = opforge_core::signature::python_signature(&op);
    }
}

/// The text-format parser: byte 0 picks OpDef, OpList, GraphDef, NodeDef or
/// AttrValue, the rest is the text. What parses must round-trip (text and
/// binary); an OpDef is validated, a GraphDef imported.
pub fn text_format(data: &[u8]) {
    setup();
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let s = text(rest);
    match kind % 5 {
        0 => {
            if let Ok(op) = proto::from_text::<OpDef>(&s) {
                round_trip(&op);
                let _ = validate_op_def(&op);
            }
        }
        1 => {
            if let Ok(l) = proto::from_text::<OpList>(&s) {
                round_trip(&l);
                l.op.iter().for_each(|op| {
                    let _ = validate_op_def(op);
                });
            }
        }
        2 => {
            if let Ok(g) = proto::from_text::<GraphDef>(&s) {
                round_trip(&g);
                import_graph(&g);
            }
        }
        3 => {
            if let Ok(n) = proto::from_text::<NodeDef>(&s) {
                round_trip(&n);
                let _ = core_compat::summarize_node_def(&n);
                if let Some(op) = op_def(&n.op) {
                    let _ = core_compat::validate_node_def(&n, &op);
                }
            }
        }
        _ => {
            if let Ok(v) = proto::from_text::<AttrValue>(&s) {
                round_trip(&v);
                let _ = opforge_core::op_def::summarize_attr_value(&v);
            }
        }
    }
}

/// Imports a GraphDef into a graph of the global registry (shape inference
/// runs on every node); an imported graph exports and imports again.
fn import_graph(def: &GraphDef) {
    if let Ok(g) = Graph::from_graph_def(def) {
        let again = g.to_graph_def();
        if let Err(e) = Graph::from_graph_def(&again) {
            panic!("an imported graph does not import again after export: {e}");
        }
    }
}

/// Binary `GraphDef` decoding and import.
pub fn graph_def(data: &[u8]) {
    setup();
    if let Ok(g) = proto::from_binary::<GraphDef>(data) {
        import_graph(&g);
    }
}

/// Binary `TensorProto` decoding and `Tensor::from_proto`; a tensor it
/// makes converts back (both proto forms) to the same tensor.
pub fn tensor_proto(data: &[u8]) {
    setup();
    let Ok(p) = proto::from_binary::<TensorProto>(data) else {
        return;
    };
    let Ok(t) = Tensor::from_proto(&p) else {
        return;
    };
    let _ = t.summarize(16);
    for back in [t.to_proto(), t.to_proto_field()] {
        match back.and_then(|p| Tensor::from_proto(&p)) {
            Ok(u) => assert!(
                same_tensor(&t, &u),
                "TensorProto round trip changed the tensor"
            ),
            // A tensor may be too large to write within the limit; nothing else.
            Err(e) => assert_eq!(e.code(), Code::ResourceExhausted, "{e}"),
        }
    }
}

/// Same dtype, shape and bytes (strings compared as strings).
fn same_tensor(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.dims() == b.dims()
        && match (a.bytes(), b.bytes()) {
            (Ok(x), Ok(y)) => x == y,
            _ => match (a.strings(), b.strings()) {
                (Ok(x), Ok(y)) => x == y,
                _ => a.resource_handles().ok() == b.resource_handles().ok(),
            },
        }
}

/// The JSON tensor format: a tensor read from JSON writes back to JSON that
/// reads as the same tensor.
pub fn tensor_json(data: &[u8]) {
    setup();
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(t) = tensor_from_json(&v) else {
        return;
    };
    let j = tensor_to_json(&t).expect("a tensor read from JSON writes as JSON");
    let u = tensor_from_json(&j)
        .unwrap_or_else(|e| panic!("written tensor JSON does not read back: {e}\n{j}"));
    assert!(
        same_tensor(&t, &u),
        "JSON round trip changed the tensor: {j}"
    );
}

/// Shape inference: a [`ShapeCase`] (any op with a shape function, any
/// attrs, partial input shapes, constant inputs) through the op's shape
/// function.
pub fn shape_inference(data: &[u8]) {
    setup();
    let Some(case) = ShapeCase::decode(data, shape_ops(), op_def) else {
        return;
    };
    let _ = run_shape_case(&case);
}

/// Runs a shape case's shape function (the result, `Ok` or a clean error).
pub fn run_shape_case(case: &ShapeCase) -> opforge_core::Result<InferenceContext> {
    let mut ctx = InferenceContext::new(
        &case.op,
        "fuzz",
        &case.attrs,
        &case.shapes,
        case.num_outputs,
    );
    for (i, t) in &case.tensors {
        ctx.set_input_tensor(*i, t.clone());
    }
    let shape_fn = Registry::global()
        .attr::<ShapeFn>(&case.op.name)
        .expect("the op has a shape function");
    let result = shape_fn(&mut ctx);
    ctx.check_accesses().and(result)?;
    Ok(ctx)
}

/// Kernels: a [`KernelCase`] (any op with a CPU kernel, any given attrs,
/// tensors of any dtype with zero, huge and ordinary dims and interesting
/// values) run eagerly. An error is fine; a kernel panic (which the runtime
/// turns into an `Internal` error saying it panicked) is a finding.
pub fn kernel(data: &[u8]) {
    setup();
    let Some(case) = KernelCase::decode(data, kernel_ops(), op_def) else {
        return;
    };
    if let Err(e) = run_kernel_case(&case) {
        if e.code() == Code::Internal && e.message().contains("panicked") {
            panic!("{e}");
        }
    }
}

/// Runs a kernel case in a fresh eager context (so no cached kernel or
/// resource outlives the case) on a shared one-thread CPU device.
pub fn run_kernel_case(case: &KernelCase) -> opforge_core::Result<Vec<Tensor>> {
    static DEVICE: OnceLock<Arc<dyn opforge_core::device::Device>> = OnceLock::new();
    let device = DEVICE
        .get_or_init(|| Arc::new(opforge_core::device::CpuDevice::new(1).expect("a CPU device")));
    let ctx = EagerContext::with_device(device.clone());
    ctx.execute_args(&case.op.name, case.args.clone(), &case.attrs)
}

/// `compat` checks of two OpDefs (text format, separated by a NUL byte),
/// optionally with a NodeDef written for the old one (text, after a second
/// NUL): every rule check, the history check, the summaries, and the NodeDef
/// checks. An OpDef is compatible with itself.
pub fn compat(data: &[u8]) {
    setup();
    let mut parts = data.split(|&b| b == 0);
    let old = parts.next().map(text).unwrap_or_default();
    let new = parts.next().map(text).unwrap_or_default();
    let (Ok(old), Ok(new)) = (
        proto::from_text::<OpDef>(&old),
        proto::from_text::<OpDef>(&new),
    ) else {
        return;
    };
    let _ = core_compat::check(&old, &new);
    let _ = core_compat::op_def_compatible(&old, &new);
    let _ = core_compat::attr_defaults_unchanged(&old, &new);
    let _ = core_compat::added_defaults_unchanged(&old, &old, &new);
    let _ = core_compat::check_history(std::slice::from_ref(&old), &new);
    let _ = core_compat::summarize_op_def(&new);
    if validate_op_def(&old).is_ok() {
        if let Err(e) = core_compat::check(&old, &old) {
            panic!("a valid OpDef is incompatible with itself: {e:?}");
        }
    }
    if let Some(node) = parts.next().map(text) {
        if let Ok(node) = proto::from_text::<NodeDef>(&node) {
            let _ = core_compat::validate_node_def(&node, &old);
            let _ = core_compat::check_node_def(&node, &old, &new);
            let _ = core_compat::node_in_out_types(&node, &new);
        }
    }
}

/// The op-library manifest reader over arbitrary bytes (and mutated real
/// libraries: the seed is a compiled C example library).
pub fn manifest(data: &[u8]) {
    setup();
    let path = Path::new("fuzz.so");
    if let Ok(m) = opforge_loader::manifest::parse(path, data) {
        let _ = m.to_json();
    }
    let _ = opforge_loader::manifest::parse_unsealed(path, data);
}

/// The regression inputs of target `name`: every file of
/// `crates/opforge-fuzz/regressions/<name>/` (inputs that once made the
/// target fail), with their file names.
pub fn regressions(name: &str) -> Vec<(String, Vec<u8>)> {
    let dir = seeds::repo()
        .join("crates/opforge-fuzz/regressions")
        .join(name);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).ok()?,
                ))
            })
            .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}
