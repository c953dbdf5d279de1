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
