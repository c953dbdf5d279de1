//! `opforge lib inspect`, `opforge lib cycle` and `--library FILE`: op
//! libraries.

use super::{CliError, InspectFormat};
use opforge::{Registry, Status};
use opforge_loader::{Loader, Manifest};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Prints the manifest of the library at `file` without loading it: the
/// header's JSON object, or (`--format text`) a readable summary. Fails
/// (exit 1) with the reason loading would give when this host refuses the
/// library (another ABI major, a newer minimum host minor, a wrong layout
/// hash), after printing what the manifest says.
pub fn inspect(file: &Path, format: InspectFormat, out: &mut dyn Write) -> Result<(), CliError> {
    let manifest = opforge_loader::inspect(file)?;
    let verdict = manifest.check_host();
    match format {
        InspectFormat::Json => {
            let json = manifest.to_json()?;
            let pretty = serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string());
            writeln!(out, "{pretty}")?;
        }
        InspectFormat::Text => summary(&manifest, verdict.is_ok(), out)?,
    }
    Ok(verdict?)
}

/// The readable form of a manifest: the library and its ABI, whether this
/// host loads it, then one line per op (with its attrs), kernel and
/// gradient.
fn summary(m: &Manifest, loads: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let abi = &m.library.abi;
    writeln!(
        out,
        "{} {} (opforge C ABI {}.{}, runs on hosts {}.{}+)",
        m.library.name, m.library.version, abi.major, abi.minor, abi.major, abi.min_host_minor
    )?;
    writeln!(out, "  file: {}", m.path.display())?;
    writeln!(
        out,
        "  this host (opforge C ABI {}.{}): {}",
        opforge_loader::abi::OPFORGE_ABI_MAJOR,
        opforge_loader::abi::OPFORGE_ABI_MINOR,
        if loads {
            "loads it"
        } else {
            "refuses it (the error below says why)"
        }
    )?;
    let (Some(ops), Some(kernels), Some(gradients)) = (&m.ops, &m.kernels, &m.gradients) else {
        writeln!(
            out,
            "  (no declaration: the library registers its ops by code when loaded; `opforge lib \
             seal {}` records them)",
            m.path.display()
        )?;
        return Ok(());
    };
    if m.sealed {
        writeln!(
            out,
            "  declared by: a sealed declaration (opforge lib seal)"
        )?;
    }
    for op in ops {
        let mut notes = Vec::new();
        if op.shape_fn {
            notes.push("shape function".to_string());
        }
        notes.extend(op.flags.iter().cloned());
        if let Some((version, why)) = &op.deprecation {
            notes.push(format!("deprecated at GraphDef version {version}: {why}"));
        }
        let notes: String = notes.iter().map(|n| format!(", {n}")).collect();
        writeln!(
            out,
            "  op {}({}) -> ({}){notes}",
            op.name,
            op.inputs.join(", "),
            op.outputs.join(", ")
        )?;
        if !op.attrs.is_empty() {
            writeln!(out, "    attrs: {}", op.attrs.join("; "))?;
        }
    }
    for k in kernels {
        writeln!(out, "  kernel {}", k.describe())?;
    }
    for g in gradients {
        writeln!(out, "  gradient of {}: {}", g.op, g.form)?;
    }
    if ops.is_empty() && kernels.is_empty() && gradients.is_empty() {
        writeln!(out, "  (declares no ops, kernels or gradients)")?;
    }
    Ok(())
}

/// Loads every library in `files` into `registry`; the loader is returned
/// so the caller decides how long it lives.
pub fn load_all(registry: &Arc<Registry>, files: &[PathBuf]) -> Result<Loader, CliError> {
    let loader = Loader::new(registry.clone());
    for f in files {
        loader.load(f)?;
    }
    Ok(loader)
}

/// `opforge lib cycle FILE --times N`: loads the library into this process
/// (the global registry), runs its init, unloads it (its fini, dlclose),
/// `times` times, and reports the process's resident memory before the
/// first cycle, after the first and after the last, and whether every
/// unload unmapped the library. Fails if a load or an unload fails, or
/// when the memory grew by more than `max_growth_kib` from the first
/// cycle to the last.
pub fn cycle(
    file: &Path,
    times: u32,
    max_growth_kib: Option<u64>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if times == 0 {
        return Err(Status::invalid_argument("--times must be at least 1").into());
    }
    let loader = Loader::new(Registry::global().clone());
    let before = resident_kib();
    let mut after_first = None;
    let mut label = String::new();
    let mut kept = None;
    for i in 1..=times {
        let h = loader
            .load(file)
            .map_err(|e| e.prepend(format!("cycle {i} of {times}: ")))?;
        label = h.to_string();
        let report = loader
            .unload(&h)
            .map_err(|e| e.prepend(format!("cycle {i} of {times}: ")))?;
        if kept.is_none() && !report.unmapped {
            kept = Some((i, report.note.unwrap_or_default()));
        }
        if i == 1 {
            after_first = resident_kib();
        }
    }
    let after = resident_kib();
    writeln!(out, "{label}: {times} cycles of load, init, unload")?;
    match kept {
        None => writeln!(out, "unmapped after every unload: yes")?,
        Some((i, note)) => writeln!(
            out,
            "unmapped after every unload: no, from cycle {i} on ({note})"
        )?,
    }
    let (Some(before), Some(first), Some(last)) = (before, after_first, after) else {
        writeln!(
            out,
            "resident memory: unknown on this platform (read from /proc/self/status)"
        )?;
        return match max_growth_kib {
            None => Ok(()),
            Some(_) => Err(Status::unimplemented(
                "--max-growth-kib needs the resident memory, which this platform does not \
                 report (/proc/self/status)",
            )
            .into()),
        };
    };
    let grown = last.saturating_sub(first);
    writeln!(
        out,
        "resident memory: {before} KiB before, {first} KiB after the first cycle, {last} KiB \
         after the last ({}{} KiB over the {} cycles after the first)",
        if last >= first { "+" } else { "-" },
        last.abs_diff(first),
        times - 1
    )?;
    match max_growth_kib {
        Some(max) if grown > max => Err(Status::resource_exhausted(format!(
            "op library {label}: resident memory grew by {grown} KiB over {} load/unload \
             cycles, more than --max-growth-kib {max}: something of the library is not released \
             at unload",
            times - 1
        ))
        .into()),
        _ => Ok(()),
    }
}

/// The process's resident memory in KiB (Linux: `VmRSS` of
/// `/proc/self/status`); `None` where it cannot be read.
fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
