use super::*;
use crate::attrs::IntoAttrValue;
use crate::dtype::DataType;
use crate::op_def::parse_attr_spec;
use crate::proto::TensorShapeProto;
use crate::Code;

#[derive(ParamEnum, Clone, Copy, Debug, PartialEq)]
enum Mode {
    #[param(rename = "clip")]
    Clip,
    #[param(rename = "wrap")]
    Wrap,
}

/// Every kind of field.
#[derive(Parameter, Debug, PartialEq)]
struct All {
    /// Bits per value.
    #[param(default = 8, lower_bound = 2, upper_bound = 16)]
    num_bits: i64,
    #[param(default = -6, describe = "The low end.")]
    min: f32,
    #[param(default = 0.1, lower_bound = 0, upper_bound = 1.5)]
    ratio: f32,
    #[param(default = false)]
    narrow_range: bool,
    #[param(minimum = 2)]
    block_size: i32,
    #[param(default = "clip")]
    mode: Mode,
    #[param(enumeration("NHWC", "NCHW"), default = "NHWC")]
    data_format: String,
    #[param(name = "T", enumeration("half", "float"), default = Float)]
    t: DataType,
    #[param(default = [1, 1, 1, 1], minimum = 4)]
    strides: Vec<i64>,
    #[param(default = [2, -1])]
    shape: TensorShapeProto,
    #[param(default = 1e-7)]
    epsilon: f64,
    #[param(default = "a'b")]
    label: String,
}

#[test]
fn specs_are_tensorflow_syntax() {
    assert_eq!(
        All::attr_specs().unwrap(),
        [
            "num_bits: int = 8",
            "min: float = -6",
            "ratio: float = 0.1",
            "narrow_range: bool = false",
            "block_size: int >= 2",
            "mode: {'clip', 'wrap'} = 'clip'",
            "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
            "T: {half, float} = DT_FLOAT",
            "strides: list(int) >= 4 = [1, 1, 1, 1]",
            "shape: shape = { dim { size: 2 } dim { size: -1 } }",
            "epsilon: float = 1e-7",
            "label: string = 'a\\'b'",
        ]
    );
}

#[test]
fn op_def_attrs_are_those_of_handwritten_specs() {
    let op = OpDefBuilder::new("Everything")
        .attr("U: type")
        .params::<All>()
        .attr("last: int = 0")
        .finalize()
        .unwrap();
    let want = [
        "U: type",
        "num_bits: int = 8",
        "min: float = -6.0",
        "ratio: float = 0.1",
        "narrow_range: bool = false",
        "block_size: int >= 2",
        "mode: {'clip', 'wrap'} = 'clip'",
        "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
        "T: {half, float} = DT_FLOAT",
        "strides: list(int) >= 4 = [1, 1, 1, 1]",
        "shape: shape = { dim { size: 2 } dim { size: -1 } }",
        "epsilon: float = 0.0000001",
        "label: string = \"a'b\"",
        "last: int = 0",
    ];
    assert_eq!(op.attr.len(), want.len());
    for (got, spec) in op.attr.iter().zip(want) {
        let mut want = parse_attr_spec(spec).unwrap();
        want.description = got.description.clone();
        assert_eq!(*got, want, "{spec}");
    }
    let docs: Vec<(&str, &str)> = op
        .attr
        .iter()
        .filter(|a| !a.description.is_empty())
        .map(|a| (a.name.as_str(), a.description.as_str()))
        .collect();
    assert_eq!(
        docs,
        [("num_bits", "Bits per value."), ("min", "The low end.")]
    );
}

#[test]
fn a_doc_line_wins_over_the_field_description() {
    let op = OpDefBuilder::new("Documented")
        .params::<All>()
        .doc("Summary.\n\nnum_bits: From the doc.")
        .finalize()
        .unwrap();
    assert_eq!(op.attr[0].description, "From the doc.");
    assert_eq!(op.attr[1].description, "The low end.");
    let err = OpDefBuilder::new("Documented")
        .attr_doc("nope", "x")
        .finalize()
        .unwrap_err();
    assert_eq!(
        err.message(),
        "Documented: attr_doc: the op has no attr named 'nope'"
    );
}

