//! The derives' expansions and compile errors, through the expansion
//! functions (no compiler run): each misuse gives its message.

use crate::{param_enum, parameter};
use syn::{parse_quote, DeriveInput};

/// The error message of expanding `#[derive(Parameter)]` on `input`.
fn error(input: DeriveInput) -> String {
    match parameter::expand(&input) {
        Ok(tokens) => panic!("expanded without an error: {tokens}"),
        Err(e) => e.to_string(),
    }
}

fn enum_error(input: DeriveInput) -> String {
    match param_enum::expand(&input) {
        Ok(tokens) => panic!("expanded without an error: {tokens}"),
        Err(e) => e.to_string(),
    }
}

/// The expansion with whitespace removed, to search.
fn expansion(input: DeriveInput) -> String {
    parameter::expand(&input)
        .unwrap()
        .to_string()
        .replace(' ', "")
}

#[test]
fn expands_fields_in_order_with_their_keys() {
    let out = expansion(parse_quote! {
        struct P {
            /// How many bits.
            #[param(default = 8, lower_bound = 2, upper_bound = 16)]
            num_bits: i64,
            #[param(default = -6, describe = "The low end.")]
            min: f32,
            #[param(minimum = 2)]
            block_size: i32,
            #[param(enumeration("clip", "wrap"), default = "clip")]
            mode: String,
            #[param(name = "T", default = Float)]
            t: DataType,
            axis: Option<i64>,
            #[param(default = [1, 1], minimum = 2)]
            strides: Vec<i64>,
        }
    });
    for want in [
        "constNAME:&'staticstr=\"P\"",
        "name:\"num_bits\"",
        "default:::core::option::Option::Some(::opforge_core::param::__private::int(8i64))",
        "description:\"Howmanybits.\"",
        "lower_bound:::core::option::Option::Some(::opforge_core::param::Bound::Int(2i64))",
        "upper_bound:::core::option::Option::Some(::opforge_core::param::Bound::Int(16i64))",
        "::opforge_core::param::__private::float(-6f32)",
        "description:\"Thelowend.\"",
        "minimum:::core::option::Option::Some(2i64)",
        "enumeration:&[\"clip\",\"wrap\"]",
        "::opforge_core::param::__private::string(\"clip\")",
        "name:\"T\"",
        "::opforge_core::param::__private::dtype(::opforge_core::DataType::Float)",
        "enumeration:<Option<i64>as::opforge_core::param::ParamType>::ENUMERATION",
        "::opforge_core::param::__private::ints(&[1i64,1i64])",
        "axis:::opforge_core::param::__private::take::<Option<i64>>(owner,\"axis\",values.get(0usize+1usize+1usize+1usize+1usize+1usize))?",
    ] {
        assert!(out.contains(want), "missing {want} in {out}");
    }
    let names: Vec<usize> = ["\"num_bits\"", "\"min\"", "\"block_size\"", "\"mode\""]
        .iter()
        .map(|n| out.find(&format!("name:{n}")).unwrap())
        .collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
}

#[test]
fn literals_in_parentheses_and_groups() {
    let out = expansion(parse_quote! {
        struct P {
            #[param(default = (-(3)), upper_bound = (4))]
            a: i64,
            #[param(default = (true))]
            b: bool,
            #[param(default = ("x"))]
            c: String,
        }
    });
    for want in [
        "__private::int(-3i64)",
        "Bound::Int(4i64)",
        "__private::bool(true)",
        "__private::string(\"x\")",
    ] {
        assert!(out.contains(want), "missing {want} in {out}");
    }
}

#[test]
fn crate_path_and_enum_default_check() {
    let out = expansion(parse_quote! {
        #[param(crate = "::opforge")]
        struct P {
            #[param(default = "wrap")]
            mode: Mode,
        }
    });
    assert!(out.contains("impl::opforge::param::ParameterforP"), "{out}");
    assert!(
        out.contains(
            "const_:()=::opforge::param::__private::assert_listed(<Modeas::opforge::param::ParamType>::ENUMERATION,\"wrap\","
        ),
        "{out}"
    );
}

