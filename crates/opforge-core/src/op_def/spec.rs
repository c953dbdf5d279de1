//! The op spec language: `Attr`, `Input` and `Output` strings as TensorFlow's
//! "Adding a New Op" guide and its `OpDefBuilder` define them.
//!
//! Attrs: `name: type [>= min] [= default]`, where type is `string`, `int`,
//! `float`, `bool`, `type`, `shape`, `tensor`, `func`, a type class
//! (`numbertype`, `numerictype`, `realnumbertype`, `realnumerictype`,
//! `quantizedtype`), a set of types (`{int32, float, numbertype}`), a set of
//! strings (`{'apple', 'orange'}`), or `list(...)` of any of these.
//!
//! Inputs and outputs: `name: T`, `name: float`, `name: N * T`,
//! `name: N * int32`, `name: Ref(T)`, where `T` is a data type, a `type` attr
//! or a `list(type)` attr, and `N` an `int` attr.
//!
//! Parse errors carry the byte offset where the problem is, so a message can
//! point at it with a caret.

use super::attr_value::parse_attr_value;
use crate::dtype::{type_class, DataType};
use crate::proto::{attr_value::ListValue, attr_value::Value, op_def::AttrDef, AttrValue};

/// A syntax error in a spec string: where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// Byte offset into the spec where the problem is.
    pub offset: usize,
    /// What is wrong, and how to fix it where that is clear.
    pub message: String,
}

impl SpecError {
    pub(crate) fn new(offset: usize, message: impl Into<String>) -> SpecError {
        SpecError {
            offset,
            message: message.into(),
        }
    }

    /// Renders the error for `op`'s spec of kind `kind` (`attr`, `input`,
    /// `output`): `ZeroOut: attr "T: {float, int32": missing '}' ... at column 17`,
    /// followed by the spec and a caret under the column.
    pub fn render(&self, op: &str, kind: &str, spec: &str) -> String {
        let offset = self.offset.min(spec.len());
        let column = spec.get(..offset).map_or(offset, |s| s.chars().count());
        let one_line = spec.replace(['\n', '\t'], " ");
        format!(
            "{op}: {kind} \"{spec}\": {} (at column {})\n    {one_line}\n    {}^",
            self.message,
            column + 1,
            " ".repeat(column)
        )
    }
}

type SpecResult<T> = std::result::Result<T, SpecError>;

/// A cursor over a spec string.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Cursor { s, pos: 0 }
    }
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }
    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }
    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }
    fn eat(&mut self, token: &str) -> bool {
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }
    /// An identifier whose first char passes `first` and the rest `rest`.
    fn ident(&mut self, first: fn(char) -> bool, rest: fn(char) -> bool) -> Option<&'a str> {
        let r = self.rest();
        let mut chars = r.char_indices();
        match chars.next() {
            Some((_, c)) if first(c) => {}
            _ => return None,
        }
        let end = chars.find(|&(_, c)| !rest(c)).map_or(r.len(), |(i, _)| i);
        self.pos += end;
        Some(&r[..end])
    }
    /// A description of what is at the cursor, for messages.
    fn found(&self) -> String {
        match self.rest() {
            "" => "the end of the spec".to_string(),
            r => format!("'{}'", r.trim_end()),
        }
    }
    fn err<T>(&self, message: impl Into<String>) -> SpecResult<T> {
        Err(SpecError::new(self.pos, message))
    }
}