fn attrs(pairs: &[(&str, AttrValue)]) -> AttrMap {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn from_attrs_fills_defaults_and_ignores_other_attrs() {
    let p = All::from_attrs(&attrs(&[
        ("block_size", 3i64.into_attr_value()),
        ("mode", "wrap".into_attr_value()),
        ("T", DataType::Half.into_attr_value()),
        ("other", 1i64.into_attr_value()),
    ]))
    .unwrap();
    let want = All {
        num_bits: 8,
        min: -6.0,
        ratio: 0.1,
        narrow_range: false,
        block_size: 3,
        mode: Mode::Wrap,
        data_format: "NHWC".into(),
        t: DataType::Half,
        strides: vec![1, 1, 1, 1],
        shape: TensorShapeProto {
            dim: [2, -1]
                .map(|size| crate::proto::tensor_shape_proto::Dim {
                    size,
                    name: String::new(),
                })
                .to_vec(),
            unknown_rank: false,
        },
        epsilon: f64::from(1e-7f32),
        label: "a'b".into(),
    };
    assert_eq!(p, want);
}

/// The message of an `InvalidArgument` error.
fn message<T: std::fmt::Debug>(r: Result<T>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    e.message().to_string()
}

#[test]
fn from_attrs_errors_name_op_parameter_value_and_what_is_allowed() {
    let base = [("block_size", 2i64.into_attr_value())];
    let with = |extra: (&str, AttrValue)| {
        let mut pairs = base.to_vec();
        pairs.push(extra);
        All::from_op_attrs("MyOp", &attrs(&pairs))
    };
    assert_eq!(
        message(All::from_op_attrs("MyOp", &AttrMap::new())),
        "MyOp: missing required parameter 'block_size' (int)"
    );
    assert_eq!(
        message(All::from_attrs(&AttrMap::new())),
        "All: missing required parameter 'block_size' (int)"
    );
    assert_eq!(
        message(with(("num_bits", 17i64.into_attr_value()))),
        "MyOp: invalid value 17 for parameter 'num_bits': must be in [2, 16]"
    );
    assert_eq!(
        message(with(("num_bits", 1i64.into_attr_value()))),
        "MyOp: invalid value 1 for parameter 'num_bits': must be in [2, 16]"
    );
    assert_eq!(
        message(with(("num_bits", 3.5f32.into_attr_value()))),
        "MyOp: invalid value 3.5 for parameter 'num_bits': must be an integer"
    );
    assert_eq!(
        message(with(("ratio", 1.75f32.into_attr_value()))),
        "MyOp: invalid value 1.75 for parameter 'ratio': must be in [0, 1.5]"
    );
    assert_eq!(
        message(with(("ratio", f32::NAN.into_attr_value()))),
        "MyOp: invalid value nan for parameter 'ratio': must be in [0, 1.5]"
    );
    assert_eq!(
        message(with(("mode", "raise".into_attr_value()))),
        "MyOp: invalid value 'raise' for parameter 'mode': must be one of 'clip', 'wrap'"
    );
    assert_eq!(
        message(with(("data_format", "NCDHW".into_attr_value()))),
        "MyOp: invalid value 'NCDHW' for parameter 'data_format': must be one of 'NHWC', 'NCHW'"
    );
    assert_eq!(
        message(with(("T", DataType::Int32.into_attr_value()))),
        "MyOp: invalid value int32 for parameter 'T': must be one of 'half', 'float'"
    );
    assert_eq!(
        message(with(("strides", vec![1i64, 2].into_attr_value()))),
        "MyOp: invalid value [1, 2] for parameter 'strides': must have at least 4 elements"
    );
    assert_eq!(
        message(All::from_op_attrs(
            "MyOp",
            &attrs(&[("block_size", 1i64.into_attr_value())])
        )),
        "MyOp: invalid value 1 for parameter 'block_size': must be >= 2"
    );
    assert_eq!(
        message(All::from_op_attrs(
            "MyOp",
            &attrs(&[("block_size", (1i64 << 40).into_attr_value())])
        )),
        "MyOp: invalid value 1099511627776 for parameter 'block_size': does not fit i32"
    );
}

#[test]
fn from_kwargs_parses_mxnet_strings() {
    let p = All::from_kwargs(&[
        ("num_bits", " 4 "),
        ("min", "-1.5"),
        ("narrow_range", "True"),
        ("block_size", "3"),
        ("mode", "wrap"),
        ("data_format", "'NCHW'"),
        ("T", "float16"),
        ("strides", "(1, 2, 2, 1)"),
        ("shape", "(3,)"),
        ("label", "x, y"),
    ])
    .unwrap();
    assert_eq!(
        (p.num_bits, p.min, p.narrow_range, p.block_size, p.mode),
        (4, -1.5, true, 3, Mode::Wrap)
    );
    assert_eq!((p.data_format.as_str(), p.t), ("NCHW", DataType::Half));
    assert_eq!(p.strides, [1, 2, 2, 1]);
    assert_eq!(p.shape.dim.iter().map(|d| d.size).collect::<Vec<_>>(), [3]);
    assert_eq!(p.label, "x, y");
    for (text, want) in [("true", true), ("1", true), ("False", false), ("0", false)] {
        let p = All::from_kwargs(&[("block_size", "2"), ("narrow_range", text)]).unwrap();
        assert_eq!(p.narrow_range, want, "{text}");
    }
    let p = All::from_kwargs(&[
        ("block_size", "2"),
        ("T", "DT_FLOAT"),
        ("strides", "[4, 3, 2, 1,]"),
    ])
    .unwrap();
    assert_eq!((p.t, p.strides), (DataType::Float, vec![4, 3, 2, 1]));
}

#[test]
fn from_kwargs_errors() {
    let kw = |extra: (&'static str, &'static str)| {
        All::from_op_kwargs("MyOp", &[("block_size", "2"), extra])
    };
    assert_eq!(
        message(kw(("foo", "1"))),
        "MyOp: unknown parameter 'foo'; known: num_bits, min, ratio, narrow_range, block_size, \
         mode, data_format, T, strides, shape, epsilon, label"
    );
    assert_eq!(
        message(kw(("block_size", "3"))),
        "MyOp: parameter 'block_size' is given twice"
    );
    assert_eq!(
        message(All::from_kwargs(&[])),
        "All: missing required parameter 'block_size' (int)"
    );
    assert_eq!(
        message(kw(("num_bits", "3.5"))),
        "MyOp: invalid value '3.5' for parameter 'num_bits': must be an integer"
    );
    assert_eq!(
        message(kw(("num_bits", "20"))),
        "MyOp: invalid value 20 for parameter 'num_bits': must be in [2, 16]"
    );
    assert_eq!(
        message(kw(("narrow_range", "yes"))),
        "MyOp: invalid value 'yes' for parameter 'narrow_range': must be true or false"
    );
    assert_eq!(
        message(kw(("min", "low"))),
        "MyOp: invalid value 'low' for parameter 'min': must be a number"
    );
    assert_eq!(
        message(kw(("mode", "Clip"))),
        "MyOp: invalid value 'Clip' for parameter 'mode': must be one of 'clip', 'wrap'"
    );
    assert_eq!(
        message(kw(("T", "float128"))),
        "MyOp: invalid value 'float128' for parameter 'T': must be a data type name such as \
         float32"
    );
    assert_eq!(
        message(kw(("strides", "1, 2, 2, 1"))),
        "MyOp: invalid value '1, 2, 2, 1' for parameter 'strides': must be a list of ints such \
         as (a, b)"
    );
    assert_eq!(
        message(kw(("strides", "(1,, 2)"))),
        "MyOp: invalid value '(1,, 2)' for parameter 'strides': must be a list of ints such as \
         (a, b)"
    );
    assert_eq!(
        message(kw(("strides", "(1, 2)"))),
        "MyOp: invalid value [1, 2] for parameter 'strides': must have at least 4 elements"
    );
    assert_eq!(
        message(kw(("shape", "(2, -2)"))),
        "MyOp: invalid value '(2, -2)' for parameter 'shape': must be a shape such as (2, 3)"
    );
}

#[test]
fn lists_split_at_top_level_commas_only() {
    let field = |attr_type: &'static str| ParamField {
        name: "x",
        attr_type,
        optional: false,
        default: None,
        none: None,
        description: "",
        minimum: None,
        lower_bound: None,
        upper_bound: None,
        enumeration: &[],
    };
    let strings = parse_kwarg("Op", &field("list(string)"), "('a,b', \"c)\", d)").unwrap();
    assert_eq!(display_value(&strings), "['a,b', 'c)', 'd']");
    let shapes = parse_kwarg("Op", &field("list(shape)"), "[(2, 3), (), [4]]").unwrap();
    assert_eq!(display_value(&shapes), "[[2,3], [], [4]]");
    let empty = parse_kwarg("Op", &field("list(float)"), "()").unwrap();
    assert_eq!(display_value(&empty), "[]");
    assert!(parse_kwarg("Op", &field("list(int)"), "((1, 2)").is_err());
    assert!(parse_kwarg("Op", &field("list(string)"), "('a)").is_err());
}

