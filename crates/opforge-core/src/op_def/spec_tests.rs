//! Tests of every form of the spec language, error cases included, and
//! property tests of the parser.

use super::*;
use crate::dtype::{DataType, NUMBER_TYPES, QUANTIZED_TYPES, REAL_NUMBER_TYPES};
use crate::proto::{attr_value::Value, op_def::AttrDef, AttrValue, OpDef};
use proptest::prelude::*;

fn attr(spec: &str) -> AttrDef {
    parse_attr_spec(spec).unwrap_or_else(|e| panic!("{spec}: {}", e.render("Op", "attr", spec)))
}

fn types(v: &Option<AttrValue>) -> Vec<DataType> {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => l
            .r#type
            .iter()
            .map(|&c| DataType::from_i32(c).unwrap())
            .collect(),
        other => panic!("not a type list: {other:?}"),
    }
}

fn strings(v: &Option<AttrValue>) -> Vec<String> {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::List(l)) => {
            l.s.iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }
        other => panic!("not a string list: {other:?}"),
    }
}

fn default(a: &AttrDef) -> String {
    summarize_attr_value(a.default_value.as_ref().expect("has a default"))
}

fn build(b: OpDefBuilder) -> OpDef {
    let name = b.name().to_string();
    b.finalize().unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn attr_base_types() {
    for t in ATTR_BASE_TYPES {
        let a = attr(&format!("a: {t}"));
        assert_eq!(a.r#type, *t);
        assert!(a.allowed_values.is_none() && a.default_value.is_none() && !a.has_minimum);
        let a = attr(&format!("a: list({t})"));
        assert_eq!(a.r#type, format!("list({t})"));
        let a = attr(&format!("a : list ( {t} )"));
        assert_eq!(a.r#type, format!("list({t})"));
    }
}

#[test]
fn attr_constraints() {
    let a = attr("fruit: {'apple', 'orange'}");
    assert_eq!(a.r#type, "string");
    assert_eq!(strings(&a.allowed_values), ["apple", "orange"]);
    let a = attr("fruit: {\"apple\", 'orange',}");
    assert_eq!(strings(&a.allowed_values), ["apple", "orange"]);
    let a = attr("T: {int32, float, bool}");
    assert_eq!(a.r#type, "type");
    assert_eq!(
        types(&a.allowed_values),
        [DataType::Int32, DataType::Float, DataType::Bool]
    );
    let a = attr("T: {numbertype, bool}");
    let mut want = NUMBER_TYPES.to_vec();
    want.push(DataType::Bool);
    assert_eq!(types(&a.allowed_values), want);
    assert_eq!(types(&attr("T: numbertype").allowed_values), NUMBER_TYPES);
    assert_eq!(types(&attr("T: numerictype").allowed_values), NUMBER_TYPES);
    assert_eq!(
        types(&attr("T: realnumbertype").allowed_values),
        REAL_NUMBER_TYPES
    );
    assert_eq!(
        types(&attr("T: realnumerictype").allowed_values),
        REAL_NUMBER_TYPES
    );
    assert_eq!(
        types(&attr("T: quantizedtype").allowed_values),
        QUANTIZED_TYPES
    );
    assert_eq!(
        types(&attr("T: {float32, float64, float16}").allowed_values),
        [DataType::Float, DataType::Double, DataType::Half]
    );
    assert_eq!(
        types(&attr("T: {int32,int64}").allowed_values),
        [DataType::Int32, DataType::Int64]
    );
    let a = attr("a: int >= 2");
    assert!(a.has_minimum && a.minimum == 2);
    let a = attr("a: int >= -3");
    assert!(a.has_minimum && a.minimum == -3);
    let a = attr("a: list(type) >= 3");
    assert_eq!((a.r#type.as_str(), a.minimum), ("list(type)", 3));
    let a = attr("a: list({int32, float}) >= 3");
    assert_eq!((a.r#type.as_str(), a.minimum), ("list(type)", 3));
    assert_eq!(types(&a.allowed_values), [DataType::Int32, DataType::Float]);
    let a = attr("a: list({'x', 'y'})");
    assert_eq!(a.r#type, "list(string)");
    assert_eq!(strings(&a.allowed_values), ["x", "y"]);
}

#[test]
fn attr_defaults_for_every_type() {
    assert_eq!(default(&attr("s: string = 'foo'")), "\"foo\"");
    assert_eq!(default(&attr("s: string = \"foo\"")), "\"foo\"");
    assert_eq!(default(&attr("s: string = ''")), "\"\"");
    assert_eq!(default(&attr("i: int = 0")), "0");
    assert_eq!(default(&attr("i: int = -1")), "-1");
    assert_eq!(default(&attr("f: float = 1.0")), "1");
    assert_eq!(default(&attr("f: float = 1e-3")), "0.001");
    assert_eq!(default(&attr("f: float = -6.0")), "-6");
    assert_eq!(default(&attr("b: bool = true")), "true");
    assert_eq!(default(&attr("b: bool = false")), "false");
    assert_eq!(default(&attr("ty: type = DT_INT32")), "DT_INT32");
    assert_eq!(default(&attr("T: {float, int32} = DT_INT32")), "DT_INT32");
    assert_eq!(
        default(&attr("sh: shape = { dim { size: 1 } dim { size: 2 } }")),
        "[1,2]"
    );
    assert_eq!(
        default(&attr("sh: shape = { unknown_rank: true }")),
        "<unknown>"
    );
    assert_eq!(default(&attr("sh: shape = {}")), "[]");
    assert_eq!(
        default(&attr("te: tensor = { dtype: DT_INT32 int_val: 5 }")),
        "Tensor<type: int32 shape: [] values: 5>"
    );
    assert_eq!(default(&attr("l_empty: list(int) = []")), "[]");
    assert_eq!(
        default(&attr("l_int: list(int) = [2, 3, 5, 7]")),
        "[2, 3, 5, 7]"
    );
    assert_eq!(default(&attr("l: list(int) >= 0 = []")), "[]");
    assert_eq!(
        default(&attr("l: list(type) = [DT_INT32, DT_FLOAT]")),
        "[DT_INT32, DT_FLOAT]"
    );
    assert_eq!(
        default(&attr("l: list(string) = ['a', 'b']")),
        "[\"a\", \"b\"]"
    );
    assert_eq!(default(&attr("l: list(float) = [0.5]")), "[0.5]");
    assert_eq!(default(&attr("l: list(bool) = [true]")), "[true]");
    assert_eq!(
        default(&attr("l: list(shape) = [{ dim { size: 3 } }]")),
        "[[3]]"
    );
    assert_eq!(default(&attr("mode: {'A', 'B'} = 'B'")), "\"B\"");
}

#[test]
fn arg_forms_resolve_like_tensorflow() {
    let op = build(
        OpDefBuilder::new("Args")
            .attr("T: type")
            .attr("N: int")
            .attr("M: int >= 0")
            .attr("L: list(type)")
            .input("a: float")
            .input("b: T")
            .input("c: L")
            .input("d: N * int32")
            .input("e: N * T")
            .input("f : Ref(T)")
            .input("g: Ref(int32)")
            .input("h: M * float")
            .output("o: float64")
            .output("p: N * T"),
    );
    let i = &op.input_arg;
    assert_eq!(i[0].r#type, DataType::Float as i32);
    assert_eq!(i[1].type_attr, "T");
    assert_eq!(i[2].type_list_attr, "L");
    assert_eq!(
        (i[3].number_attr.as_str(), i[3].r#type),
        ("N", DataType::Int32 as i32)
    );
    assert_eq!(
        (i[4].number_attr.as_str(), i[4].type_attr.as_str()),
        ("N", "T")
    );
    assert!(i[5].is_ref && i[5].type_attr == "T");
    assert!(i[6].is_ref && i[6].r#type == DataType::Int32 as i32);
    assert_eq!(op.output_arg[0].r#type, DataType::Double as i32);
    // N * T makes N an int >= 1; an explicit minimum is kept; list(type) gets >= 1.
    let n = op.attr.iter().find(|a| a.name == "N").unwrap();
    assert!(n.has_minimum && n.minimum == 1);
    let m = op.attr.iter().find(|a| a.name == "M").unwrap();
    assert!(m.has_minimum && m.minimum == 0);
    let l = op.attr.iter().find(|a| a.name == "L").unwrap();
    assert!(l.has_minimum && l.minimum == 1);
}

/// `(kind, spec, other specs of the op, what the message must say)`.
const MALFORMED: &[(&str, &str, &[&str], &str)] = &[
    ("attr", "T: {float, int32", &[], "missing '}' to close the set of allowed types"),
    ("attr", "T {float}", &[], "expected ':' after the attr name 'T'"),
    ("attr", ": int", &[], "expected the attr name"),
    ("attr", "1a: int", &[], "expected the attr name"),
    ("attr", "", &[], "expected the attr name"),
    ("attr", "a:", &[], "expected an attr type"),
    ("attr", "a: blob", &[], "unknown attr type 'blob'"),
    ("attr", "a: int32", &[], "'int32' is a data type, not an attr type; to let a type attr take only int32, write the set '{int32}'"),
    ("attr", "a: float32", &[], "write the set '{float32}'"),
    ("attr", "a: list(int", &[], "missing ')' to close 'list('"),
    ("attr", "a: list int", &[], "expected '(' after 'list'"),
    ("attr", "a: list()", &[], "expected an attr type"),
    ("attr", "T: {}", &[], "the set of allowed types is empty"),
    ("attr", "T: {floot}", &[], "unknown type 'floot'"),
    ("attr", "T: {DT_FLOAT}", &[], "unknown type 'DT_FLOAT'; in a spec, types use their lowercase names: write 'float'"),
    ("attr", "T: {realnumberictype}", &[], "did you mean 'realnumbertype'?"),
    ("attr", "T: {float int32}", &[], "expected ',' or '}' after 'float' in the set of allowed types"),
    ("attr", "T: {float,, int32}", &[], "expected a type name"),
    ("attr", "s: {'a', b}", &[], "expected a quoted string in the set of allowed strings"),
    ("attr", "s: {'a'", &[], "missing '}' to close the set of allowed strings"),
    ("attr", "s: {'a}", &[], "unterminated string: missing closing '"),
    ("attr", "s: {'a\\q'}", &[], "unknown escape sequence '\\q'"),
    ("attr", "s: {'\\777'}", &[], "octal escape is out of range"),
    ("attr", "f: float >= 2", &[], "a minimum ('>=') is allowed only on int and list(...) attrs, not on 'float'"),
    ("attr", "a: int >= ", &[], "expected an integer after '>='"),
    ("attr", "a: int >= x", &[], "expected an integer after '>='"),
    ("attr", "a: int >= 99999999999999999999", &[], "does not fit in 64 bits"),
    ("attr", "a: int =", &[], "expected a default value after '='"),
    ("attr", "a: int = 1.5", &[], "invalid default value: '1.5' is not a valid int value"),
    ("attr", "a: int = 'x'", &[], "invalid default value"),
    ("attr", "a: bool = maybe", &[], "invalid default value"),
    ("attr", "a: list(int) = 3", &[], "a list(int) value must be written in brackets, e.g. '[3]'"),
    ("attr", "a: type = int32", &[], "invalid default value"),
    ("attr", "a: shape = { dim { size: 1 }", &[], "invalid default value"),
    ("attr", "a: int extra", &[], "unexpected 'extra' after the attr type"),
    ("attr", "a: int > 2", &[], "a minimum is written '>= N'"),
    ("attr", "a: tensor = { dtype: DT_BOGUS }", &[], "invalid default value"),
    ("input", "x float", &[], "expected ':' after the argument name 'x'"),
    ("input", "X: float", &[], "invalid argument name 'X'"),
    ("input", "x: ", &[], "expected a type (like float) or an attr name (like T)"),
    ("input", "x: U", &[], "'U' is neither a data type nor an attr of this op"),
    ("input", "x: Ref(T", &["T: type"], "missing ')' to close 'Ref('"),
    ("input", "x: N * ", &["N: int"], "expected a type or type attr after 'N *'"),
    ("input", "x: N * T", &["T: type"], "'N' in 'N * ...' must be an int attr of this op"),
    ("input", "x: N * T", &["N: float", "T: type"], "'N' is used as a list length but is a float attr"),
    ("input", "x: N * L", &["N: int", "L: list(type)"], "'N * L' repeats a list(type) attr"),
    ("input", "x: s", &["s: string"], "attr 's' has type string; an argument's type must be a data type"),
    ("input", "x: float extra", &[], "unexpected 'extra' at the end of the argument spec"),
    ("output", "y: T T", &["T: type"], "unexpected 'T' at the end of the argument spec"),
    ("output", "y: float_ref", &[], "Illegal use of ref type 'float_ref'. Use 'Ref(type)' instead for output 'y'"),
    ("attr", "T: {float, int32} = DT_BOOL", &[], "Value for attr 'T' of bool is not in the list of allowed values: float, int32"),
    ("attr", "m: {'A', 'B'} = 'C'", &[], "Value for attr 'm' of \"C\" is not in the list of allowed values: \"A\", \"B\""),
    ("attr", "n: int >= 2 = 1", &[], "Value for attr 'n' of 1 must be at least minimum 2"),
    ("attr", "l: list(int) >= 2 = [1]", &[], "Length for attr 'l' of 1 must be at least minimum 2"),
    ("attr", "l: list(int) >= -1", &[], "Attr 'l' with list type must have a non-negative minimum, not -1"),
    ("attr", "int32: int", &[], "Attr can't have name int32 that matches a data type"),
    ("attr", "T: type", &["T: int"], "duplicate attr name 'T'"),
    ("input", "x: float", &["x: int"], "Duplicate name: x"),
];

#[test]
fn malformed_specs_fail_with_clear_messages() {
    assert!(MALFORMED.len() >= 50);
    for &(kind, spec, others, want) in MALFORMED {
        let mut b = OpDefBuilder::new("Bad");
        for other in others {
            b = b.attr(*other);
        }
        b = match kind {
            "attr" => b.attr(spec),
            "input" => b.input(spec),
            _ => b.output(spec),
        };
        let err = b.finalize().expect_err(spec);
        let msg = err.message();
        assert!(msg.starts_with("Bad: "), "{spec}: {msg}");
        assert!(
            msg.contains(want),
            "spec {spec:?}\n  got:  {msg}\n  want: {want}"
        );
    }
}

#[test]
fn syntax_errors_name_the_spec_and_point_at_the_column() {
    let err = OpDefBuilder::new("ZeroOut")
        .attr("T: {float, int32} = DT_INT32")
        .input("to_zero: Q")
        .finalize()
        .unwrap_err();
    assert_eq!(
        err.message(),
        "ZeroOut: input \"to_zero: Q\": 'Q' is neither a data type nor an attr of this op; declare it with \
         .attr(\"Q: type\") or use a type such as float or int32 (at column 10)\n    to_zero: Q\n             ^"
    );
}

#[test]
fn op_names_must_be_camel_case() {
    for bad in ["zero_out", "Zero Out", "", "0Op"] {
        let err = OpDefBuilder::new(bad).finalize().unwrap_err();
        assert!(
            err.message().contains("Did you use CamelCase?"),
            "{bad}: {err}"
        );
    }
    for good in ["ZeroOut", "_Internal", "Op2D", "A_b"] {
        build(OpDefBuilder::new(good));
    }
}

fn type_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "float",
        "double",
        "int32",
        "int64",
        "uint8",
        "bool",
        "string",
        "half",
        "bfloat16",
        "complex64",
        "qint8",
        "resource",
        "variant",
        "float32",
        "float64",
        "float16",
    ])
}

fn ident() -> impl Strategy<Value = String> {
    "[A-Z][a-zA-Z0-9_]{0,6}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary strings never panic the parsers or the builder.
    #[test]
    fn arbitrary_specs_never_panic(spec in ".{0,40}", other in "[ -~]{0,40}") {
        let _ = parse_attr_spec(&spec);
        let _ = parse_arg_spec(&spec);
        let _ = parse_attr_spec(&other);
        let _ = OpDefBuilder::new("P").attr(other.clone()).input(spec.clone()).output(other).doc(spec).finalize();
    }

    /// Spec-like strings (built from the language's own tokens) never panic,
    /// and every error renders with a caret inside the spec.
    #[test]
    fn spec_like_strings_never_panic(parts in prop::collection::vec(prop::sample::select(vec![
        "T", "N", "x", ":", " ", "{", "}", "(", ")", ",", "'a'", "\"b\"", "list", "int", "type", "float",
        ">=", "=", "-", "3", "*", "Ref", "numbertype", "[", "]", "DT_INT32", "\\", "'", "shape",
    ]), 0..12)) {
        let spec: String = parts.concat();
        if let Err(e) = parse_attr_spec(&spec) {
            prop_assert!(e.offset <= spec.len());
            let _ = e.render("Op", "attr", &spec);
        }
        if let Err(e) = parse_arg_spec(&spec) {
            prop_assert!(e.offset <= spec.len());
        }
    }

    /// A type-set attr written from its parts parses back to those parts.
    #[test]
    fn type_sets_round_trip(name in ident(), list in any::<bool>(), ts in prop::collection::vec(type_name(), 1..6),
                            min in prop::option::of(0i64..5), spaces in " {0,2}") {
        let set = format!("{{{}}}", ts.join(&format!(",{spaces}")));
        let ty = if list { format!("list({set})") } else { set };
        let mut spec = format!("{name}{spaces}:{spaces}{ty}");
        if let (Some(m), true) = (min, list) {
            spec.push_str(&format!(" >= {m}"));
        }
        let a = parse_attr_spec(&spec).map_err(|e| TestCaseError::fail(e.render("Op", "attr", &spec)))?;
        prop_assert_eq!(&a.name, &name);
        prop_assert_eq!(a.r#type, if list { "list(type)" } else { "type" });
        let want: Vec<DataType> = ts.iter().map(|t| DataType::from_spec_name(t).unwrap()).collect();
        prop_assert_eq!(types(&a.allowed_values), want);
        prop_assert_eq!(a.has_minimum, list && min.is_some());
    }

    /// Integer attrs with any minimum and default parse to exactly those values.
    #[test]
    fn int_attrs_round_trip(min in prop::option::of(-1000i64..1000), default in prop::option::of(any::<i64>())) {
        let mut spec = "n: int".to_string();
        if let Some(m) = min { spec.push_str(&format!(" >= {m}")); }
        if let Some(d) = default { spec.push_str(&format!(" = {d}")); }
        let a = parse_attr_spec(&spec).unwrap();
        prop_assert_eq!(a.minimum, min.unwrap_or(0));
        prop_assert_eq!(a.default_value.and_then(|v| v.value), default.map(Value::I));
    }

    /// String-set attrs keep their strings, escapes included.
    #[test]
    fn string_sets_round_trip(values in prop::collection::vec("[a-zA-Z0-9 _'\"\\\\]{0,6}", 1..5)) {
        let quoted: Vec<String> = values.iter().map(|v| format!("'{}'", c_escape(v.as_bytes()))).collect();
        let spec = format!("s: {{{}}}", quoted.join(", "));
        let a = parse_attr_spec(&spec).map_err(|e| TestCaseError::fail(e.render("Op", "attr", &spec)))?;
        prop_assert_eq!(strings(&a.allowed_values), values);
    }
}
