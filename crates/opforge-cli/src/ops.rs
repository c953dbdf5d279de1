//! `opforge ops list|show|export`: the registered ops.

use super::{CliError, ExportFormat, ShowFormat};
use opforge::op_def::WithoutKernel;
use opforge::{proto, signature, Registry};
use std::io::Write;

/// Prints every registered op's name, one per line, sorted. An op with no
/// kernel on any device gets `  # no kernel` after its name, with the
/// reason when the op declares one ([`WithoutKernel`]).
pub fn list(registry: &Registry, out: &mut dyn Write) -> Result<(), CliError> {
    for name in registry.names() {
        match kernel_note(registry, &name) {
            Some(note) => writeln!(out, "{name}  # {note}")?,
            None => writeln!(out, "{name}")?,
        }
    }
    Ok(())
}

/// "no kernel" (with the declared reason) for an op without any kernel.
fn kernel_note(registry: &Registry, name: &str) -> Option<String> {
    if !registry.kernels_for(name).is_empty() {
        return None;
    }
    Some(match registry.attr::<WithoutKernel>(name) {
        Some(why) => format!("no kernel: {why}"),
        None => "no kernel".to_string(),
    })
}

/// The `Kernels:` line of `ops show`: the device types with a kernel, or
/// why there is none.
fn kernels_line(registry: &Registry, name: &str) -> String {
    if let Some(note) = kernel_note(registry, name) {
        return format!("Kernels: none ({note})");
    }
    let mut devices: Vec<String> = registry
        .kernels_for(name)
        .iter()
        .map(|k| k.def.device_type.clone())
        .collect();
    devices.sort();
    devices.dedup();
    format!("Kernels: {}", devices.join(", "))
}

/// Prints op `name` in `format`; `NotFound` (with suggestions) if it is not
/// registered.
pub fn show(
    registry: &Registry,
    name: &str,
    format: ShowFormat,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let data = registry.lookup(name)?;
    let op: &proto::OpDef = &data.op_def;
    match format {
        ShowFormat::Text => {
            write!(out, "{}", signature::describe(op))?;
            writeln!(out, "{}", kernels_line(registry, name))?;
        }
        ShowFormat::Pbtxt => write!(out, "{}", proto::to_text(op))?,
        ShowFormat::Json => writeln!(out, "{}", pretty_json(&proto::to_json(op)))?,
    }
    Ok(())
}

/// Prints every registered OpDef as one OpList in `format`.
pub fn export(
    registry: &Registry,
    format: ExportFormat,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let list = registry.op_list();
    match format {
        ExportFormat::Pbtxt => write!(out, "{}", proto::to_text(&list))?,
        ExportFormat::Binary => out.write_all(&proto::to_binary(&list))?,
        ExportFormat::Json => writeln!(out, "{}", pretty_json(&proto::to_json(&list)))?,
    }
    Ok(())
}

fn pretty_json(value: &serde_json::Value) -> String {
    // Serializing a `Value` cannot fail: every map key is a string.
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge::{Code, OpDefBuilder};

    fn registry() -> Registry {
        let r = Registry::new();
        r.register_op(
            OpDefBuilder::new("ZeroOut")
                .attr("T: realnumbertype = DT_INT32")
                .attr("preserve_index: int = 0")
                .input("to_zero: T")
                .output("zeroed: T"),
        )
        .unwrap();
        r.register_op(OpDefBuilder::new("Abc")).unwrap();
        r
    }

    fn output(f: impl FnOnce(&mut Vec<u8>) -> Result<(), CliError>) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out).unwrap();
        out
    }

    #[test]
    fn list_is_sorted() {
        let out = output(|o| list(&registry(), o));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Abc  # no kernel\nZeroOut  # no kernel\n"
        );
    }

    #[test]
    fn list_and_show_say_which_ops_have_kernels() {
        struct Noop;
        impl opforge::kernel::OpKernel for Noop {
            fn compute(&self, _: &mut opforge::kernel::OpKernelContext<'_>) -> opforge::Result<()> {
                Ok(())
            }
        }
        impl opforge::kernel::CreateKernel for Noop {
            fn create(_: &opforge::kernel::OpKernelConstruction<'_>) -> opforge::Result<Self> {
                Ok(Noop)
            }
        }
        let r = registry();
        r.register_op(OpDefBuilder::new("Marker").without_kernel("an annotation only"))
            .unwrap();
        r.register_kernel(opforge::kernel::KernelRegistration::of::<Noop>(
            opforge::kernel::KernelDefBuilder::new("ZeroOut"),
        ))
        .unwrap();
        let out = String::from_utf8(output(|o| list(&r, o))).unwrap();
        assert_eq!(
            out,
            "Abc  # no kernel\nMarker  # no kernel: an annotation only\nZeroOut\n"
        );
        let show_text =
            |name| String::from_utf8(output(|o| show(&r, name, ShowFormat::Text, o))).unwrap();
        assert!(
            show_text("ZeroOut").ends_with("Kernels: CPU\n"),
            "{}",
            show_text("ZeroOut")
        );
        assert!(show_text("Marker").ends_with("Kernels: none (no kernel: an annotation only)\n"));
        assert!(show_text("Abc").ends_with("Kernels: none (no kernel)\n"));
    }

    #[test]
    fn show_formats() {
        let r = registry();
        let text = output(|o| show(&r, "ZeroOut", ShowFormat::Text, o));
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("zero_out(to_zero, preserve_index=0, name=None)"),
            "{text}"
        );

        let pbtxt = output(|o| show(&r, "ZeroOut", ShowFormat::Pbtxt, o));
        let op: proto::OpDef = proto::from_text(std::str::from_utf8(&pbtxt).unwrap()).unwrap();
        assert_eq!(op, r.op_def("ZeroOut").unwrap());

        let json = output(|o| show(&r, "ZeroOut", ShowFormat::Json, o));
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(proto::from_json::<proto::OpDef>(&value).unwrap(), op);

        let mut sink = Vec::new();
        match show(&r, "ZeroOutt", ShowFormat::Text, &mut sink) {
            Err(CliError::Status(s)) => {
                assert_eq!(s.code(), Code::NotFound);
                assert!(s.message().contains("Did you mean 'ZeroOut'?"), "{s}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn export_formats_round_trip() {
        let r = registry();
        let expected = r.op_list();
        let bin = output(|o| export(&r, ExportFormat::Binary, o));
        assert_eq!(proto::from_binary::<proto::OpList>(&bin).unwrap(), expected);
        let text = output(|o| export(&r, ExportFormat::Pbtxt, o));
        let parsed: proto::OpList = proto::from_text(std::str::from_utf8(&text).unwrap()).unwrap();
        assert_eq!(parsed, expected);
        let json = output(|o| export(&r, ExportFormat::Json, o));
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(proto::from_json::<proto::OpList>(&value).unwrap(), expected);
    }
}
