//! `opforge lib inspect` and `--library FILE`: op libraries.

use super::{CliError, InspectFormat};
use opforge::Registry;
use opforge_loader::Loader;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Prints the manifest of the library at `file` without loading it.
pub fn inspect(
    file: &std::path::Path,
    format: InspectFormat,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let manifest = opforge_loader::inspect(file)?;
    let json = manifest.to_json()?;
    let pretty = serde_json::to_string_pretty(&json).unwrap_or_else(|_| json.to_string());
    writeln!(out, "{pretty}")?;
    if format == InspectFormat::Text {
        let abi = &manifest.library.abi;
        writeln!(
            out,
            "\n{} {} (opforge C ABI {}.{}, runs on hosts {}.{}+)",
            manifest.library.name,
            manifest.library.version,
            abi.major,
            abi.minor,
            abi.major,
            abi.min_host_minor
        )?;
        match (&manifest.ops, &manifest.kernels) {
            (Some(ops), Some(kernels)) => {
                for op in ops {
                    let shape = if op.shape_fn { ", shape function" } else { "" };
                    writeln!(
                        out,
                        "  op {}({}) -> ({}){shape}",
                        op.name,
                        op.inputs.join(", "),
                        op.outputs.join(", ")
                    )?;
                }
                for k in kernels {
                    let c: Vec<String> = k
                        .constraints
                        .iter()
                        .map(|(a, t)| {
                            let names: Vec<&str> = t.iter().map(|d| d.proto_name()).collect();
                            format!("{a} in [{}]", names.join(", "))
                        })
                        .collect();
                    writeln!(out, "  kernel {} on {} {}", k.op, k.device, c.join("; "))?;
                }
            }
            _ => writeln!(
                out,
                "  (no declaration: the library registers its ops by code when loaded)"
            )?,
        }
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
