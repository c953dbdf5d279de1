//! Graph round trips (build -> GraphDef -> import -> run) give eager's
//! results for every standard op, on any device.
//!
//! Each case of [`cases`] (an op, its input tensors and its attrs) runs
//! eagerly on a [`Target`]'s device, then in graphs whose inputs are `Const`
//! nodes, or fed `Placeholder`s of known shape, of known rank only, or of
//! unknown shape ([`Inputs`]). Each graph runs as built, after a binary
//! GraphDef round trip, and after a text-format one written as TensorFlow may
//! write it ([`Trip`]). Every output of the op, fetched directly and through
//! an `Identity` reading it, must equal the eager output bit for bit: dtype,
//! shape and bytes (so NaN == NaN and -0.0 != 0.0). The graph's static output
//! dtypes and inferred shapes must agree with the eager outputs too. Known
//! differences are listed in [`EXPECTED_FAILURES`].
//!
//! [`Target::cpu`] runs on the host; [`Target::fake`] runs eager calls on the
//! [fake device](crate::fake_device) and sessions on it (with the CPU as a
//! second device), so every value crosses the device interface.
//!
//! No op with a CPU kernel is random or otherwise nondeterministic, so every
//! comparison is exact.

mod cases;
pub mod values;

pub use cases::{cases, strided, COVERED_ELSEWHERE, EXPECTED_FAILURES};

use crate::fake_device::{mirror_cpu_kernels, FakeDevice, DEVICE_FAKE};
use opforge_core::attrs::{summarize_attrs, AttrMap, IntoAttrValue};
use opforge_core::device::{CpuDevice, Device};
use opforge_core::eager::{Arg, EagerContext};
use opforge_core::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use opforge_core::proto::{self, attr_value::Value, GraphDef};
use opforge_core::registry::Registry;
use opforge_core::{DataType, Tensor};
use std::sync::Arc;

/// Where cases run: an eager context on a device, and sessions on that
/// device (plus, for an accelerator, the CPU).
pub struct Target {
    ctx: EagerContext,
    devices: Option<Vec<Arc<dyn Device>>>,
}

impl Target {
    /// The host CPU (kernels shard over one thread per core, as a default
    /// session's do, so both modes split work alike).
    pub fn cpu() -> Target {
        Target {
            ctx: EagerContext::new(0).expect("a CPU device"),
            devices: None,
        }
    }

    /// The fake device (see [`crate::fake_device`]), with mirrors of every
    /// CPU kernel of the global registry.
    pub fn fake() -> Target {
        mirror_cpu_kernels(Registry::global(), DEVICE_FAKE).expect("mirrors of the CPU kernels");
        let fake: Arc<dyn Device> = Arc::new(FakeDevice::new(0));
        Target {
            ctx: EagerContext::with_device(fake.clone()),
            devices: Some(vec![fake, CpuDevice::shared()]),
        }
    }

    /// The eager context.
    pub fn ctx(&self) -> &EagerContext {
        &self.ctx
    }

    /// The full name of the device ops run on.
    pub fn device_name(&self) -> &str {
        self.ctx.device().name()
    }

    /// A session of `g` on the target's devices.
    pub fn session(&self, g: Graph, options: SessionOptions) -> opforge_core::Result<Session> {
        let builder = Session::builder(g).options(options);
        match &self.devices {
            Some(devices) => builder.devices(devices.clone()).build(),
            None => builder.build(),
        }
    }

    /// `t` on the host (copied from the target's device if it is there).
    pub fn to_host(&self, t: &Tensor) -> opforge_core::Result<Tensor> {
        self.ctx.device().copy_to_host(t)
    }
}

/// Every case on `target`: the failures (cases that differ, expected
/// failures that pass or fail otherwise, expected failures no case has).
pub fn check_all(target: &Target) -> Vec<String> {
    let mut failures = Vec::new();
    let all = cases();
    for case in &all {
        let name = case.describe();
        let expected = EXPECTED_FAILURES.iter().find(|(n, _, _)| *n == name);
        match (check(target, case), expected) {
            (Ok(()), None) => {}
            (Ok(()), Some((_, _, bug))) => failures.push(format!(
                "{name}: listed in EXPECTED_FAILURES ({bug}) but passes"
            )),
            (Err(e), Some((_, want, _))) if e.contains(want) => {}
            (Err(e), _) => failures.push(format!("{name}: {e}")),
        }
    }
    for (name, _, _) in EXPECTED_FAILURES {
        if !all.iter().any(|c| c.describe() == *name) {
            failures.push(format!(
                "{name}: listed in EXPECTED_FAILURES but no case has this description"
            ));
        }
    }
    failures
}

