//! `opforge lib seal FILE`: records what a library that registers its ops by
//! code registers, so that `opforge lib inspect` lists its ops without
//! running it.
//!
//! The library's init runs in a CHILD process: this binary again, with the
//! hidden command `opforge lib seal-probe FILE --out TMP`, which loads the
//! library into a fresh registry of its own and writes what init registered
//! (manifest records) as JSON to TMP. A crash, an abort or a hang of the
//! library's init (killed after `--timeout`) therefore ends the child, and
//! this process reports it. The records are then written into the file
//! (`opforge_loader::seal`).

use super::CliError;
use opforge::{Code, Registry, Status};
use opforge_loader::{Loader, SealOutcome};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Seals the library at `file` (see the module documentation): runs its init
/// in a child process for at most `timeout`, then writes the declaration.
pub fn seal(file: &Path, timeout: Duration, out: &mut dyn Write) -> Result<(), CliError> {
    let manifest = opforge_loader::seal::sealable(file)?;
    if manifest.is_declared() {
        writeln!(
            out,
            "{}: {} {} declares its ops in its manifest (Rust SDK or the header's declaration \
             macros); there is nothing to seal",
            file.display(),
            manifest.library.name,
            manifest.library.version
        )?;
        return Ok(());
    }
    let records = probe_in_child(file, timeout)?;
    match opforge_loader::seal(file, &records)? {
        SealOutcome::AlreadyDeclared => {
            // The file changed between the checks; say so rather than guess.
            return Err(Status::failed_precondition(format!(
                "'{}' declares its ops now (it changed while it was being sealed); nothing was \
                 written",
                file.display()
            ))
            .into());
        }
        SealOutcome::Sealed {
            ops,
            kernels,
            gradients,
            replaced,
        } => {
            writeln!(
                out,
                "sealed {}: {} {}, {ops} ops, {kernels} kernels, {gradients} gradients{}",
                file.display(),
                manifest.library.name,
                manifest.library.version,
                if replaced {
                    " (replacing its earlier sealed declaration)"
                } else {
                    ""
                }
            )?;
        }
    }
    Ok(())
}

/// The hidden child command: loads `file` into a fresh registry, ignoring a
/// sealed declaration it may already carry, and writes
/// `{"records": [...]}` (what init registered) or `{"error": {"code",
/// "message"}}` to `out_path`.
pub fn seal_probe(file: &Path, out_path: &Path) -> Result<(), CliError> {
    let registry = Arc::new(Registry::with_builtins());
    let loader = Loader::new(registry);
    let result = loader
        .load_ignoring_seal(file)
        .and_then(|h| loader.declaration(&h));
    let doc = match &result {
        Ok(records) => json!({ "records": records }),
        Err(e) => json!({"error": {"code": e.code() as i32, "message": e.message()}}),
    };
    std::fs::write(out_path, doc.to_string()).map_err(|e| {
        Status::internal(format!(
            "cannot write the probe result to '{}': {e}",
            out_path.display()
        ))
    })?;
    // The child ends here: the library's fini and dlclose are not run (the
    // probe is about what init registers).
    std::mem::forget(loader);
    result.map(|_| ()).map_err(CliError::from)
}

/// Runs `opforge lib seal-probe FILE` in a child process and returns the
/// records it found.
fn probe_in_child(file: &Path, timeout: Duration) -> Result<Vec<Value>, Status> {
    let exe = std::env::current_exe().map_err(|e| {
        Status::internal(format!(
            "cannot find the opforge executable to run the probe: {e}"
        ))
    })?;
    let tmp = TempFile::new()?;
    let mut child = Command::new(&exe)
        .args(["lib", "seal-probe"])
        .arg(file)
        .arg("--out")
        .arg(&tmp.0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            Status::internal(format!(
                "cannot start a child process ({}) to run the library's init: {e}",
                exe.display()
            ))
        })?;
    // Read stderr as it comes, so a chatty child never blocks on a full pipe.
    let stderr = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut pipe) = child.stderr.take() {
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
                if s.len() < 64 * 1024 {
                    s.extend_from_slice(&buf[..n]);
                }
            }
        });
    }
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Status::new(
                    Code::DeadlineExceeded,
                    format!(
                        "the init of '{}' did not finish within {} s in the child process that \
                         runs it (killed); nothing was written. Pass a longer --timeout if it is \
                         slow{}",
                        file.display(),
                        timeout.as_secs_f64(),
                        stderr_note(&stderr)
                    ),
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                let _ = child.kill();
                return Err(Status::internal(format!(
                    "waiting for the child process failed: {e}"
                )));
            }
        }
    };
    // Give the reader a moment to take the last of stderr.
    std::thread::sleep(Duration::from_millis(20));
    let doc: Option<Value> = std::fs::read(&tmp.0)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(err) = doc.as_ref().and_then(|d| d.get("error")) {
        let code = err
            .get("code")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .and_then(Code::from_i32)
            .unwrap_or(Code::Unknown);
        let message = err.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(Status::new(
            code,
            format!(
                "loading '{}' in the child process failed, nothing was written: {message}",
                file.display()
            ),
        ));
    }
    if !status.success() {
        return Err(Status::failed_precondition(format!(
            "the child process running the init of '{}' {}; nothing was written{}",
            file.display(),
            describe_exit(status),
            stderr_note(&stderr)
        )));
    }
    match doc
        .as_ref()
        .and_then(|d| d.get("records"))
        .and_then(Value::as_array)
    {
        Some(records) => Ok(records.clone()),
        None => Err(Status::internal(format!(
            "the child process running the init of '{}' exited successfully but left no \
             result{}",
            file.display(),
            stderr_note(&stderr)
        ))),
    }
}

/// "exited with status 3", "was killed by signal 6 (SIGABRT)".
fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    match status.code() {
        Some(c) => format!("exited with status {c}"),
        None => "ended abnormally".to_string(),
    }
}

/// "; its stderr: ..." or nothing.
fn stderr_note(stderr: &Mutex<Vec<u8>>) -> String {
    let s = stderr.lock().unwrap_or_else(|p| p.into_inner());
    let text = String::from_utf8_lossy(&s);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; its stderr: {text}")
    }
}

/// A file in the temp directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new() -> Result<TempFile, Status> {
        let dir = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for attempt in 0..100u32 {
            let p = dir.join(format!(
                "opforge-seal-{}-{nanos}-{attempt}.json",
                std::process::id()
            ));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
            {
                Ok(_) => return Ok(TempFile(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Status::internal(format!(
                        "cannot create a temporary file in '{}': {e}",
                        dir.display()
                    )))
                }
            }
        }
        Err(Status::internal(format!(
            "cannot create a temporary file in '{}'",
            dir.display()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