#[test]
fn unknown_and_duplicate_keys() {
    assert_eq!(
        error(parse_quote! { struct P { #[param(deflt = 1)] a: i64 } }),
        "unknown param key 'deflt'; a field takes: default, none, lower_bound, upper_bound, \
         minimum, enumeration, describe, name, flatten"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 1, default = 2)] a: i64 } }),
        "duplicate param key 'default'"
    );
    assert_eq!(
        error(parse_quote! { #[param(krate = "x")] struct P { a: i64 } }),
        "unknown param key 'krate' on the type; it takes: crate"
    );
}

#[test]
fn defaults_of_the_wrong_kind() {
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = "8")] a: i64 } }),
        "the default of field 'a' (an integer) must be an integer literal that fits i64"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 0.5)] a: i32 } }),
        "the default of field 'a' (an integer) must be an integer literal that fits i64"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 1)] a: bool } }),
        "the default of field 'a' (a bool) must be true or false"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = clip)] a: String } }),
        "the default of field 'a' (a String) must be a string literal"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = "x")] a: f32 } }),
        "the default of float field 'a' must be a number literal"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 1e39)] a: f32 } }),
        "the default of float field 'a' is out of the range of f32"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = "float")] t: DataType } }),
        "the default of field 't' (a DataType) must be a DataType variant such as Float"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = [1, "a"])] a: Vec<i64> } }),
        "the default of field 'a' (a Vec of integers) must be an array of integer literals"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 1)] a: Option<i64> } }),
        "field 'a' is an Option: its absence is None, so it takes no default (drop the Option \
         to give one, or name the value that stands for None with none = ...)"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 3)] a: Mode } }),
        "the default of field 'a' (an enum) must be a string literal naming a variant"
    );
}

#[test]
fn bounds_minimum_and_enumeration_misuse() {
    assert_eq!(
        error(parse_quote! { struct P { #[param(lower_bound = 1)] a: String } }),
        "lower_bound applies to number fields only; field 'a' is a String"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(upper_bound = 1)] a: Vec<i64> } }),
        "upper_bound applies to number fields only; field 'a' is a Vec of integers"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(upper_bound = 1e400)] a: f64 } }),
        "upper_bound of field 'a' must be a number literal"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(lower_bound = 0.5)] a: i64 } }),
        "lower_bound of field 'a' must be an integer literal"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(lower_bound = 3, upper_bound = 2)] a: i64 } }),
        "field 'a': lower_bound is above upper_bound"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 9, upper_bound = 8)] a: i64 } }),
        "the default of field 'a' is outside its bounds"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = -0.5, lower_bound = 0)] a: f32 } }),
        "the default of field 'a' is outside its bounds"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(minimum = 1)] a: f32 } }),
        "minimum (TensorFlow's '>= N') applies to integer and Vec fields only; field 'a' is a \
         float"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(minimum = -1)] a: Vec<i64> } }),
        "minimum of field 'a' must be a non-negative integer literal (a length)"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = 1, minimum = 2)] a: i64 } }),
        "the default of field 'a' is below its minimum 2"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(default = [1], minimum = 2)] a: Vec<i32> } }),
        "the default of field 'a' has fewer than 2 elements"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(enumeration("a"))] a: i64 } }),
        "enumeration applies to String and DataType fields only; field 'a' is an integer"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(enumeration("a"))] a: Mode } }),
        "field 'a' is an enum: its values are its variants' names (#[derive(ParamEnum)]), not \
         an enumeration(...)"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(enumeration("a", "a"))] a: String } }),
        "'a' is listed twice in the enumeration"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(enumeration())] a: String } }),
        "enumeration(...) needs at least one value"
    );
    assert_eq!(
        error(parse_quote! {
            struct P { #[param(enumeration("clip", "wrap"), default = "raise")] a: String }
        }),
        "the default 'raise' of field 'a' is not in its enumeration ('clip', 'wrap')"
    );
}