fn is_alpha(c: char) -> bool {
    c.is_ascii_alphabetic()
}
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
fn is_lower(c: char) -> bool {
    c.is_ascii_lowercase()
}
fn is_lower_word(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// Checks that `name` is a valid attr name: a letter, then letters, digits or `_`.
pub fn is_valid_attr_name(name: &str) -> bool {
    let mut c = name.chars();
    c.next().is_some_and(is_alpha) && c.all(is_word)
}

/// Checks that `name` is a valid input/output name: a lowercase letter, then
/// lowercase letters, digits or `_`.
pub fn is_valid_arg_name(name: &str) -> bool {
    let mut c = name.chars();
    c.next().is_some_and(is_lower) && c.all(is_lower_word)
}

/// Parses one quoted string (single or double quotes, C escapes) at the cursor.
fn quoted_string(c: &mut Cursor) -> SpecResult<Vec<u8>> {
    let start = c.pos;
    let quote = match c.peek() {
        Some(q @ ('\'' | '"')) => q,
        _ => return c.err(format!("expected a quoted string, found {}", c.found())),
    };
    c.pos += 1;
    let mut out = Vec::new();
    loop {
        let Some(ch) = c.peek() else {
            return Err(SpecError::new(
                start,
                format!("unterminated string: missing closing {quote}"),
            ));
        };
        c.pos += ch.len_utf8();
        if ch == quote {
            return Ok(out);
        }
        if ch != '\\' {
            let mut buf = [0; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let esc_at = c.pos - 1;
        let Some(e) = c.peek() else {
            return Err(SpecError::new(
                start,
                format!("unterminated string: missing closing {quote}"),
            ));
        };
        c.pos += e.len_utf8();
        match e {
            'n' => out.push(b'\n'),
            't' => out.push(b'\t'),
            'r' => out.push(b'\r'),
            'a' => out.push(0x07),
            'b' => out.push(0x08),
            'f' => out.push(0x0c),
            'v' => out.push(0x0b),
            '\\' | '\'' | '"' | '?' => out.push(e as u8),
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match c.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            c.pos += 1;
                        }
                        None => break,
                    }
                }
                if v > 0xff {
                    return Err(SpecError::new(
                        esc_at,
                        "octal escape is out of range (more than \\377)",
                    ));
                }
                out.push(v as u8);
            }
            'x' => {
                let digits: String = c
                    .rest()
                    .chars()
                    .take_while(|d| d.is_ascii_hexdigit())
                    .take(2)
                    .collect();
                if digits.is_empty() {
                    return Err(SpecError::new(esc_at, "\\x must be followed by hex digits"));
                }
                c.pos += digits.len();
                out.push(u8::from_str_radix(&digits, 16).unwrap_or(0));
            }
            other => {
                return Err(SpecError::new(
                    esc_at,
                    format!("unknown escape sequence '\\{other}'"),
                ));
            }
        }
    }
}

/// After a set element: `,` (then maybe `}`), or `}`. Returns true when the set is closed.
fn set_separator(c: &mut Cursor, what: &str, last: &str) -> SpecResult<bool> {
    c.skip_ws();
    if c.eat(",") {
        c.skip_ws();
        return Ok(c.eat("}"));
    }
    if c.eat("}") {
        return Ok(true);
    }
    if c.at_end() {
        return c.err(format!("missing '}}' to close the set of allowed {what}"));
    }
    c.err(format!(
        "expected ',' or '}}' after {last} in the set of allowed {what}, found {}",
        c.found()
    ))
}

/// Parses the attr type after `name:`: returns (type without list(), allowed values).
fn attr_type(c: &mut Cursor) -> SpecResult<(String, Option<AttrValue>)> {
    if c.eat("{") {
        c.skip_ws();
        let mut list = ListValue::default();
        if matches!(c.peek(), Some('\'' | '"')) {
            loop {
                let s = quoted_string(c)?;
                let shown = String::from_utf8_lossy(&s).into_owned();
                list.s.push(s);
                if set_separator(c, "strings", &format!("'{shown}'"))? {
                    break;
                }
                if !matches!(c.peek(), Some('\'' | '"')) {
                    return c.err(format!(
                        "expected a quoted string in the set of allowed strings, found {}",
                        c.found()
                    ));
                }
            }
            return Ok((
                "string".into(),
                Some(AttrValue {
                    value: Some(Value::List(Box::new(list))),
                }),
            ));
        }
        loop {
            let at = c.pos;
            let Some(word) = c.ident(is_alpha, is_word) else {
                if c.peek() == Some('}') && list.r#type.is_empty() {
                    return c.err("the set of allowed types is empty; list at least one type, e.g. {float, int32}");
                }
                return c.err(format!(
                    "expected a type name (like float, int32 or numbertype) in the set of allowed types, found {}",
                    c.found()
                ));
            };
            if let Some(class) = type_class(word) {
                list.r#type.extend(class.iter().map(|&d| d as i32));
            } else if let Some(dt) = DataType::from_spec_name(word) {
                list.r#type.push(dt as i32);
            } else {
                return Err(SpecError::new(at, unknown_type_message(word)));
            }
            if set_separator(c, "types", &format!("'{word}'"))? {
                break;
            }
        }
        return Ok((
            "type".into(),
            Some(AttrValue {
                value: Some(Value::List(Box::new(list))),
            }),
        ));
    }
    let at = c.pos;
    let Some(word) = c.ident(is_alpha, is_word) else {
        return c.err(format!(
            "expected an attr type (string, int, float, bool, type, shape, tensor, func, \
             list(...), a type class like numbertype, or a set like {{int32, float}} or {{'a', 'b'}}), found {}",
            c.found()
        ));
    };
    match word {
        "string" | "int" | "float" | "bool" | "type" | "shape" | "tensor" | "func" => {
            Ok((word.into(), None))
        }
        _ => {
            if let Some(class) = type_class(word) {
                let list = ListValue {
                    r#type: class.iter().map(|&d| d as i32).collect(),
                    ..Default::default()
                };
                return Ok((
                    "type".into(),
                    Some(AttrValue {
                        value: Some(Value::List(Box::new(list))),
                    }),
                ));
            }
            let message = if DataType::from_spec_name(word).is_some() {
                format!(
                    "'{word}' is a data type, not an attr type; to let a type attr take only {word}, \
                     write the set '{{{word}}}'"
                )
            } else if word == "list" {
                "expected '(' after 'list', as in list(int)".to_string()
            } else {
                format!(
                    "unknown attr type '{word}'; expected one of string, int, float, bool, type, shape, \
                     tensor, func, list(...), numbertype, realnumbertype, quantizedtype, or a set like {{int32, float}}"
                )
            };
            Err(SpecError::new(at, message))
        }
    }
}