#[derive(Parameter, Debug)]
struct Optional {
    #[param(default = 1)]
    a: i64,
    /// Absent means every axis.
    axis: Option<i64>,
}

#[test]
fn option_fields_are_for_kwargs_only() {
    let p = Optional::from_kwargs(&[]).unwrap();
    assert_eq!((p.a, p.axis), (1, None));
    assert_eq!(
        Optional::from_kwargs(&[("axis", "-1")]).unwrap().axis,
        Some(-1)
    );
    assert_eq!(Optional::from_attrs(&AttrMap::new()).unwrap().axis, None);
    // MXNet's spelling of an absent optional value.
    assert_eq!(
        Optional::from_kwargs(&[("axis", "None")]).unwrap().axis,
        None
    );
    assert_eq!(
        message(Optional::from_kwargs(&[("axis", "None"), ("axis", "1")])),
        "Optional: parameter 'axis' is given twice"
    );
    assert_eq!(
        message(Optional::from_kwargs(&[("a", "None")])),
        "Optional: invalid value 'None' for parameter 'a': must be an integer"
    );
    assert_eq!(
        message(Optional::attr_specs()),
        "Optional: parameter 'axis' is an Option, which an OpDef attr cannot express (an attr \
         without a default is required); give the field a default, or the value that stands \
         for None (#[param(none = ...)])"
    );
    let err = OpDefBuilder::new("Opt")
        .params::<Optional>()
        .finalize()
        .unwrap_err();
    assert_eq!(
        err.message(),
        "Opt: params Optional: parameter 'axis' is an Option, which an OpDef attr cannot \
         express (an attr without a default is required); give the field a default, or the \
         value that stands for None (#[param(none = ...)])"
    );
}