#[test]
fn names_and_shapes_of_the_struct() {
    assert_eq!(
        error(parse_quote! { struct P { #[param(name = "9x")] a: i64 } }),
        "an attr name is a letter, then letters, digits or '_'"
    );
    assert_eq!(
        error(parse_quote! { struct P { _a: i64 } }),
        "field '_a' is not a valid attr name (a letter, then letters, digits or '_'); give one \
         with #[param(name = \"...\")]"
    );
    assert_eq!(
        error(parse_quote! { struct P { a: i64, #[param(name = "a")] b: i64 } }),
        "two fields have the attr name 'a'"
    );
    assert_eq!(
        error(parse_quote! { struct P(i64); }),
        "Parameter derives only for structs with named fields"
    );
    assert_eq!(
        error(parse_quote! { enum P { A } }),
        "Parameter derives only for structs with named fields (derive ParamEnum for an enum)"
    );
    assert_eq!(
        error(parse_quote! { struct P<T> { a: T } }),
        "a Parameter struct cannot be generic"
    );
}

#[test]
fn several_fields_report_every_error() {
    let input: DeriveInput = parse_quote! {
        struct P { #[param(default = "x")] a: i64, #[param(lower_bound = 1)] b: bool }
    };
    let errors: Vec<String> = parameter::expand(&input)
        .unwrap_err()
        .into_iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        errors,
        [
            "the default of field 'a' (an integer) must be an integer literal that fits i64",
            "lower_bound applies to number fields only; field 'b' is a bool",
        ]
    );
}

#[test]
fn param_enum_expansion_and_errors() {
    let out = param_enum::expand(&parse_quote! {
        enum Format { #[param(rename = "NHWC")] Nhwc, Nchw }
    })
    .unwrap()
    .to_string()
    .replace(' ', "");
    for want in [
        "constNAMES:&'static[&'staticstr]=&[\"NHWC\",\"Nchw\"]",
        "\"NHWC\"=>::core::option::Option::Some(Format::Nhwc)",
        "Format::Nchw=>\"Nchw\"",
        "constATTR_TYPE:&'staticstr=\"string\"",
    ] {
        assert!(out.contains(want), "missing {want} in {out}");
    }
    assert_eq!(
        enum_error(parse_quote! { enum E { A(i32) } }),
        "variant 'A' has fields; a ParamEnum's variants are unit variants"
    );
    assert_eq!(
        enum_error(parse_quote! { enum E { A, #[param(rename = "A")] B } }),
        "two variants have the name 'A'"
    );
    assert_eq!(
        enum_error(parse_quote! { enum E { #[param(name = "x")] A } }),
        "unknown param key 'name' on a variant; it takes: rename"
    );
    assert_eq!(
        enum_error(parse_quote! { enum E {} }),
        "a ParamEnum needs at least one variant"
    );
    assert_eq!(
        enum_error(parse_quote! { struct E { a: i64 } }),
        "ParamEnum derives only for enums of unit variants"
    );
}

#[test]
fn flattened_fields_take_the_nested_struct_s_values() {
    let out = expansion(parse_quote! {
        struct P {
            #[param(default = 1)]
            a: i64,
            #[param(flatten)]
            grid: Grid,
            #[param(default = 2)]
            b: i64,
        }
    });
    for want in [
        "constFIELD_COUNT:usize=0usize+1usize+<Gridas::opforge_core::param::Parameter>::FIELD_COUNT+1usize;",
        "fields.extend(<Gridas::opforge_core::param::Parameter>::fields());",
        "grid:<Gridas::opforge_core::param::Parameter>::from_values(owner,values.get(0usize+1usize..0usize+1usize+<Gridas::opforge_core::param::Parameter>::FIELD_COUNT).unwrap_or(&[]),)?",
        "b:::opforge_core::param::__private::take::<i64>(owner,\"b\",values.get(0usize+1usize+<Gridas::opforge_core::param::Parameter>::FIELD_COUNT))?",
    ] {
        assert!(out.contains(want), "missing {want} in {out}");
    }
    assert_eq!(
        error(parse_quote! { struct P { #[param(flatten, default = 1)] g: Grid } }),
        "field 'g' is flattened: it takes no other param key"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(flatten)] g: Option<Grid> } }),
        "a flattened field is a Parameter struct, not an Option of an enum"
    );
}

#[test]
fn none_values_of_option_fields() {
    let out = expansion(parse_quote! {
        struct P {
            #[param(none = -1)]
            axis: Option<i64>,
            b: i64,
        }
    });
    assert!(
        out.contains(
            "none:::core::option::Option::Some(::opforge_core::param::__private::int(-1i64))"
        ),
        "{out}"
    );
    assert!(out.contains("none:::core::option::Option::None"), "{out}");
    assert_eq!(
        error(parse_quote! { struct P { #[param(none = -1)] a: i64 } }),
        "none (the value that stands for None in the OpDef) applies to Option fields only; \
         field 'a' is an integer"
    );
    assert_eq!(
        error(parse_quote! { struct P { #[param(none = "x")] a: Option<i64> } }),
        "the none value of field 'a' (an integer) must be an integer literal that fits i64"
    );
}