fn unknown_type_message(word: &str) -> String {
    let hint = match word {
        "float32" | "float64" | "float16" => String::new(),
        w if w.to_ascii_lowercase().starts_with("dt_") => {
            format!("; in a spec, types use their lowercase names: write '{}'", w[3..].to_ascii_lowercase())
        }
        "realnumberictype" => "; did you mean 'realnumbertype'?".to_string(),
        _ => "; known types are float, double, half, bfloat16, int8/16/32/64, uint8/16/32/64, bool, string, \
              complex64, complex128, qint8, quint8, qint16, quint16, qint32, resource, variant, and the classes \
              numbertype, realnumbertype, quantizedtype"
            .to_string(),
    };
    format!("unknown type '{word}'{hint}")
}

/// Parses an integer (optionally negative) at the cursor.
fn integer(c: &mut Cursor, after: &str) -> SpecResult<i64> {
    let start = c.pos;
    c.eat("-");
    let digits = c.rest().chars().take_while(|d| d.is_ascii_digit()).count();
    if digits == 0 {
        c.pos = start;
        return c.err(format!(
            "expected an integer after '{after}', found {}",
            c.found()
        ));
    }
    c.pos += digits;
    c.s[start..c.pos]
        .parse()
        .map_err(|_| SpecError::new(start, "the integer does not fit in 64 bits"))
}

/// Parses an attr spec into an `AttrDef` (name, type, minimum, allowed
/// values and default), exactly as TensorFlow's `OpDefBuilder` builds it.
///
/// ```
/// use opforge_core::op_def::parse_attr_spec;
/// let a = parse_attr_spec("N: int >= 2").unwrap();
/// assert_eq!((a.name.as_str(), a.r#type.as_str(), a.has_minimum, a.minimum), ("N", "int", true, 2));
/// let a = parse_attr_spec("T: {float, int32} = DT_INT32").unwrap();
/// assert_eq!(a.r#type, "type");
/// let e = parse_attr_spec("T: {float, int32").unwrap_err();
/// assert!(e.message.contains("missing '}'"));
/// ```
pub fn parse_attr_spec(spec: &str) -> SpecResult<AttrDef> {
    let mut c = Cursor::new(spec);
    c.skip_ws();
    let Some(name) = c.ident(is_alpha, is_word) else {
        return c.err(format!(
            "expected the attr name (a letter, then letters, digits or '_') followed by ':', as in \"T: type\", found {}",
            c.found()
        ));
    };
    c.skip_ws();
    if !c.eat(":") {
        return c.err(format!(
            "expected ':' after the attr name '{name}', found {}",
            c.found()
        ));
    }
    c.skip_ws();
    // `list(` ... `)`
    let save = c.pos;
    let is_list = c.ident(is_alpha, is_word) == Some("list") && {
        c.skip_ws();
        c.eat("(")
    };
    if is_list {
        c.skip_ws();
    } else {
        c.pos = save;
    }
    let (base, allowed) = attr_type(&mut c)?;
    c.skip_ws();
    if is_list {
        if !c.eat(")") {
            return c.err(format!("missing ')' to close 'list(', found {}", c.found()));
        }
        c.skip_ws();
    }
    let attr_type = if is_list {
        format!("list({base})")
    } else {
        base.clone()
    };
    let mut attr = AttrDef {
        name: name.to_string(),
        r#type: attr_type.clone(),
        allowed_values: allowed,
        ..Default::default()
    };
    if c.rest().starts_with(">=") {
        if !(is_list || base == "int") {
            return c.err(format!(
                "a minimum ('>=') is allowed only on int and list(...) attrs, not on '{attr_type}'"
            ));
        }
        c.eat(">=");
        c.skip_ws();
        attr.has_minimum = true;
        attr.minimum = integer(&mut c, ">=")?;
        c.skip_ws();
    }
    if c.eat("=") {
        c.skip_ws();
        let text = c.rest();
        if text.trim().is_empty() {
            return c.err("expected a default value after '='");
        }
        let value = parse_attr_value(&attr_type, text).map_err(|e| {
            SpecError::new(c.pos, format!("invalid default value: {}", e.message()))
        })?;
        attr.default_value = Some(value);
        return Ok(attr);
    }
    if !c.at_end() {
        let hint = if c.rest().starts_with('>') || c.rest().starts_with('<') {
            "; a minimum is written '>= N'"
        } else {
            "; a default is written '= value'"
        };
        return c.err(format!(
            "unexpected {} after the attr type{hint}",
            c.found()
        ));
    }
    Ok(attr)
}

