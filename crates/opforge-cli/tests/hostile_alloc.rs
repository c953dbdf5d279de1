//! Allocation bombs through the CLI: ops asked for outputs far larger than
//! memory (through shape tensors, count attrs, broadcasting, zero-size
//! operands hiding huge batches, string outputs, JSON writing) answer clean
//! errors, line by line, under a small address-space limit; never an abort.

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

const BOMBS: &str = include_str!("data/allocation_bombs.jsonl");

/// Runs `opforge exec --jsonl -` on `input` under `ulimit -v KIB` (through
/// `sh`), with extra environment variables.
fn exec_limited(input: &str, kib: u64, env: &[(&str, &str)]) -> (Option<i32>, Vec<Value>, String) {
    let script = format!("ulimit -v {kib} && exec \"$0\" exec --jsonl -");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_opforge"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run sh");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (
        out.status.code(),
        lines,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn allocation_bombs_are_clean_errors_under_a_small_address_space() {
    // 3 GiB of address space: enough for the binary and its thread pools,
    // far too little for any of the requests.
    let (code, lines, stderr) = exec_limited(BOMBS, 3 << 20, &[]);
    assert_eq!(code, Some(0), "opforge died: {stderr}");
    let inputs: Vec<&str> = BOMBS.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), inputs.len(), "{lines:#?}\n{stderr}");
    // The last line is a normal op: the process is still fine after the bombs.
    assert_eq!(lines.last().unwrap()["outputs"][0]["values"][0], 1.0);
    for (input, out) in inputs.iter().zip(&lines) {
        if let Some(e) = out.get("error") {
            let code = e["code"].as_str().unwrap();
            assert!(
                code == "RESOURCE_EXHAUSTED" || code == "INVALID_ARGUMENT",
                "{input}\n -> {out}"
            );
        }
    }
    // Each kind of bomb is named by its message.
    let all: String = lines.iter().map(|l| l.to_string()).collect();
    for needle in [
        "asks for 1000000000000 'output' tensors",
        "JSON output is limited to",
        "OOM when allocating tensor with shape[1000000000] and type string on the host",
        "OOM when allocating tensor with shape[100000,1000000] and type float on the host: \
         400000000000 bytes is above the allocation limit",
    ] {
        assert!(all.contains(needle), "no '{needle}' in {all}");
    }
    // A zero-size operand does not hide a huge batch: the empty product is computed.
    assert_eq!(
        lines[0]["outputs"][0]["shape"],
        serde_json::json!([2147483648i64, 0, 1])
    );
}

#[test]
fn the_allocation_limit_is_configurable() {
    let line = r#"{"op":"Fill","inputs":[{"dtype":"DT_INT32","shape":[2],"values":[1000,1000]},{"dtype":"DT_FLOAT","shape":[],"values":[1]}]}"#;
    let (code, lines, stderr) =
        exec_limited(line, 8 << 20, &[("OPFORGE_MAX_ALLOCATION", "1000000")]);
    assert_eq!(code, Some(0), "{stderr}");
    let e = &lines[0]["error"];
    assert_eq!(e["code"], "RESOURCE_EXHAUSTED", "{}", lines[0]);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("4000000 bytes is above the allocation limit of 1000000 bytes"),
        "{}",
        lines[0]
    );
}

/// Runs `opforge graph run` on a GraphDef of tests/data under `ulimit -v`.
fn graph_run_limited(graph: &str, fetch: &str, kib: u64) -> (Option<i32>, Value, String) {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hostile_alloc");
    std::fs::create_dir_all(&dir).unwrap();
    let request = dir.join(format!("{graph}.{fetch}.json"));
    std::fs::write(&request, format!(r#"{{"fetches": ["{fetch}"]}}"#)).unwrap();
    let graph = format!("{}/tests/data/{graph}.pbtxt", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {kib} && exec \"$0\" graph run --graph \"$1\" --request \"$2\""
        ))
        .arg(env!("CARGO_BIN_EXE_opforge"))
        .arg(&graph)
        .arg(&request)
        .output()
        .expect("run sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (
        out.status.code(),
        value,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn huge_shape_tensors_in_a_graph_are_clean_errors() {
    // A Const of 2^31 int32 elements (one value repeated, as TensorProto
    // allows) used as the shape of Reshape or Fill: shape inference refuses
    // the rank, fetching the Const alone is an allocation error.
    for (graph, fetch, code, needle) in [
        (
            "huge_shape_reshape",
            "r:0",
            "INVALID_ARGUMENT",
            "a shape has at most 254 dimensions",
        ),
        (
            "huge_shape_fill",
            "r:0",
            "INVALID_ARGUMENT",
            "a shape has at most 254 dimensions",
        ),
        (
            "huge_const",
            "s:0",
            "RESOURCE_EXHAUSTED",
            "OOM when allocating a buffer of 8589934592 bytes",
        ),
    ] {
        let (status, out, stderr) = graph_run_limited(graph, fetch, 3 << 20);
        assert!(status.is_some(), "{graph}: killed by a signal: {stderr}");
        assert_eq!(out["error"]["code"], code, "{graph}: {out} {stderr}");
        assert!(
            out["error"]["message"].as_str().unwrap().contains(needle),
            "{graph}: {out}"
        );
    }
}
