//! `opforge graph`: run GraphDefs and add gradient subgraphs from scripts.
//!
//! - `opforge graph run --graph FILE --request REQ.json`: REQ.json is
//!   `{"feeds": {"x:0": TENSOR}, "fetches": ["y:0"], "targets": ["init"]}`
//!   (TENSOR as in `opforge exec`); prints `{"outputs": {"y:0": TENSOR}}` or
//!   `{"error": {"code": ..., "message": ...}}`.
//! - `opforge graph gradients --graph FILE --ys loss:0 --xs w:0,b:0 --out FILE2`:
//!   adds the gradients of the ys with respect to the xs, writes the graph
//!   to FILE2 (binary if it ends in `.pb`, else text), and prints
//!   `{"gradients": {"w:0": "gradients/...:0", ...}}` (null where no
//!   gradient flows).
//!
//! FILE may be a binary `.pb` or a text `.pbtxt` GraphDef.

use super::exec::error_json;
use super::CliError;
use opforge::autodiff::gradients;
use opforge::graph::{Graph, LeanGraphDef, Output, Session};
use opforge::proto::{self, GraphDef};
use opforge::tensor::json::{tensor_from_json, tensor_to_json};
use opforge::{Result, Status};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::Path;

/// Reads a GraphDef: binary for `.pb` files, else text (falling back to binary).
pub fn read_graph_def(path: &Path) -> Result<GraphDef> {
    let bytes = std::fs::read(path)
        .map_err(|e| Status::not_found(format!("cannot read {}: {e}", path.display())))?;
    let is_binary = path.extension().is_some_and(|e| e == "pb");
    if is_binary {
        return proto::from_binary(&bytes);
    }
    match std::str::from_utf8(&bytes) {
        Ok(text) => proto::from_text(text).or_else(|e| proto::from_binary(&bytes).map_err(|_| e)),
        Err(_) => proto::from_binary(&bytes),
    }
}

/// Reads a GraphDef file for import, as [`read_graph_def`] reads it (same
/// formats, same fallback, same errors) but without building the
/// `GraphDef`: binary bytes are decoded for the import only, text is
/// re-encoded to binary first.
pub fn read_lean_graph_def(path: &Path) -> Result<LeanGraphDef> {
    let bytes = std::fs::read(path)
        .map_err(|e| Status::not_found(format!("cannot read {}: {e}", path.display())))?;
    let is_binary = path.extension().is_some_and(|e| e == "pb");
    if is_binary {
        return LeanGraphDef::decode(&bytes);
    }
    match std::str::from_utf8(&bytes) {
        Ok(text) => match proto::text_to_binary::<GraphDef>(text) {
            Ok(binary) => {
                drop(bytes);
                LeanGraphDef::decode(&binary)
            }
            // As read_graph_def: text that does not parse may be binary.
            Err(e) => LeanGraphDef::decode(&bytes).map_err(|_| e),
        },
        Err(_) => LeanGraphDef::decode(&bytes),
    }
}

/// Runs a request against a graph: the JSON to print.
pub fn run_request(graph: Graph, request: &Value) -> Result<Value> {
    run_request_in(graph, request).map(|(value, _session)| value)
}

/// [`run_request`], also returning the session that ran it.
fn run_request_in(graph: Graph, request: &Value) -> Result<(Value, Session)> {
    let mut feeds = Vec::new();
    if let Some(map) = request["feeds"].as_object() {
        for (name, t) in map {
            let o = graph.output(name)?;
            feeds.push((
                o,
                tensor_from_json(t).map_err(|e| e.prepend(format!("feed {name}: ")))?,
            ));
        }
    }
    let names = |key: &str| -> Result<Vec<String>> {
        match &request[key] {
            Value::Null => Ok(Vec::new()),
            Value::Array(a) => a
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        Status::invalid_argument(format!("\"{key}\" must be a list of names"))
                    })
                })
                .collect(),
            _ => Err(Status::invalid_argument(format!(
                "\"{key}\" must be a list of names"
            ))),
        }
    };
    let fetch_names = names("fetches")?;
    let fetches: Vec<Output> = fetch_names
        .iter()
        .map(|n| graph.output(n))
        .collect::<Result<_>>()?;
    let targets = names("targets")?
        .iter()
        .map(|n| {
            graph
                .find(n)
                .ok_or_else(|| Status::not_found(format!("No node named '{n}' in the graph")))
        })
        .collect::<Result<Vec<_>>>()?;
    let session = Session::new(graph)?;
    let outs = session.run(feeds, &fetches, &targets)?;
    let mut map = Map::new();
    for (name, t) in fetch_names.into_iter().zip(outs) {
        map.insert(name, tensor_to_json(&t)?);
    }
    Ok((json!({ "outputs": map }), session))
}

/// `opforge graph run`.
pub fn run(
    graph_path: &Path,
    request_path: &Path,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let result = (|| -> Result<Value> {
        // Decoded for the import only: a decoded GraphDef (an attr map per
        // node) would add to the import's peak memory.
        let def = read_lean_graph_def(graph_path)?;
        let text = std::fs::read_to_string(request_path).map_err(|e| {
            Status::not_found(format!("cannot read {}: {e}", request_path.display()))
        })?;
        let request: Value = serde_json::from_str(&text)
            .map_err(|e| Status::invalid_argument(format!("the request is not valid JSON: {e}")))?;
        let graph = Graph::from_lean_graph_def(def)?;
        let (value, session) = run_request_in(graph, &request)?;
        // The process exits after printing: freeing a large graph's and
        // session's allocations one by one would cost a fifth of a
        // 100,000-node run for nothing (the allocator's consolidation grows
        // faster than linearly), so the OS takes them back instead.
        std::mem::forget(session);
        Ok(value)
    })();
    let line = result.unwrap_or_else(|e| error_json(&e));
    writeln!(out, "{line}")?;
    Ok(())
}

/// `opforge graph gradients`.
pub fn add_gradients(
    graph_path: &Path,
    ys: &str,
    xs: &str,
    out_path: &Path,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let def = read_graph_def(graph_path)?;
    let mut graph = Graph::from_graph_def(&def)?;
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (y_names, x_names) = (split(ys), split(xs));
    let ys: Vec<Output> = y_names
        .iter()
        .map(|n| graph.output(n))
        .collect::<Result<_>>()?;
    let xs: Vec<Output> = x_names
        .iter()
        .map(|n| graph.output(n))
        .collect::<Result<_>>()?;
    let grads = gradients(&mut graph, &ys, &xs, None)?;
    let new_def = graph.to_graph_def();
    let bytes = if out_path.extension().is_some_and(|e| e == "pb") {
        proto::to_binary(&new_def)
    } else {
        proto::to_text(&new_def).into_bytes()
    };
    std::fs::write(out_path, bytes)
        .map_err(|e| Status::unknown(format!("cannot write {}: {e}", out_path.display())))?;
    let mut map = Map::new();
    for (name, g) in x_names.into_iter().zip(grads) {
        map.insert(
            name,
            g.map_or(Value::Null, |o| {
                Value::String(graph.output_name(o).unwrap())
            }),
        );
    }
    writeln!(out, "{}", json!({ "gradients": map }))?;
    Ok(())
}