#[test]
fn doc_table_lists_every_field() {
    assert_eq!(
        Optional::doc_table(),
        "| Parameter | Type | Default | Allowed | Description |\n\
         |---|---|---|---|---|\n\
         | `a` | int | `1` |  |  |\n\
         | `axis` | int | optional |  | Absent means every axis. |\n"
    );
    let table = All::doc_table();
    for row in [
        "| `num_bits` | int | `8` | [2, 16] | Bits per value. |",
        "| `block_size` | int | required | >= 2 |  |",
        "| `mode` | string | `'clip'` | 'clip', 'wrap' |  |",
        "| `T` | type | `float` | 'half', 'float' |  |",
        "| `strides` | list(int) | `[1, 1, 1, 1]` | at least 4 elements |  |",
        "| `ratio` | float | `0.1` | [0, 1.5] |  |",
    ] {
        assert!(table.contains(row), "missing {row} in\n{table}");
    }
}

#[test]
fn enum_names_round_trip() {
    assert_eq!(Mode::NAMES, ["clip", "wrap"]);
    assert_eq!(Mode::from_name("wrap"), Some(Mode::Wrap));
    assert_eq!(Mode::from_name("Wrap"), None);
    assert_eq!(Mode::Clip.name(), "clip");
    assert_eq!(<Option<Mode> as ParamType>::ENUMERATION, ["clip", "wrap"]);
}

#[derive(Parameter, Debug, PartialEq)]
struct Grid {
    #[param(default = 8, lower_bound = 2, upper_bound = 16)]
    bits: i32,
    #[param(default = false)]
    narrow: bool,
}

