//! The header and the Rust mirror are the same ABI: this test reads
//! `include/opforge/opforge.h`, generates a C program that prints what the
//! system C compiler makes of it (sizeof, alignment, offsetof and sizeof of
//! every field, whether each field's and typedef's C type is the one the
//! Rust mirror declares, the value of every constant), runs it, and compares
//! every figure with `opforge_abi` (`layout::STRUCTS`, `TYPEDEFS`,
//! `OPAQUE_TYPES`, `layout::INT_CONSTANTS`, `layout::STR_CONSTANTS`). It
//! also compiles the header as strict C99 and as C++11, and checks that
//! every frozen minor under `tests/frozen/` is a prefix of the current
//! header and keeps its pinned layout hash.
//!
//! The compiler is `$CC` (default `cc`) and `$CXX` (default `c++`); without
//! one the test fails and says so: CI has one, and the ABI is not tested
//! without it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use opforge_abi::layout::{self, ConstValue, FieldLayout, StructLayout};
use opforge_abi::{KNOWN_LAYOUTS, OPAQUE_TYPES, TYPEDEFS};

// ---------------------------------------------------------------------------
// Paths and compilers
// ---------------------------------------------------------------------------

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

fn header_path() -> PathBuf {
    include_dir().join("opforge/opforge.h")
}

fn frozen_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/frozen")
}

/// A fresh directory for one test's files.
fn work_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("opforge-abi-layout")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The compiler named by `var` (or `default`), checked to run.
fn compiler(var: &str, default: &str) -> String {
    let cc = std::env::var(var).ok().filter(|s| !s.trim().is_empty());
    let cc = cc.unwrap_or_else(|| default.to_string());
    match Command::new(&cc).arg("--version").output() {
        Ok(out) if out.status.success() => cc,
        Ok(out) => panic!(
            "the C ABI test needs a working compiler, but `{cc} --version` failed ({}): {}\n\
             Install gcc or clang, or set ${var} to one.",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "the C ABI test needs a C/C++ compiler, and `{cc}` cannot be run ({e}).\n\
             Install gcc or clang (e.g. `apt-get install gcc g++`), or set ${var} to one."
        ),
    }
}

fn cc() -> String {
    compiler("CC", "cc")
}

fn cxx() -> String {
    compiler("CXX", "c++")
}

/// Runs `cmd`, panicking with its output on failure; returns stdout.
fn run(mut cmd: Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

// ---------------------------------------------------------------------------
// A reader for the header's declarations
// ---------------------------------------------------------------------------

/// What the header declares, by name and in header order (types are not
/// interpreted here: the C compiler judges them).
#[derive(Debug, Default)]
struct Header {
    structs: Vec<CStruct>,
    opaque: Vec<String>,
    /// Scalar and function-pointer typedefs: (name, normalized declaration).
    typedefs: Vec<(String, String)>,
    int_consts: Vec<String>,
    str_consts: Vec<String>,
}

#[derive(Debug, Clone)]
struct CStruct {
    name: String,
    fields: Vec<CField>,
}

#[derive(Debug, Clone)]
struct CField {
    name: String,
    /// The declaration, whitespace-normalized (for the frozen check).
    decl: String,
}

fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c as char);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1] as char);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_str = false;
            }
            i += 1;
        } else if c == b'"' {
            in_str = true;
            out.push('"');
            i += 1;
        } else if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").expect("unterminated comment") + i + 4;
            // Keep line structure (defines are line-based).
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            out.push(' ');
            i = end;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