/// A graph as built, and after each round trip (names get `trip.prefix()`).
pub fn every_trip(g: Graph) -> Vec<(Trip, Graph)> {
    let def = g.to_graph_def();
    let imported = [Trip::Binary, Trip::Text].map(|trip| (trip, import(&def, trip).unwrap()));
    std::iter::once((Trip::Built, g)).chain(imported).collect()
}

/// Runs a session of a graph after `trip`, with names given unprefixed.
pub fn run_named(
    sess: &Session,
    trip: Trip,
    feeds: &[(String, Tensor)],
    fetches: &[&str],
    targets: &[&str],
) -> opforge_core::Result<Vec<Tensor>> {
    let p = trip.prefix();
    let feeds: Vec<(String, Tensor)> = feeds
        .iter()
        .map(|(n, t)| (format!("{p}{n}"), t.clone()))
        .collect();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let fetches: Vec<String> = fetches.iter().map(|n| format!("{p}{n}")).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let targets: Vec<String> = targets.iter().map(|n| format!("{p}{n}")).collect();
    let targets: Vec<&str> = targets.iter().map(String::as_str).collect();
    sess.run_by_name(&feeds, &fetches, &targets)
}

/// One call of an op: its input arguments and the attrs given (the rest are
/// inferred or defaulted, in eager and graph mode alike).
#[derive(Clone)]
pub struct Case {
    /// The op.
    pub op: &'static str,
    /// Its input arguments.
    pub args: Vec<Arg>,
    /// The attrs given.
    pub attrs: AttrMap,
}

/// A call of op `name` with no inputs or attrs yet.
pub fn op(name: &'static str) -> Case {
    Case {
        op: name,
        args: Vec::new(),
        attrs: AttrMap::new(),
    }
}

impl Case {
    /// Adds a single-tensor input argument.
    pub fn i(mut self, t: Tensor) -> Self {
        self.args.push(Arg::One(t));
        self
    }
    /// Adds a list input argument.
    pub fn l(mut self, ts: Vec<Tensor>) -> Self {
        self.args.push(Arg::List(ts));
        self
    }
    /// Sets an attr.
    pub fn a(mut self, name: &str, v: impl IntoAttrValue) -> Self {
        self.attrs.insert(name.to_string(), v.into_attr_value());
        self
    }
    /// `Op(float[2,3], [int32[], int32[]]) [attrs]`, for failure messages.
    pub fn describe(&self) -> String {
        let ty = |t: &Tensor| format!("{}{:?}", t.dtype(), t.dims());
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match a {
                Arg::One(t) => ty(t),
                Arg::List(l) => format!("[{}]", l.iter().map(ty).collect::<Vec<_>>().join(", ")),
            })
            .collect();
        format!(
            "{}({}) {}",
            self.op,
            args.join(", "),
            summarize_attrs(&self.attrs)
        )
    }
}

/// How a case's inputs enter the graph.
#[derive(Clone, Copy, Debug)]
pub enum Inputs {
    /// `Const` nodes holding the values.
    Const,
    /// `Placeholder`s declaring the values' shapes, fed at run time.
    FedKnownShape,
    /// `Placeholder`s of known rank and unknown dimensions, fed at run time.
    FedUnknownDims,
    /// `Placeholder`s of unknown shape, fed at run time.
    FedUnknownShape,
}

/// How a case's graph reaches the session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trip {
    /// As built.
    Built,
    /// Encoded in the binary wire format (prost's `Message::encode_to_vec`,
    /// which `proto::to_binary` is), decoded, imported into a fresh graph.
    Binary,
    /// Written as TensorFlow may write it (see `tf_style`), printed in text
    /// format, parsed and imported under the prefix `rt/`.
    Text,
}

impl Trip {
    /// The prefix of node names after the trip.
    pub fn prefix(self) -> &'static str {
        if self == Trip::Text {
            "rt/"
        } else {
            ""
        }
    }
}

