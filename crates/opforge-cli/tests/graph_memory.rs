//! `opforge graph run` on a long chain of `Identity` nodes (issue 16,
//! "hostile input": 100,000 nodes once peaked at 1.7 GB, 17.5 KB a node).
//! The peak memory of the process grows by under 1 KB a node, and its CPU
//! time grows linearly with the number of nodes. Both are slopes between
//! two sizes, measured on child processes (`wait4`), so the binary's fixed
//! base (code, thread pools, the op registry) does not count.

#![cfg(target_os = "linux")]

use opforge::proto::{self, attr_value, AttrValue, NodeDef, TensorProto, TensorShapeProto};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes a GraphDef, binary (`.pb`) or text (`.pbtxt`) by the extension of
/// `path`: `n0 = Const([1.5, 2.5])`, `n{i} = Identity(n{i-1})`; one node at
/// a time, so that this process stays small
/// (a child's peak memory as `wait4` reports it starts from its parent's:
/// the child shares the parent's memory until it runs `opforge`).
fn write_chain(path: &Path, nodes: usize) {
    let float = AttrValue {
        value: Some(attr_value::Value::Type(opforge::DataType::Float as i32)),
    };
    let value = TensorProto {
        dtype: opforge::DataType::Float as i32,
        tensor_shape: Some(TensorShapeProto {
            dim: vec![proto::tensor_shape_proto::Dim {
                size: 2,
                ..Default::default()
            }],
            ..Default::default()
        }),
        float_val: vec![1.5, 2.5],
        ..Default::default()
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let text = path.extension().is_some_and(|e| e == "pbtxt");
    // GraphDef.node is field 1, length-delimited: key 0x0a, length, bytes.
    let mut write_node = |node: &NodeDef| {
        if text {
            write!(out, "node {{\n{}}}\n", proto::to_text(node)).unwrap();
            return;
        }
        let bytes = proto::to_binary(node);
        let mut key_len = vec![0x0a];
        let mut len = bytes.len();
        while len >= 0x80 {
            key_len.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        key_len.push(len as u8);
        out.write_all(&key_len).unwrap();
        out.write_all(&bytes).unwrap();
    };
    write_node(&NodeDef {
        name: "n0".into(),
        op: "Const".into(),
        attr: [
            ("dtype".to_string(), float.clone()),
            (
                "value".to_string(),
                AttrValue {
                    value: Some(attr_value::Value::Tensor(Box::new(value))),
                },
            ),
        ]
        .into(),
        ..Default::default()
    });
    for i in 1..nodes {
        write_node(&NodeDef {
            name: format!("n{i}"),
            op: "Identity".into(),
            input: vec![format!("n{}", i - 1)],
            attr: [("T".to_string(), float.clone())].into(),
            ..Default::default()
        });
    }
    out.flush().unwrap();
}

/// Peak resident memory (bytes) and CPU time (seconds) of one
/// `opforge graph run` of a chain of `nodes` nodes, after checking its answer.
fn run_chain(dir: &Path, nodes: usize, extension: &str) -> (u64, f64) {
    let graph = dir.join(format!("chain{nodes}.{extension}"));
    write_chain(&graph, nodes);
    let request = dir.join(format!("chain{nodes}.json"));
    let last = format!("n{}:0", nodes - 1);
    std::fs::write(
        &request,
        format!(r#"{{"feeds": {{}}, "fetches": ["{last}"], "targets": []}}"#),
    )
    .unwrap();
    // Waited for with wait4 below, for its rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(env!("CARGO_BIN_EXE_opforge"))
        .args(["graph", "run", "--graph"])
        .arg(&graph)
        .arg("--request")
        .arg(&request)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run opforge");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    // wait4 rather than Child::wait: the rusage of this child alone (the
    // test harness may run other children at the same time).
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    // SAFETY: pid is our child, not yet waited for; the pointers are valid.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "opforge failed (status {status}): {out}"
    );
    let answer: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(
        answer["outputs"][&last]["values"],
        serde_json::json!([1.5, 2.5]),
        "{out}"
    );
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (
        usage.ru_maxrss as u64 * 1024,
        seconds(usage.ru_utime) + seconds(usage.ru_stime),
    )
}

/// The peak-memory slope (bytes a node) and the CPU-time ratio of the chain
/// at 25,000 and 100,000 nodes in the format of `extension`; asserts both.
fn check_chain(extension: &str) {
    let dir = std::env::temp_dir().join(format!(
        "opforge-graph-memory-{extension}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (small, large) = (25_000, 100_000);
    let (rss_small, cpu_small) = run_chain(&dir, small, extension);
    let (rss_large, cpu_large) = run_chain(&dir, large, extension);
    if std::env::var_os("KEEP").is_none() {
        std::fs::remove_dir_all(&dir).ok();
    }
    let per_node = rss_large.saturating_sub(rss_small) as f64 / (large - small) as f64;
    let report = format!(
        ".{extension}: {small} nodes: {} KB peak, {cpu_small:.2} s CPU; {large} nodes: {} KB \
         peak, {cpu_large:.2} s CPU; {per_node:.0} bytes a node",
        rss_small / 1024,
        rss_large / 1024
    );
    eprintln!("{report}");
    assert!(per_node < 1024.0, "over 1 KB a node: {report}");
    // 4x the nodes: linear time is about 4x the CPU time; quadratic, 16x.
    assert!(
        cpu_large < 6.0 * cpu_small.max(0.05),
        "CPU time grows faster than the number of nodes: {report}"
    );
}

#[test]
fn a_long_binary_identity_chain_costs_under_1kb_a_node_in_linear_time() {
    check_chain("pb");
}

#[test]
fn a_long_text_identity_chain_costs_under_1kb_a_node_in_linear_time() {
    check_chain("pbtxt");
}
