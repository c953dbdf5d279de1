//! The example ops: `ZeroOut` from TensorFlow's "Create an op" guide,
//! `StringToNumber` as TensorFlow 2.x defines it, and the guide's examples
//! of attrs, defaults and polymorphic inputs.

use opforge_core::{register_op, OpDefBuilder};

/// The names of the ops this module registers.
pub const OPS: &[&str] = &[
    "ZeroOut",
    "StringToNumber",
    "AttrDefaultExampleForAllTypes",
    "PolymorphicListExample",
    "SameListInputExample",
    "MinLengthIntListExample",
    "MultipleInsAndOuts",
];

/// Keeps this module's object code, and so its registrations, in the
/// binary (see [`crate::link`]).
#[inline(never)]
pub(crate) fn link() {
    std::hint::black_box(OPS);
}

/// `ZeroOut`: the op of TensorFlow's "Create an op" guide.
pub fn zero_out() -> OpDefBuilder {
    OpDefBuilder::new("ZeroOut")
        .attr("T: realnumbertype = DT_INT32")
        .attr("preserve_index: int = 0")
        .input("to_zero: T")
        .output("zeroed: T")
        .doc(
            "Zeros out every element of the input except one.\n\
             \n\
             The output has the shape and type of the input. The element at flat\n\
             (row-major) index `preserve_index`, 0 by default, keeps its value;\n\
             every other element is set to zero.",
        )
}

/// `StringToNumber`, exactly as TensorFlow 2.x registers it.
pub fn string_to_number() -> OpDefBuilder {
    OpDefBuilder::new("StringToNumber")
        .input("string_tensor: string")
        .output("output: out_type")
        .attr("out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT")
        .doc(
            "Converts each string in the input Tensor to the specified numeric type.\n\
             \n\
             (Note that int32 overflow results in an error while float overflow\n\
             results in a rounded value.)",
        )
}

/// `AttrDefaultExampleForAllTypes`: a default value for every attr type.
pub fn attr_default_example_for_all_types() -> OpDefBuilder {
    OpDefBuilder::new("AttrDefaultExampleForAllTypes")
        .attr("s: string = 'foo'")
        .attr("i: int = 0")
        .attr("f: float = 1.0")
        .attr("b: bool = true")
        .attr("ty: type = DT_INT32")
        .attr("sh: shape = { dim { size: 1 } dim { size: 2 } }")
        .attr("te: tensor = { dtype: DT_INT32 int_val: 5 }")
        .attr("l_empty: list(int) = []")
        .attr("l_int: list(int) = [2, 3, 5, 7]")
        .doc("Shows a default value for an attr of every type.")
}

/// `PolymorphicListExample`: a list input whose element types may differ.
pub fn polymorphic_list_example() -> OpDefBuilder {
    OpDefBuilder::new("PolymorphicListExample")
        .attr("T: list(type)")
        .input("in: T")
        .output("out: T")
        .doc("Takes a list of tensors of any types and returns a list of the same types.")
}

/// `SameListInputExample`: a list input whose tensors all have one type.
pub fn same_list_input_example() -> OpDefBuilder {
    OpDefBuilder::new("SameListInputExample")
        .attr("N: int")
        .attr("T: type")
        .input("in: N * T")
        .output("out: T")
        .doc("Takes N tensors of one type T and returns one tensor of type T.")
}

/// `MinLengthIntListExample`: a list input of at least two `int32` tensors.
pub fn min_length_int_list_example() -> OpDefBuilder {
    OpDefBuilder::new("MinLengthIntListExample")
        .attr("N: int >= 2")
        .input("in: N * int32")
        .output("out: int32")
        .doc("Takes at least two int32 tensors and returns one int32 tensor.")
}

/// `MultipleInsAndOuts`: several inputs and outputs of fixed types.
pub fn multiple_ins_and_outs() -> OpDefBuilder {
    OpDefBuilder::new("MultipleInsAndOuts")
        .input("y: int32")
        .input("z: float")
        .output("a: string")
        .output("b: int32")
        .doc("Takes an int32 and a float tensor and returns a string and an int32 tensor.")
}

