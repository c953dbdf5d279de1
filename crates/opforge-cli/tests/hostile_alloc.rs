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
        "OOM when allocating a string tensor of shape [1000000000]",
        "OOM when allocating a buffer of 400000000000 bytes",
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