#[derive(Parameter, Debug, PartialEq)]
struct Outer {
    #[param(default = -1.0)]
    lo: f32,
    #[param(flatten)]
    grid: Grid,
    #[param(default = "x")]
    tag: String,
}

#[test]
fn flattened_structs_lend_their_fields() {
    assert_eq!(Outer::FIELD_COUNT, 4);
    assert_eq!(
        Outer::attr_specs().unwrap(),
        [
            "lo: float = -1",
            "bits: int = 8",
            "narrow: bool = false",
            "tag: string = 'x'"
        ]
    );
    let p = Outer::from_kwargs(&[("narrow", "true"), ("tag", "y"), ("bits", "3")]).unwrap();
    let want = Outer {
        lo: -1.0,
        grid: Grid {
            bits: 3,
            narrow: true,
        },
        tag: "y".into(),
    };
    assert_eq!(p, want);
    let p = Outer::from_attrs(&attrs(&[("bits", 5i64.into_attr_value())])).unwrap();
    assert_eq!(
        (p.grid.bits, p.grid.narrow, p.tag.as_str()),
        (5, false, "x")
    );
    assert_eq!(
        message(Outer::from_kwargs(&[("bits", "1")])),
        "Outer: invalid value 1 for parameter 'bits': must be in [2, 16]"
    );
}

#[test]
fn ops_carry_their_fields_for_string_kwargs() {
    let registry = crate::Registry::new();
    // Two structs with an attr in common (Outer flattens Grid).
    let err = registry
        .register_op(
            OpDefBuilder::new("Quant")
                .params::<Grid>()
                .params::<Outer>(),
        )
        .unwrap_err();
    assert!(
        err.message().contains("duplicate attr name 'bits'"),
        "{err}"
    );
    registry
        .register_op(
            OpDefBuilder::new("Quant")
                .input("x: float")
                .output("y: float")
                .params::<Grid>()
                .params::<All>(),
        )
        .unwrap();
    let fields = registry.attr::<ParamFields>("Quant").unwrap();
    let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
    assert_eq!(&names[..4], ["bits", "narrow", "num_bits", "min"]);
    assert_eq!(names.len(), 2 + All::FIELD_COUNT);
    let attrs = attrs_from_kwargs("Quant", &fields, &[("bits", "4"), ("mode", "wrap")]).unwrap();
    assert_eq!(
        crate::attrs::summarize_attrs(&attrs),
        "[bits=4, mode=\"wrap\"]"
    );
    assert_eq!(
        message(attrs_from_kwargs("Quant", &fields, &[("bits", "40")])),
        "Quant: invalid value 40 for parameter 'bits': must be in [2, 16]"
    );
    assert!(doc_table(&fields).contains("| `bits` | int | `8` | [2, 16] |  |\n"));
}

#[derive(Parameter, Debug, PartialEq)]
struct Axis {
    /// The axis; None: every axis.
    #[param(none = -1, lower_bound = 0)]
    axis: Option<i64>,
}

#[test]
fn a_none_value_makes_an_option_an_op_def_attr() {
    assert_eq!(Axis::attr_specs().unwrap(), ["axis: int = -1"]);
    let op = OpDefBuilder::new("Reduce")
        .params::<Axis>()
        .finalize()
        .unwrap();
    assert_eq!(op.attr[0], {
        let mut want = parse_attr_spec("axis: int = -1").unwrap();
        want.description = "The axis; None: every axis.".into();
        want
    });
    let from = |v: i64| Axis::from_attrs(&attrs(&[("axis", v.into_attr_value())]));
    assert_eq!(Axis::from_attrs(&AttrMap::new()).unwrap().axis, None);
    assert_eq!(from(-1).unwrap().axis, None);
    assert_eq!(from(2).unwrap().axis, Some(2));
    assert_eq!(
        message(from(-2)),
        "Axis: invalid value -2 for parameter 'axis': must be >= 0"
    );
    for (text, want) in [("None", None), ("-1", None), ("3", Some(3))] {
        assert_eq!(
            Axis::from_kwargs(&[("axis", text)]).unwrap().axis,
            want,
            "{text}"
        );
    }
    assert!(Axis::doc_table()
        .contains("| `axis` | int | optional (None: `-1`) | >= 0 | The axis; None: every axis. |"));
}
