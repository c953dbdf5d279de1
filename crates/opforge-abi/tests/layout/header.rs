//! A reader for the header's declarations, and the Rust types of the
//! mirror rendered as C types.

use std::collections::BTreeMap;

// ---------------------------------------------------------------------------
// A reader for the header's declarations
// ---------------------------------------------------------------------------

/// What the header declares, by name and in header order (types are not
/// interpreted here: the C compiler judges them).
#[derive(Debug, Default)]
pub(crate) struct Header {
    pub(crate) structs: Vec<CStruct>,
    pub(crate) opaque: Vec<String>,
    /// Scalar and function-pointer typedefs: (name, normalized declaration).
    pub(crate) typedefs: Vec<(String, String)>,
    pub(crate) int_consts: Vec<String>,
    pub(crate) str_consts: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct CStruct {
    pub(crate) name: String,
    pub(crate) fields: Vec<CField>,
}

#[derive(Debug, Clone)]
pub(crate) struct CField {
    pub(crate) name: String,
    /// The declaration, whitespace-normalized (for the frozen check).
    pub(crate) decl: String,
}

pub(crate) fn strip_comments(text: &str) -> String {
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

pub(crate) fn normalize(decl: &str) -> String {
    let words: Vec<&str> = decl.split_whitespace().collect();
    let mut s = words.join(" ");
    for (from, to) in [("( ", "("), (" )", ")"), (" ,", ","), (" *", "*")] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

pub(crate) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The declared name of a field or typedef declaration.
pub(crate) fn declared_name(decl: &str) -> String {
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

pub(crate) fn parse_header(text: &str) -> Header {
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
pub(crate) fn rust_to_c(ty: &str) -> String {
    let toks = tokenize(ty);
    let mut pos = 0;
    let c = parse_type(&toks, &mut pos);
    assert_eq!(pos, toks.len(), "trailing tokens in Rust type {ty:?}");
    c
}

pub(crate) fn tokenize(s: &str) -> Vec<String> {
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

pub(crate) fn expect(toks: &[String], pos: &mut usize, want: &str) {
    assert_eq!(
        toks.get(*pos).map(String::as_str),
        Some(want),
        "in {toks:?} at {pos}"
    );
    *pos += 1;
}

pub(crate) fn parse_type(toks: &[String], pos: &mut usize) -> String {
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
pub(crate) fn parse_fn(toks: &[String], pos: &mut usize) -> String {
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