register_op!(zero_out());
register_op!(string_to_number());
register_op!(attr_default_example_for_all_types());
register_op!(polymorphic_list_example());
register_op!(same_list_input_example());
register_op!(min_length_int_list_example());
register_op!(multiple_ins_and_outs());

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::proto::{self, attr_value::Value, OpDef};
    use opforge_core::{registry, DataType, OpRegistry};

    fn all() -> Vec<OpDefBuilder> {
        vec![
            zero_out(),
            string_to_number(),
            attr_default_example_for_all_types(),
            polymorphic_list_example(),
            same_list_input_example(),
            min_length_int_list_example(),
            multiple_ins_and_outs(),
        ]
    }

    #[test]
    fn every_example_finalizes() {
        let builders = all();
        assert_eq!(
            builders.iter().map(|b| b.name()).collect::<Vec<_>>(),
            OPS,
            "OPS lists every example"
        );
        for b in builders {
            let op = b.finalize().unwrap_or_else(|e| panic!("{}: {e}", b.name()));
            assert_eq!(op.name, b.name());
            assert!(!op.summary.is_empty(), "{} has a summary", op.name);
        }
    }

    #[test]
    fn every_example_is_registered() {
        crate::link();
        let global = OpRegistry::global();
        global.check_startup().unwrap();
        for name in OPS {
            if registry::should_register_op(name, registry::OPS_TO_REGISTER) {
                let registered = global.op_def(name).unwrap();
                let built = all()
                    .into_iter()
                    .find(|b| b.name() == *name)
                    .unwrap()
                    .finalize()
                    .unwrap();
                assert_eq!(registered, built);
            }
        }
    }

    #[test]
    fn zero_out_op_def() {
        let op = zero_out().finalize().unwrap();
        assert_eq!(op.input_arg.len(), 1);
        assert_eq!(op.input_arg[0].name, "to_zero");
        assert_eq!(op.input_arg[0].type_attr, "T");
        assert_eq!(op.output_arg.len(), 1);
        assert_eq!(op.output_arg[0].name, "zeroed");
        assert_eq!(op.output_arg[0].type_attr, "T");
        assert_eq!(op.attr.len(), 2);
        let t = &op.attr[0];
        assert_eq!((t.name.as_str(), t.r#type.as_str()), ("T", "type"));
        assert_eq!(
            t.default_value.as_ref().and_then(|v| v.value.clone()),
            Some(Value::Type(DataType::Int32 as i32))
        );
        let Some(Value::List(allowed)) = t.allowed_values.as_ref().and_then(|v| v.value.clone())
        else {
            panic!("T has allowed values: {t:?}");
        };
        let expected: Vec<i32> = opforge_core::dtype::REAL_NUMBER_TYPES
            .iter()
            .map(|&d| d as i32)
            .collect();
        assert_eq!(allowed.r#type, expected);
        let p = &op.attr[1];
        assert_eq!(
            (p.name.as_str(), p.r#type.as_str()),
            ("preserve_index", "int")
        );
        assert_eq!(
            p.default_value.as_ref().and_then(|v| v.value.clone()),
            Some(Value::I(0))
        );
        assert_eq!(
            op.summary,
            "Zeros out every element of the input except one."
        );
        assert!(
            op.description.contains("preserve_index"),
            "{}",
            op.description
        );
        assert!(!op.is_stateful);
        assert_eq!(
            opforge_core::signature::python_signature(&op),
            "zero_out(to_zero, preserve_index=0, name=None)"
        );
    }

    #[test]
    fn string_to_number_matches_tensorflow() {
        // TensorFlow 2.21's registered OpDef (summary and description stripped).
        let expected: OpDef = proto::from_text(
            r#"
            name: "StringToNumber"
            input_arg { name: "string_tensor" type: DT_STRING }
            output_arg { name: "output" type_attr: "out_type" }
            attr {
              name: "out_type"
              type: "type"
              default_value { type: DT_FLOAT }
              allowed_values {
                list { type: [DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT32, DT_UINT64] }
              }
            }
            "#,
        )
        .unwrap();
        let mut op = string_to_number().finalize().unwrap();
        op.summary.clear();
        op.description.clear();
        assert_eq!(op, expected);
    }

    #[test]
    fn guide_examples() {
        let op = attr_default_example_for_all_types().finalize().unwrap();
        assert!(op.input_arg.is_empty() && op.output_arg.is_empty());
        let names: Vec<&str> = op.attr.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            ["s", "i", "f", "b", "ty", "sh", "te", "l_empty", "l_int"]
        );
        assert!(op.attr.iter().all(|a| a.default_value.is_some()));
        assert_eq!(
            opforge_core::signature::python_signature(&op),
            "attr_default_example_for_all_types(s='foo', i=0, f=1.0, b=True, ty=tf.int32, \
             sh=[1, 2], te=\"\"\"dtype: DT_INT32 int_val: 5\"\"\", l_empty=[], \
             l_int=[2, 3, 5, 7], name=None)"
        );

        let op = polymorphic_list_example().finalize().unwrap();
        assert_eq!(op.input_arg[0].type_list_attr, "T");
        assert_eq!(op.output_arg[0].type_list_attr, "T");

        let op = same_list_input_example().finalize().unwrap();
        assert_eq!(op.input_arg[0].number_attr, "N");
        assert_eq!(op.input_arg[0].type_attr, "T");
        assert_eq!(
            opforge_core::signature::python_signature(&op),
            "same_list_input_example(in_, name=None)"
        );

        let op = min_length_int_list_example().finalize().unwrap();
        assert_eq!(op.input_arg[0].number_attr, "N");
        assert_eq!(op.input_arg[0].r#type, DataType::Int32 as i32);
        assert!(op.attr[0].has_minimum);
        assert_eq!(op.attr[0].minimum, 2);

        let op = multiple_ins_and_outs().finalize().unwrap();
        let types = |args: &[proto::op_def::ArgDef]| -> Vec<(String, i32)> {
            args.iter().map(|a| (a.name.clone(), a.r#type)).collect()
        };
        assert_eq!(
            types(&op.input_arg),
            [
                ("y".to_string(), DataType::Int32 as i32),
                ("z".to_string(), DataType::Float as i32)
            ]
        );
        assert_eq!(
            types(&op.output_arg),
            [
                ("a".to_string(), DataType::String as i32),
                ("b".to_string(), DataType::Int32 as i32)
            ]
        );
    }
}