/// The syntax of an input or output spec, before attr names are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    /// The argument name.
    pub name: String,
    /// Whether it is written `Ref(...)`.
    pub is_ref: bool,
    /// The `N` of `N * T`, with its byte offset.
    pub number_attr: Option<(String, usize)>,
    /// The type or attr name (`T` or `float`), with its byte offset.
    pub type_or_attr: (String, usize),
}

/// Parses the syntax of an input or output spec (`x: T`, `x: N * int32`,
/// `x: Ref(T)`); resolving names to types or attrs is the builder's job.
pub fn parse_arg_spec(spec: &str) -> SpecResult<ArgSpec> {
    let mut c = Cursor::new(spec);
    c.skip_ws();
    let at = c.pos;
    let Some(name) = c.ident(is_alpha, is_word) else {
        return c.err(format!(
            "expected the argument name followed by ':', as in \"x: float\", found {}",
            c.found()
        ));
    };
    if !is_valid_arg_name(name) {
        return Err(SpecError::new(
            at,
            format!(
                "invalid argument name '{name}': input and output names use lowercase letters, \
                 digits and '_', starting with a letter (try '{}')",
                name.to_ascii_lowercase()
            ),
        ));
    }
    c.skip_ws();
    if !c.eat(":") {
        return c.err(format!(
            "expected ':' after the argument name '{name}', found {}",
            c.found()
        ));
    }
    c.skip_ws();
    let save = c.pos;
    let is_ref = c.ident(is_alpha, is_word) == Some("Ref") && {
        c.skip_ws();
        c.eat("(")
    };
    if is_ref {
        c.skip_ws();
    } else {
        c.pos = save;
    }
    let first_at = c.pos;
    let Some(first) = c.ident(is_alpha, is_word) else {
        return c.err(format!(
            "expected a type (like float) or an attr name (like T), found {}",
            c.found()
        ));
    };
    c.skip_ws();
    let mut arg = ArgSpec {
        name: name.to_string(),
        is_ref,
        number_attr: None,
        type_or_attr: (first.to_string(), first_at),
    };
    if c.eat("*") {
        c.skip_ws();
        let second_at = c.pos;
        let Some(second) = c.ident(is_alpha, is_word) else {
            return c.err(format!(
                "expected a type or type attr after '{first} *', as in \"{name}: {first} * T\", found {}",
                c.found()
            ));
        };
        arg.number_attr = Some((first.to_string(), first_at));
        arg.type_or_attr = (second.to_string(), second_at);
        c.skip_ws();
    }
    if is_ref {
        if !c.eat(")") {
            return c.err(format!("missing ')' to close 'Ref(', found {}", c.found()));
        }
        c.skip_ws();
    }
    if !c.at_end() {
        return c.err(format!(
            "unexpected {} at the end of the argument spec",
            c.found()
        ));
    }
    Ok(arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_forms() {
        let a = parse_arg_spec("x : T").unwrap();
        assert_eq!(
            (a.name.as_str(), a.type_or_attr.0.as_str(), a.is_ref),
            ("x", "T", false)
        );
        let a = parse_arg_spec("values: N * T").unwrap();
        assert_eq!(a.number_attr.unwrap().0, "N");
        let a = parse_arg_spec("ref: Ref( int32 )").unwrap();
        assert!(a.is_ref);
        assert_eq!(a.type_or_attr.0, "int32");
        let a = parse_arg_spec("in: N*int32").unwrap();
        assert_eq!(a.number_attr.unwrap().0, "N");
    }

    #[test]
    fn caret_points_at_the_problem() {
        let spec = "T: {float, int32";
        let e = parse_attr_spec(spec).unwrap_err();
        let text = e.render("ZeroOut", "attr", spec);
        assert!(
            text.starts_with(
                "ZeroOut: attr \"T: {float, int32\": missing '}' to close the set of allowed types"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("\n    {spec}\n    {}^", " ".repeat(spec.len()))),
            "{text}"
        );
    }

    #[test]
    fn string_escapes() {
        let a = parse_attr_spec(r#"s: {'a\'b', "c\n", '\x41\101'}"#).unwrap();
        let Some(Value::List(l)) = a.allowed_values.unwrap().value else {
            panic!()
        };
        assert_eq!(l.s, vec![b"a'b".to_vec(), b"c\n".to_vec(), b"AA".to_vec()]);
    }
}