fn normalize(decl: &str) -> String {
    let words: Vec<&str> = decl.split_whitespace().collect();
    let mut s = words.join(" ");
    for (from, to) in [("( ", "("), (" )", ")"), (" ,", ","), (" *", "*")] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The declared name of a field or typedef declaration.
fn declared_name(decl: &str) -> String {
    if let Some(p) = decl.find("(*") {
        let rest = &decl[p + 2..];
        return rest[..rest.find(')').expect("(*name)")].trim().to_string();
    }
    let decl = match decl.find('[') {
        Some(p) => &decl[..p],
        None => decl,
    };
    let decl = decl.trim_end();
    let start = decl
        .char_indices()
        .rev()
        .find(|&(_, c)| !is_ident_char(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    decl[start..].to_string()
}

fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut h = Header::default();

    // #define OPFORGE_NAME value (object-like, public: no trailing `_`).
    let mut defined: BTreeMap<String, String> = BTreeMap::new();
    let mut order = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix("#define ") else {
            continue;
        };
        let rest = rest.trim_start();
        let name_len = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
        let (name, body) = rest.split_at(name_len);
        if !name.starts_with("OPFORGE_") || name.ends_with('_') || body.starts_with('(') {
            continue;
        }
        let body = body.trim().to_string();
        if !defined.contains_key(name) {
            order.push(name.to_string());
        }
        defined.insert(name.to_string(), body);
    }
    fn is_int(body: &str, defined: &BTreeMap<String, String>) -> bool {
        let b = body.trim_start_matches('(').trim_start_matches('-');
        if b.starts_with(|c: char| c.is_ascii_digit()) {
            return true;
        }
        match defined.get(body) {
            Some(inner) => is_int(inner, defined),
            None => false,
        }
    }
    for name in order {
        let body = &defined[&name];
        if body.starts_with('"') {
            h.str_consts.push(name);
        } else if is_int(body, &defined) {
            h.int_consts.push(name);
        }
    }

    // typedefs: scan statement by statement at file scope.
    let mut rest = text.as_str();
    while let Some(p) = rest.find("typedef ") {
        let at_word_start = p == 0 || !is_ident_char(rest[..p].chars().next_back().unwrap());
        let stmt_start = &rest[p..];
        if !at_word_start {
            rest = &stmt_start[8..];
            continue;
        }
        let brace = stmt_start.find('{');
        let semi = stmt_start.find(';').expect("typedef without ;");
        if let Some(b) = brace.filter(|&b| b < semi) {
            // typedef struct NAME { body } NAME;
            let head = normalize(&stmt_start[..b]);
            let name = head
                .strip_prefix("typedef struct ")
                .unwrap_or_else(|| panic!("unexpected typedef {head}"))
                .trim()
                .to_string();
            let close = b + stmt_start[b..].find('}').expect("struct without }");
            let body = &stmt_start[b + 1..close];
            let fields = body
                .split(';')
                .map(normalize)
                .filter(|d| !d.is_empty())
                .map(|decl| CField {
                    name: declared_name(&decl),
                    decl,
                })
                .collect();
            let tail = &stmt_start[close + 1..];
            let end = tail.find(';').unwrap();
            assert_eq!(
                tail[..end].trim(),
                name,
                "typedef struct {name} {{..}} must be named {name}"
            );
            h.structs.push(CStruct { name, fields });
            rest = &tail[end + 1..];
        } else {
            let decl = normalize(&stmt_start[..semi]);
            let name = declared_name(&decl);
            if let Some(s) = decl.strip_prefix("typedef struct ") {
                // typedef struct NAME NAME;
                let s: Vec<&str> = s.split_whitespace().collect();
                assert!(s.len() == 2 && s[0] == s[1], "unexpected typedef {decl}");
                h.opaque.push(name);
            } else if name.starts_with("Opforge") {
                h.typedefs.push((name, decl));
            }
            rest = &stmt_start[semi + 1..];
        }
    }
    h
}

// ---------------------------------------------------------------------------
// Rust types as C types
// ---------------------------------------------------------------------------

/// Renders a Rust type as this crate writes it (`stringify!` of the field
/// or typedef) as a C type name, for `__builtin_types_compatible_p`.
fn rust_to_c(ty: &str) -> String {
    let toks = tokenize(ty);
    let mut pos = 0;
    let c = parse_type(&toks, &mut pos);
    assert_eq!(pos, toks.len(), "trailing tokens in Rust type {ty:?}");
    c
}

fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '"' {
            let j = i + 1 + cs[i + 1..].iter().position(|&d| d == '"').unwrap();
            out.push(cs[i..=j].iter().collect());
            i = j + 1;
        } else if is_ident_char(c) || c == '#' {
            let j = i + cs[i..]
                .iter()
                .position(|&d| !(is_ident_char(d) || d == '#'))
                .unwrap_or(cs.len() - i);
            out.push(cs[i..j].iter().collect());
            i = j;
        } else if c == '-' && cs.get(i + 1) == Some(&'>') {
            out.push("->".into());
            i += 2;
        } else if c == ':' && cs.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

fn expect(toks: &[String], pos: &mut usize, want: &str) {
    assert_eq!(
        toks.get(*pos).map(String::as_str),
        Some(want),
        "in {toks:?} at {pos}"
    );
    *pos += 1;
}

fn parse_type(toks: &[String], pos: &mut usize) -> String {
    let t = toks[*pos].clone();
    *pos += 1;
    match t.as_str() {
        "*" => {
            let q = toks[*pos].clone();
            *pos += 1;
            let inner = parse_type(toks, pos);
            match q.as_str() {
                "const" => format!("{inner} const*"),
                "mut" => format!("{inner}*"),
                _ => panic!("pointer qualifier {q}"),
            }
        }
        "[" => {
            let inner = parse_type(toks, pos);
            expect(toks, pos, ";");
            let n = toks[*pos].clone();
            *pos += 1;
            expect(toks, pos, "]");
            format!("{inner}[{n}]")
        }
        "(" => {
            expect(toks, pos, ")");
            "void".into()
        }
        _ => {
            // A path: keep its last segment.
            let mut name = t;
            while toks.get(*pos).map(String::as_str) == Some("::") {
                name = toks[*pos + 1].clone();
                *pos += 2;
            }
            if name == "Option" {
                expect(toks, pos, "<");
                let f = parse_fn(toks, pos);
                if toks.get(*pos).map(String::as_str) == Some(",") {
                    *pos += 1;
                }
                expect(toks, pos, ">");
                return f;
            }
            match name.as_str() {
                "i8" => "int8_t",
                "u8" => "uint8_t",
                "i16" => "int16_t",
                "u16" => "uint16_t",
                "i32" => "int32_t",
                "u32" => "uint32_t",
                "i64" => "int64_t",
                "u64" => "uint64_t",
                "usize" => "size_t",
                "f32" => "float",
                "f64" => "double",
                "c_void" => "void",
                "c_char" => "char",
                other => {
                    assert!(other.starts_with("Opforge"), "unexpected Rust type {other}");
                    other
                }
            }
            .to_string()
        }
    }
}

/// `unsafe extern "C" fn(name: T, ..) -> R` as `R (*)(T, ..)`.
fn parse_fn(toks: &[String], pos: &mut usize) -> String {
    for w in ["unsafe", "extern", "\"C\"", "fn", "("] {
        expect(toks, pos, w);
    }
    let mut params = Vec::new();
    while toks[*pos] != ")" {
        // An optional `name:`.
        if toks.get(*pos + 1).map(String::as_str) == Some(":") {
            *pos += 2;
        }
        params.push(parse_type(toks, pos));
        if toks[*pos] == "," {
            *pos += 1;
        }
    }
    expect(toks, pos, ")");
    let ret = if toks.get(*pos).map(String::as_str) == Some("->") {
        *pos += 1;
        parse_type(toks, pos)
    } else {
        "void".into()
    };
    let params = if params.is_empty() {
        "void".into()
    } else {
        params.join(", ")
    };
    format!("{ret} (*)({params})")
}

// ---------------------------------------------------------------------------
// The probe program
// ---------------------------------------------------------------------------

/// What the C compiler says about a header.
#[derive(Debug, Default)]
struct Probe {
    structs: Vec<StructLayout>,
    ints: BTreeMap<String, i128>,
    strs: BTreeMap<String, String>,
    /// (what, C type, Rust type) whose types are not compatible.
    type_mismatches: Vec<(String, String, String)>,
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// Generates, compiles and runs the probe of the header under `include`
/// (parsed as `h`). With `rust_types`, also asks the compiler whether each
/// field and typedef has the C type the Rust mirror declares.
fn probe(include: &Path, h: &Header, rust_types: bool, dir: &Path) -> Probe {
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

fn layout_figures(s: &StructLayout) -> (usize, usize, Vec<(&str, usize, usize)>) {
    (
        s.size,
        s.align,
        s.fields
            .iter()
            .map(|f| (f.name, f.offset, f.size))
            .collect(),
    )
}

fn hex(h: u64) -> String {
    format!("{h:016x}")
}

// ---------------------------------------------------------------------------
// The header and the Rust mirror agree
// ---------------------------------------------------------------------------

#[test]
fn the_header_and_the_rust_mirror_agree() {
    let text = std::fs::read_to_string(header_path()).unwrap();
    let h = parse_header(&text);

    // Names first (a field missing on one side would not compile below).
    let c_structs: Vec<(&str, Vec<&str>)> = h
        .structs
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.fields.iter().map(|f| f.name.as_str()).collect(),
            )
        })
        .collect();
    let r_structs: Vec<(&str, Vec<&str>)> = layout::STRUCTS
        .iter()
        .map(|s| (s.name, s.fields.iter().map(|f| f.name).collect()))
        .collect();
    assert_eq!(
        c_structs, r_structs,
        "the structs and fields of opforge.h (left) and of opforge_abi::layout::STRUCTS \
         (right) differ: same structs, same fields, same order"
    );
    let r_opaque: Vec<&str> = OPAQUE_TYPES.to_vec();
    assert_eq!(
        h.opaque, r_opaque,
        "opaque types: header (left) vs OPAQUE_TYPES (right)"
    );
    let c_typedefs: Vec<&str> = h.typedefs.iter().map(|(n, _)| n.as_str()).collect();
    let r_typedefs: Vec<&str> = TYPEDEFS.iter().map(|t| t.name).collect();
    assert_eq!(
        c_typedefs, r_typedefs,
        "typedefs: header (left) vs TYPEDEFS (right)"
    );
    let r_ints: Vec<&str> = layout::INT_CONSTANTS.iter().map(|c| c.name).collect();
    assert_eq!(
        h.int_consts, r_ints,
        "integer constants: header (left) vs INT_CONSTANTS (right)"
    );
    let r_strs: Vec<&str> = layout::STR_CONSTANTS.iter().map(|c| c.name).collect();
    assert_eq!(
        h.str_consts, r_strs,
        "string constants: header (left) vs STR_CONSTANTS (right)"
    );

    // Then the compiler's figures.
    let p = probe(&include_dir(), &h, true, &work_dir("mirror"));
    let mut errors = Vec::new();
    for (c, r) in p.structs.iter().zip(layout::STRUCTS) {
        if layout_figures(c) != layout_figures(r) {
            errors.push(format!(
                "{}: C (size, align, [(field, offset, size)]) = {:?}\n   Rust = {:?}",
                c.name,
                layout_figures(c),
                layout_figures(r)
            ));
        }
    }
    for (what, c, rust) in &p.type_mismatches {
        errors.push(format!(
            "{what}: the C type is not compatible with the Rust type `{rust}` (as C: `{c}`)"
        ));
    }
    for k in layout::INT_CONSTANTS {
        let ConstValue::Int(v) = k.value else {
            unreachable!()
        };
        if p.ints.get(k.name) != Some(&v) {
            errors.push(format!("{}: C {:?}, Rust {v}", k.name, p.ints.get(k.name)));
        }
    }
    for k in layout::STR_CONSTANTS {
        let ConstValue::Str(v) = k.value else {
            unreachable!()
        };
        if p.strs.get(k.name).map(String::as_str) != Some(v) {
            errors.push(format!(
                "{}: C {:?}, Rust {v:?}",
                k.name,
                p.strs.get(k.name)
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "opforge.h and opforge-abi differ:\n - {}",
        errors.join("\n - ")
    );

    // The header's hash is the hash of the header's own layout (as the C
    // compiler sees it), and the pinned one.
    let c_hash = layout::hash_structs(&p.structs);
    assert_eq!(
        hex(c_hash),
        hex(p.ints["OPFORGE_LAYOUT_HASH"] as u64),
        "OPFORGE_LAYOUT_HASH in opforge.h is not the hash of its layout"
    );
    assert_eq!(hex(c_hash), hex(opforge_abi::layout_hash()));
    assert_eq!(p.strs["OPFORGE_LAYOUT_HASH_STR"], hex(c_hash));
}

#[test]
fn a_rust_type_renders_as_its_c_type() {
    assert_eq!(rust_to_c("* const c_char"), "char const*");
    assert_eq!(rust_to_c("*mut *mut core::ffi::c_void"), "void**");
    assert_eq!(rust_to_c("[u8; 4]"), "uint8_t[4]");
    assert_eq!(
        rust_to_c(r#"Option<unsafe extern "C" fn(a: *const OpforgeStatus, u32) -> OpforgeCode>"#),
        "OpforgeCode (*)(OpforgeStatus const*, uint32_t)"
    );
    assert_eq!(
        rust_to_c(r#"Option<unsafe extern "C" fn()>"#),
        "void (*)(void)"
    );
}

#[test]
fn the_header_reader_finds_every_declaration() {
    let h = parse_header(
        "/* c */ #define OPFORGE_A 1\n#define OPFORGE_B (-1)\n#define OPFORGE_C OPFORGE_A\n\
         #define OPFORGE_S \"x\" /* no */\n#define OPFORGE_F(x) x\n#define OPFORGE_I_ 3\n\
         typedef int32_t OpforgeCode;\ntypedef struct OpforgeX OpforgeX;\n\
         typedef void (*OpforgeFn)(void* a, OpforgeStr b);\n\
         typedef struct OpforgeS {\n  size_t struct_size; /* x; y */\n  uint8_t m[4];\n  \
         OpforgeCode (*call)(OpforgeX* x,\n    size_t n);\n} OpforgeS;\n",
    );
    assert_eq!(h.int_consts, ["OPFORGE_A", "OPFORGE_B", "OPFORGE_C"]);
    assert_eq!(h.str_consts, ["OPFORGE_S"]);
    assert_eq!(h.opaque, ["OpforgeX"]);
    let names: Vec<&str> = h.typedefs.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["OpforgeCode", "OpforgeFn"]);
    let s = &h.structs[0];
    let fields: Vec<(&str, &str)> = s
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.decl.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("struct_size", "size_t struct_size"),
            ("m", "uint8_t m[4]"),
            ("call", "OpforgeCode (*call)(OpforgeX* x, size_t n)"),
        ]
    );
}

// ---------------------------------------------------------------------------
// The header compiles as strict C99 and as C++11
// ---------------------------------------------------------------------------

/// A translation unit that uses every macro of the header a plugin uses.
const PLUGIN_TU: &str = r#"#include "opforge/opforge.h"

OPFORGE_LIBRARY("layout_test", "0.1.0");
OPFORGE_MANIFEST_OP("\"name\":\"ZeroOut\",\"inputs\":[\"to_zero: int32\"],\"outputs\":[\"zeroed: int32\"]");
OPFORGE_MANIFEST_KERNEL("\"op\":\"ZeroOut\",\"device\":\"CPU\"");
OPFORGE_MANIFEST_GRADIENT("\"op\":\"ZeroOut\",\"form\":\"not_differentiable\"");

static const OpforgeHostApi* opforge_host;

static OpforgeCode compute(void* state, OpforgeKernelCtx* ctx, OpforgeStatus* status) {
  OpforgeTensor view;
  OpforgeStr name = OPFORGE_STR_LIT("x");
  (void)state;
  (void)name;
  memset(&view, 0, sizeof view);
  view.struct_size = sizeof view;
  if (!OPFORGE_HAS_SLOT(opforge_host->kernel, input)) return OPFORGE_UNIMPLEMENTED;
  return opforge_host->kernel->input(ctx, 0, &view, status);
}

/* 1.1: the views entry, with output 0 declared like input 0. */
static OpforgeCode compute_views(void* state, OpforgeKernelCtx* ctx,
                                 const OpforgeKernelViews* views, OpforgeStatus* status) {
  const OpforgeTensor* in;
  const OpforgeTensor* out;
  (void)state;
  (void)ctx;
  (void)status;
  if (views->num_inputs < 1 || views->num_outputs < 1) return OPFORGE_INTERNAL;
  in = OPFORGE_ARRAY_AT(OpforgeTensor, views->inputs, 0);
  out = OPFORGE_ARRAY_AT(OpforgeTensor, views->outputs, 0);
  if (views->forwarded_from[0] == OPFORGE_NOT_FORWARDED && in->num_elements > 0)
    memcpy(out->data, in->data, (size_t)in->byte_len);
  return OPFORGE_OK;
}

OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* host, OpforgeRegistrar* registrar,
                                   OpforgeStatus* status) {
  static const OpforgeStr inputs[] = {OPFORGE_STR_LIT("to_zero: int32")};
  OpforgeOutputLike like;
  OpforgeOpDef def;
  OpforgeKernelDef k;
  OpforgeCode code;
  opforge_host = host;
  memset(&def, 0, sizeof def);
  def.struct_size = sizeof def;
  def.name = opforge_str("ZeroOut");
  def.inputs = inputs;
  def.num_inputs = 1;
  code = host->registration->op(registrar, &def, status);
  if (code != OPFORGE_OK) return code;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.op = opforge_str("ZeroOut");
  k.device_type = opforge_str("CPU");
  k.compute = compute;
  memset(&like, 0, sizeof like);
  like.struct_size = sizeof like;
  like.output = 0;
  like.input = 0;
  like.flags = OPFORGE_OUTPUT_FORWARD;
  k.compute_views = compute_views;
  k.output_like = &like;
  k.num_output_like = 1;
  if (OPFORGE_ARRAY_AT(OpforgeKernelDef, &k, 0)->struct_size != sizeof k) return OPFORGE_INTERNAL;
  return host->registration->kernel(registrar, &k, status);
}

void opforge_plugin_fini_v1(void) {}
"#;

const CXX_EXTRA: &str = r#"
#include <stdexcept>
static OpforgeCode throwing(void* state, OpforgeKernelCtx* ctx, OpforgeStatus* status) {
  OPFORGE_GUARD(status, {
    (void)state;
    (void)ctx;
    throw std::runtime_error("boom");
  })
}
static void destroying(void* state, void* user) {
  OPFORGE_GUARD_VOID({
    (void)state;
    (void)user;
    throw 1;
  })
}
OpforgeKernelComputeFn use_throwing = throwing;
OpforgeKernelDestroyFn use_destroying = destroying;
"#;

#[test]
fn the_header_compiles_as_strict_c99() {
    let dir = work_dir("c99");
    let src = dir.join("plugin.c");
    std::fs::write(&src, PLUGIN_TU).unwrap();
    let mut cmd = Command::new(cc());
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c"])
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(dir.join("plugin.o"));
    run(
        cmd,
        "compiling opforge.h as C99 with -Wall -Wextra -Werror -pedantic",
    );
}

#[test]
fn the_header_compiles_as_cxx11() {
    let dir = work_dir("cxx11");
    let src = dir.join("plugin.cc");
    std::fs::write(&src, format!("{PLUGIN_TU}{CXX_EXTRA}")).unwrap();
    let mut cmd = Command::new(cxx());
    cmd.args([
        "-std=c++11",
        "-fsyntax-only",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
    ])
    .arg("-I")
    .arg(include_dir())
    .arg(&src);
    run(cmd, "compiling opforge.h as C++11 (-fsyntax-only)");
}

// ---------------------------------------------------------------------------
// Frozen minors: append-only, pinned hashes
// ---------------------------------------------------------------------------

/// Constants whose value belongs to one minor.
const PER_MINOR: &[&str] = &[
    "OPFORGE_ABI_MINOR",
    "OPFORGE_LAYOUT_HASH",
    "OPFORGE_LAYOUT_HASH_STR",
    "OPFORGE_MIN_HOST_MINOR",
];

/// Why `new` is not an append-only extension of `old` (empty: it is).
fn extension_errors(old: &Header, old_p: &Probe, new: &Header, new_p: &Probe) -> Vec<String> {
    let mut errs = Vec::new();
    let new_structs: BTreeMap<&str, (&CStruct, &StructLayout)> = new
        .structs
        .iter()
        .zip(&new_p.structs)
        .map(|(s, l)| (s.name.as_str(), (s, l)))
        .collect();
    for (os, ol) in old.structs.iter().zip(&old_p.structs) {
        let Some(&(ns, nl)) = new_structs.get(os.name.as_str()) else {
            errs.push(format!("struct {} was removed", os.name));
            continue;
        };
        if nl.align != ol.align {
            errs.push(format!(
                "{}: alignment {} became {}",
                os.name, ol.align, nl.align
            ));
        }
        if nl.size < ol.size {
            errs.push(format!(
                "{}: size {} shrank to {}",
                os.name, ol.size, nl.size
            ));
        }
        for (i, (of, ofl)) in os.fields.iter().zip(ol.fields).enumerate() {
            match ns.fields.get(i).zip(nl.fields.get(i)) {
                None => errs.push(format!("{}.{}: removed", os.name, of.name)),
                Some((nf, nfl)) => {
                    if nf.decl != of.decl {
                        errs.push(format!(
                            "{} field {i}: `{}` became `{}` (fields are only appended, never \
                             renamed, retyped, reordered or inserted)",
                            os.name, of.decl, nf.decl
                        ));
                    }
                    if (nfl.offset, nfl.size) != (ofl.offset, ofl.size) {
                        errs.push(format!(
                            "{}.{}: offset/size ({}, {}) became ({}, {})",
                            os.name, of.name, ofl.offset, ofl.size, nfl.offset, nfl.size
                        ));
                    }
                }
            }
        }
    }
    let new_typedefs: BTreeMap<&str, &str> = new
        .typedefs
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    for (n, d) in &old.typedefs {
        match new_typedefs.get(n.as_str()) {
            None => errs.push(format!("typedef {n} was removed")),
            Some(nd) if nd != d => errs.push(format!("typedef {n}: `{d}` became `{nd}`")),
            _ => {}
        }
    }
    let new_opaque: BTreeSet<&str> = new.opaque.iter().map(String::as_str).collect();
    for o in &old.opaque {
        if !new_opaque.contains(o.as_str()) {
            errs.push(format!("opaque type {o} was removed"));
        }
    }
    for (k, v) in &old_p.ints {
        if PER_MINOR.contains(&k.as_str()) {
            continue;
        }
        match new_p.ints.get(k) {
            None => errs.push(format!("constant {k} was removed")),
            Some(nv) if nv != v => errs.push(format!("constant {k}: {v} became {nv}")),
            _ => {}
        }
    }
    for (k, v) in &old_p.strs {
        if PER_MINOR.contains(&k.as_str()) {
            continue;
        }
        match new_p.strs.get(k) {
            None => errs.push(format!("constant {k} was removed")),
            Some(nv) if nv != v => errs.push(format!("constant {k}: {v:?} became {nv:?}")),
            _ => {}
        }
    }
    if new_p.ints.get("OPFORGE_ABI_MAJOR") != old_p.ints.get("OPFORGE_ABI_MAJOR") {
        errs.push("OPFORGE_ABI_MAJOR changed: a new major starts a new frozen series".into());
    }
    errs
}

/// Every frozen header: (major, minor, directory), oldest first.
fn frozen_headers() -> Vec<(u32, u32, PathBuf)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(frozen_dir()).expect("tests/frozen exists") {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let (ma, mi) = name
            .split_once('.')
            .unwrap_or_else(|| panic!("tests/frozen/{name}: expected MAJOR.MINOR"));
        out.push((ma.parse().unwrap(), mi.parse().unwrap(), e.path()));
    }
    out.sort();
    out
}