/// The graph of a case: its input nodes, the op node `op` (on the target's
/// device, by its full name), an `Identity` node `out{i}` reading each output
/// `op:i`, and a `NoOp` node `done` with a control edge from `op`. Returns
/// the feeds the session must be given (by output name).
fn build(
    target: &Target,
    case: &Case,
    inputs: Inputs,
) -> Result<(Graph, Vec<(String, Tensor)>), String> {
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let mut source = |g: &mut Graph, name: String, t: &Tensor| -> Result<Output, String> {
        let spec = match inputs {
            Inputs::Const => NodeSpec::new("Const", &name)
                .attr("value", t)
                .attr("dtype", t.dtype()),
            _ => {
                feeds.push((format!("{name}:0"), t.clone()));
                let p = NodeSpec::new("Placeholder", &name).attr("dtype", t.dtype());
                let mut unknown_dims = t.shape().to_proto();
                unknown_dims.dim.iter_mut().for_each(|d| d.size = -1);
                match inputs {
                    Inputs::FedKnownShape => p.attr("shape", t.shape().to_proto()),
                    Inputs::FedUnknownDims => p.attr("shape", unknown_dims),
                    _ => p,
                }
            }
        };
        g.add(spec)
            .map(Output::from)
            .map_err(|e| format!("adding input {name}: {e}"))
    };
    let mut spec = NodeSpec::new(case.op, "op").device(target.device_name());
    for (i, arg) in case.args.iter().enumerate() {
        spec = match arg {
            Arg::One(t) => spec.input(source(&mut g, format!("in{i}"), t)?),
            Arg::List(l) => {
                let outs = l
                    .iter()
                    .enumerate()
                    .map(|(j, t)| source(&mut g, format!("in{i}_{j}"), t))
                    .collect::<Result<_, _>>()?;
                spec.input_list(outs)
            }
        };
    }
    for (k, v) in &case.attrs {
        spec = spec.attr(k, v.clone());
    }
    let id = g
        .add(spec)
        .map_err(|e| format!("graph construction: {e}"))?;
    for i in 0..g.node(id).unwrap().output_types.len() {
        let read = NodeSpec::new("Identity", &format!("out{i}")).input(Output::new(id, i));
        g.add(read).map_err(|e| format!("adding out{i}: {e}"))?;
    }
    g.add(NodeSpec::new("NoOp", "done").control_input(id))
        .map_err(|e| format!("adding done: {e}"))?;
    Ok((g, feeds))
}

/// `def` as TensorFlow may write it: nodes in another order (reversed),
/// attrs equal to their default left out, and `Const` values in the typed
/// `*_val` fields (`AsProtoField`) instead of `tensor_content`.
fn tf_style(def: &GraphDef) -> GraphDef {
    let mut def = def.clone();
    def.node.reverse();
    for n in &mut def.node {
        let op_def = Registry::global().op_def(&n.op).unwrap();
        let default = |k: &String| {
            op_def
                .attr
                .iter()
                .find(|a| &a.name == k)
                .and_then(|a| a.default_value.clone())
        };
        n.attr.retain(|k, v| default(k).as_ref() != Some(v));
        if let Some(Value::Tensor(t)) = n.attr.get_mut("value").and_then(|v| v.value.as_mut()) {
            **t = Tensor::from_proto(t).unwrap().to_proto_field().unwrap();
        }
    }
    def
}

