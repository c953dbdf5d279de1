//! What the CLI's integration tests share: running the `opforge` binary.

#![allow(dead_code)] // each test file uses its own part

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs `opforge ARGS` and waits for it.
pub fn opforge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opforge"))
        .args(args)
        .output()
        .expect("run opforge")
}

/// Runs `opforge ARGS` with `stdin` as its standard input.
pub fn opforge_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_opforge"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run opforge");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

/// The `zero_out` example op library (`examples/zero_out`: the guide's
/// `ZeroOut` and its companions), built once per test binary.
pub fn zero_out_lib() -> String {
    opforge_testing::examples::build_example(
        "zero_out",
        false,
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
    )
    .to_str()
    .expect("a UTF-8 target path")
    .to_string()
}