#[test]
fn every_frozen_minor_is_a_prefix_of_the_current_header() {
    let current_text = std::fs::read_to_string(header_path()).unwrap();
    let current = parse_header(&current_text);
    let current_p = probe(&include_dir(), &current, false, &work_dir("frozen-current"));
    let frozen = frozen_headers();
    assert!(
        frozen.iter().any(|&(ma, mi, _)| (ma, mi) == (1, 0)),
        "tests/frozen/1.0 is missing"
    );
    let mut errors = Vec::new();
    // The first size of each struct: its size in the oldest frozen header
    // that has it.
    let mut first_size: BTreeMap<String, usize> = BTreeMap::new();
    for (major, minor, dir) in &frozen {
        let text = std::fs::read_to_string(dir.join("opforge/opforge.h")).unwrap();
        let old = parse_header(&text);
        let old_p = probe(
            dir,
            &old,
            false,
            &work_dir(&format!("frozen-{major}.{minor}")),
        );
        let v = format!("{major}.{minor}");
        if old_p.ints["OPFORGE_ABI_MAJOR"] != *major as i128
            || old_p.ints["OPFORGE_ABI_MINOR"] != *minor as i128
        {
            errors.push(format!(
                "tests/frozen/{v}: the header defines another version"
            ));
        }
        // Its hash is its layout's, and pinned.
        let hash = layout::hash_structs(&old_p.structs);
        if hash != old_p.ints["OPFORGE_LAYOUT_HASH"] as u64 {
            errors.push(format!(
                "tests/frozen/{v}: OPFORGE_LAYOUT_HASH is not the hash of its layout ({})",
                hex(hash)
            ));
        }
        match opforge_abi::known_layout_hash(*major, *minor) {
            Some(pinned) if pinned == hash => {}
            other => errors.push(format!(
                "KNOWN_LAYOUTS pins {:?} for {v}, its frozen header hashes to {}",
                other.map(hex),
                hex(hash)
            )),
        }
        for l in &old_p.structs {
            first_size.entry(l.name.to_string()).or_insert(l.size);
        }
        for e in extension_errors(&old, &old_p, &current, &current_p) {
            errors.push(format!("{v} -> current: {e}"));
        }
    }
    // Every pinned minor up to the current one has a frozen header, except
    // the current minor while it is unreleased... which is still pinned:
    // the pin is what a released library carries, so freeze it too.
    for &(ma, mi, _) in KNOWN_LAYOUTS {
        if !frozen.iter().any(|&(fa, fi, _)| (fa, fi) == (ma, mi)) {
            errors.push(format!(
                "KNOWN_LAYOUTS pins {ma}.{mi}, but tests/frozen/{ma}.{mi} is missing"
            ));
        }
    }
    // Versioned structs accept struct_size down to their first size.
    for l in layout::STRUCTS {
        let expect = first_size.get(l.name).copied().unwrap_or(l.size);
        if l.min_size != expect {
            errors.push(format!(
                "{}: min_size {} in opforge-abi, but its first released size is {expect}",
                l.name, l.min_size
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "frozen ABI check failed:\n - {}",
        errors.join("\n - ")
    );
}

/// The frozen check itself catches each kind of break.
#[test]
fn the_frozen_check_catches_breaks() {
    let base = "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n} OpforgeA;\n\
                typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n";
    let cases: &[(&str, &str, bool)] = &[
        ("identical", base, true),
        (
            "a field appended",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n uint32_t y;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            true,
        ),
        (
            "a struct added",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n} OpforgeA;\n\
             typedef struct OpforgeC {\n size_t struct_size;\n} OpforgeC;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            true,
        ),
        (
            "a field inserted",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t w;\n uint32_t x;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
        (
            "a field retyped",
            "typedef struct OpforgeA {\n size_t struct_size;\n int32_t x;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
        (
            "a field renamed",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t y;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
        (
            "a struct removed",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n} OpforgeA;\n",
            false,
        ),
        (
            "a field removed",
            "typedef struct OpforgeA {\n size_t struct_size;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
    ];
    let dir = work_dir("frozen-check");
    let probe_of = |name: &str, text: &str| {
        let inc = dir.join(name);
        std::fs::create_dir_all(inc.join("opforge")).unwrap();
        let full = format!(
            "#include <stddef.h>\n#include <stdint.h>\n#define OPFORGE_ABI_MAJOR 1\n{text}"
        );
        std::fs::write(inc.join("opforge/opforge.h"), &full).unwrap();
        let h = parse_header(&full);
        let p = probe(&inc, &h, false, &inc);
        (h, p)
    };
    let (old, old_p) = probe_of("base", base);
    for (i, (what, text, ok)) in cases.iter().enumerate() {
        let (new, new_p) = probe_of(&format!("case{i}"), text);
        let errs = extension_errors(&old, &old_p, &new, &new_p);
        assert_eq!(errs.is_empty(), *ok, "{what}: {errs:?}");
    }
}