/// `def`'s nodes as importing them under `prefix` names them, sorted by
/// name, with tensor attrs in one encoding.
fn canonical(def: &GraphDef, prefix: &str) -> GraphDef {
    let mut nodes = def.node.clone();
    for n in &mut nodes {
        n.name = format!("{prefix}{}", n.name);
        for input in &mut n.input {
            *input = match input.strip_prefix('^') {
                Some(c) => format!("^{prefix}{c}"),
                None => format!("{prefix}{input}"),
            };
        }
        for v in n.attr.values_mut() {
            if let Some(Value::Tensor(t)) = &mut v.value {
                **t = Tensor::from_proto(t).unwrap().to_proto().unwrap();
            }
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    GraphDef {
        node: nodes,
        ..Default::default()
    }
}

/// Equal to the bit (`PartialEq` has NaN != NaN in float fields); maps are
/// `BTreeMap`s, so equal messages encode to equal bytes.
fn same(a: &GraphDef, b: &GraphDef) -> bool {
    proto::to_binary(a) == proto::to_binary(b)
}

/// The graph of `def` after `trip`, checked to decode to what was encoded
/// and to export the same nodes again.
pub fn import(def: &GraphDef, trip: Trip) -> Result<Graph, String> {
    let sent = if trip == Trip::Text {
        tf_style(def)
    } else {
        def.clone()
    };
    let back: GraphDef = match trip {
        Trip::Text => proto::from_text(&proto::to_text(&sent)),
        _ => proto::from_binary(&proto::to_binary(&sent)),
    }
    .map_err(|e| format!("decoding: {e}"))?;
    if !same(&back, &sent) {
        return Err(format!(
            "the decoded GraphDef differs:\n{}",
            proto::to_text(&back)
        ));
    }
    let g = if trip == Trip::Text {
        let mut g = Graph::new();
        g.import(&back, trip.prefix()).map(|()| g)
    } else {
        Graph::from_graph_def(&back)
    }
    .map_err(|e| format!("import: {e}"))?;
    let again = g.to_graph_def();
    let same = match trip {
        Trip::Text => same(&canonical(&again, ""), &canonical(def, trip.prefix())),
        _ => same(&again, def),
    };
    if !same {
        return Err(format!("re-export differs:\n{}", proto::to_text(&again)));
    }
    Ok(g)
}

/// Runs `g` (after `trip`): fetches every output of node `op` and of its
/// readers `out{i}`, and runs `done`. Only the binary trip's session has an
/// inter-op pool (the executor's parallel mode, used for graphs with
/// unknown or large shapes): starting one per session costs more than the
/// rest of this test.
fn run(
    target: &Target,
    g: Graph,
    trip: Trip,
    feeds: &[(String, Tensor)],
    n: usize,
) -> Result<Vec<Tensor>, String> {
    let p = trip.prefix();
    let mut fetches: Vec<String> = (0..n).map(|i| format!("{p}op:{i}")).collect();
    fetches.extend((0..n).map(|i| format!("{p}out{i}:0")));
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    let feeds: Vec<(String, Tensor)> = feeds
        .iter()
        .map(|(n, t)| (format!("{p}{n}"), t.clone()))
        .collect();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let mut options = SessionOptions::default();
    if trip != Trip::Binary {
        options.inter_op_threads = 1;
    }
    let sess = target
        .session(g, options)
        .map_err(|e| format!("session: {e}"))?;
    sess.run_by_name(&feeds, &fetches, &[&format!("{p}done")])
        .map_err(|e| format!("run: {e}"))
}

/// The graph's static view of node `op` agrees with the eager outputs: the
/// same number and dtypes of outputs, and inferred shapes compatible with
/// the actual ones.
fn check_static(g: &Graph, trip: Trip, want: &[Tensor]) -> Result<(), String> {
    let op = format!("{}op", trip.prefix());
    let node = g
        .node(g.find(&op).ok_or("no node 'op' in the graph")?)
        .unwrap();
    let types: Vec<DataType> = want.iter().map(Tensor::dtype).collect();
    if node.output_types != types {
        return Err(format!(
            "the node's output dtypes are {:?}, eager gave {types:?}",
            node.output_types
        ));
    }
    for (i, (inferred, w)) in node.output_shapes.iter().zip(want).enumerate() {
        let Some(dims) = inferred else { continue };
        let fits =
            dims.len() == w.rank() && dims.iter().zip(w.dims()).all(|(&d, &a)| d < 0 || d == a);
        if !fits {
            return Err(format!(
                "output {i}'s inferred shape is {dims:?}, eager gave {:?}",
                w.dims()
            ));
        }
    }
    Ok(())
}

/// Equal dtype, shape and bytes (NaN payloads and signed zeros included).
pub fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.dtype() == b.dtype()
        && a.dims() == b.dims()
        && match a.dtype() {
            DataType::String => a.strings().ok() == b.strings().ok(),
            DataType::Resource => a.resource_handles().ok() == b.resource_handles().ok(),
            _ => a.bytes().ok() == b.bytes().ok(),
        }
}

/// `got` holds the op's outputs, then its readers' outputs.
fn compare(got: &[Tensor], want: &[Tensor]) -> Result<(), String> {
    let (direct, read) = got.split_at(want.len());
    for (what, got) in [("output", direct), ("out", read)] {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            if !same_bits(g, w) {
                return Err(format!("{what} {i} is {g:?}, eager gave {w:?}"));
            }
        }
    }
    Ok(())
}

/// Runs `case` eagerly and in every graph form on `target`; the first
/// difference.
pub fn check(target: &Target, case: &Case) -> Result<(), String> {
    let want = target
        .ctx()
        .execute_args(case.op, case.args.clone(), &case.attrs)
        .and_then(|outs| {
            outs.iter()
                .map(|t| target.to_host(t))
                .collect::<opforge_core::Result<Vec<_>>>()
        })
        .map_err(|e| format!("eager execution failed: {e}"))?;
    let variants: &[Inputs] = if case.args.is_empty() {
        &[Inputs::Const]
    } else {
        &[
            Inputs::Const,
            Inputs::FedKnownShape,
            Inputs::FedUnknownDims,
            Inputs::FedUnknownShape,
        ]
    };
    // Wrong static dtypes or shapes are reported after every value is compared.
    let mut static_problems = Vec::new();
    for &inputs in variants {
        let (built, feeds) =
            build(target, case, inputs).map_err(|e| format!("[{inputs:?} inputs] {e}"))?;
        let def = built.to_graph_def();
        let mut built = Some(built);
        for trip in [Trip::Built, Trip::Binary, Trip::Text] {
            let at = |e: String| format!("[{inputs:?} inputs, {trip:?}] {e}");
            let g = match built.take() {
                Some(g) => g,
                None => import(&def, trip).map_err(at)?,
            };
            static_problems.extend(check_static(&g, trip, &want).err().map(at));
            run(target, g, trip, &feeds, want.len())
                .and_then(|got| compare(&got, &want))
                .map_err(at)?;
        }
    }
    match static_problems.as_slice() {
        [] => Ok(()),
        [first, rest @ ..] => Err(format!(
            "{first} (and {} more static mismatches)",
            rest.len()
        )),
    }
}
