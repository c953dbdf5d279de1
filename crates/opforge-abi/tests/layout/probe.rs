//! The probe program: what the C compiler makes of a header.

use super::header::{rust_to_c, Header};
use super::support::{cc, run};
use opforge_abi::layout::{self, FieldLayout, StructLayout};
use opforge_abi::TYPEDEFS;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

// ---------------------------------------------------------------------------
// The probe program
// ---------------------------------------------------------------------------

/// What the C compiler says about a header.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    pub(crate) structs: Vec<StructLayout>,
    pub(crate) ints: BTreeMap<String, i128>,
    pub(crate) strs: BTreeMap<String, String>,
    /// (what, C type, Rust type) whose types are not compatible.
    pub(crate) type_mismatches: Vec<(String, String, String)>,
}

pub(crate) fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// Generates, compiles and runs the probe of the header under `include`
/// (parsed as `h`). With `rust_types`, also asks the compiler whether each
/// field and typedef has the C type the Rust mirror declares.
pub(crate) fn probe(include: &Path, h: &Header, rust_types: bool, dir: &Path) -> Probe {
    let mut c = String::new();
    c.push_str("#include <stdio.h>\n#include <stddef.h>\n#include \"opforge/opforge.h\"\n\n");
    c.push_str(
        "static void pi(const char* name, int neg, long long s, unsigned long long u) {\n  \
         if (neg) printf(\"int %s %lld\\n\", name, s); else printf(\"int %s %llu\\n\", name, u);\n}\n",
    );
    c.push_str("#define PI(n) pi(#n, (n) < 0, (long long)(n), (unsigned long long)(n))\n");
    c.push_str(
        "#define TC(what, a, b) printf(\"type %s %d\\n\", what, __builtin_types_compatible_p(a, b))\n\n",
    );
    c.push_str("int main(void) {\n");
    for s in &h.structs {
        let n = &s.name;
        writeln!(
            c,
            "  printf(\"struct {n} %zu %zu\\n\", sizeof({n}), _Alignof({n}));"
        )
        .unwrap();
        for f in &s.fields {
            let m = &f.name;
            writeln!(
                c,
                "  printf(\"field {n} {m} %zu %zu\\n\", offsetof({n}, {m}), sizeof((({n}*)0)->{m}));"
            )
            .unwrap();
        }
    }
    for k in &h.int_consts {
        writeln!(c, "  PI({k});").unwrap();
    }
    for k in &h.str_consts {
        writeln!(c, "  printf(\"str {k} %s\\n\", {k});").unwrap();
    }
    if rust_types {
        for s in layout::STRUCTS {
            for f in s.fields {
                let what = format!("{}.{}", s.name, f.name);
                writeln!(
                    c,
                    "  TC(\"{what}\", __typeof__((({}*)0)->{}), {});",
                    s.name,
                    f.name,
                    rust_to_c(f.rust_type)
                )
                .unwrap();
            }
        }
        for t in TYPEDEFS {
            writeln!(
                c,
                "  TC(\"{}\", {}, {});",
                t.name,
                t.name,
                rust_to_c(t.rust_type)
            )
            .unwrap();
        }
        // The exported entry points have the typedefs' types.
        c.push_str(
            "  TC(\"opforge_plugin_init_v1\", OpforgePluginInitFn, __typeof__(&opforge_plugin_init_v1));\n\
             \x20 TC(\"opforge_plugin_fini_v1\", OpforgePluginFiniFn, __typeof__(&opforge_plugin_fini_v1));\n",
        );
    }
    c.push_str("  return 0;\n}\n");

    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, &c).unwrap();
    let mut cmd = Command::new(cc());
    cmd.arg("-std=c11")
        .arg("-I")
        .arg(include)
        .arg(&src)
        .arg("-o")
        .arg(&exe);
    run(cmd, "compiling the layout probe");
    let out = run(Command::new(&exe), "running the layout probe");

    let mut p = Probe::default();
    let mut fields: BTreeMap<String, Vec<FieldLayout>> = BTreeMap::new();
    let mut heads = Vec::new();
    for line in out.lines() {
        let w: Vec<&str> = line.splitn(5, ' ').collect();
        match w[0] {
            "struct" => heads.push((
                w[1].to_string(),
                w[2].parse().unwrap(),
                w[3].parse().unwrap(),
            )),
            "field" => fields
                .entry(w[1].to_string())
                .or_default()
                .push(FieldLayout {
                    name: leak(w[2]),
                    offset: w[3].parse().unwrap(),
                    size: w[4].parse().unwrap(),
                    rust_type: "",
                }),
            "int" => {
                p.ints.insert(w[1].to_string(), w[2].parse().unwrap());
            }
            "str" => {
                let v = line.splitn(3, ' ').nth(2).unwrap_or("");
                p.strs.insert(w[1].to_string(), v.to_string());
            }
            "type" => {
                if w[2] != "1" {
                    p.type_mismatches
                        .push((w[1].to_string(), String::new(), String::new()));
                }
            }
            _ => panic!("unexpected probe output {line:?}"),
        }
    }
    for (name, size, align) in heads {
        let f = fields.remove(&name).unwrap_or_default();
        p.structs.push(StructLayout {
            name: leak(&name),
            size,
            align,
            min_size: 0,
            fields: Box::leak(f.into_boxed_slice()),
        });
    }
    // Name the types of each mismatch.
    for m in &mut p.type_mismatches {
        let rust = match m.0.split_once('.') {
            Some((s, f)) => layout::STRUCTS
                .iter()
                .find(|l| l.name == s)
                .and_then(|l| l.fields.iter().find(|x| x.name == f))
                .map(|x| x.rust_type),
            None => TYPEDEFS.iter().find(|t| t.name == m.0).map(|t| t.rust_type),
        };
        m.2 = rust.unwrap_or("(entry point typedef)").to_string();
        m.1 = rust.map(rust_to_c).unwrap_or_default();
    }
    p
}

pub(crate) fn layout_figures(s: &StructLayout) -> (usize, usize, Vec<(&str, usize, usize)>) {
    (
        s.size,
        s.align,
        s.fields
            .iter()
            .map(|f| (f.name, f.offset, f.size))
            .collect(),
    )
}

pub(crate) fn hex(h: u64) -> String {
    format!("{h:016x}")
}
