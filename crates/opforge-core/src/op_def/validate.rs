//! OpDef validation with TensorFlow's rules (`ValidateOpDef`), for OpDefs
//! from any source: the builder, a text-format OpList, an op library.

use super::attr_value::{
    attr_value_has_type, split_list_type, validate_attr_value, ATTR_BASE_TYPES,
};
use super::spec::{is_valid_arg_name, is_valid_attr_name};
use crate::dtype::DataType;
use crate::proto::{op_def::ArgDef, OpDef};
use crate::{Result, Status};
use std::collections::HashSet;

/// Whether `name` is a valid op name: CamelCase (`[A-Z][a-zA-Z0-9>_]*`), or
/// anything starting with `_` (an internal op), as TensorFlow's `ValidateOpDef`.
pub fn is_valid_op_name(name: &str) -> bool {
    if name.starts_with('_') {
        return true;
    }
    let mut c = name.chars();
    c.next().is_some_and(|f| f.is_ascii_uppercase())
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '>')
}

/// Validates an OpDef with TensorFlow's rules: a CamelCase name; unique,
/// well-formed attr and argument names; known attr types; minimums only on
/// int and list attrs (non-negative for lists); allowed values of the attr's
/// type; defaults of the attr's type that satisfy its constraints; and every
/// argument typed by exactly one of a data type, a `type` attr or a
/// `list(type)` attr, with `N * T` lengths naming an int attr with a
/// minimum >= 0. Errors are `InvalidArgument` and start with the op's name.
///
/// ```
/// use opforge_core::op_def::validate_op_def;
/// use opforge_core::proto::{self, OpDef};
/// let op: OpDef = proto::from_text("name: 'Bad' attr { name: 'a' type: 'blob' }").unwrap();
/// let err = validate_op_def(&op).unwrap_err();
/// assert_eq!(err.message(), "Bad: Unrecognized type 'blob' in attr 'a'");
/// ```
pub fn validate_op_def(op: &OpDef) -> Result<()> {
    validate(op).map_err(|m| Status::invalid_argument(format!("{}: {m}", op.name)))
}

fn validate(op: &OpDef) -> std::result::Result<(), String> {
    if !is_valid_op_name(&op.name) {
        return Err(format!(
            "Invalid name: {} (Did you use CamelCase?) Op names start with an uppercase letter followed by \
             letters, digits or '_' (like ZeroOut); a leading '_' marks an internal op",
            if op.name.is_empty() { "<empty>" } else { &op.name }
        ));
    }
    let mut names: HashSet<&str> = HashSet::new();
    for attr in &op.attr {
        if !names.insert(&attr.name) {
            return Err(format!("Duplicate name: {}", attr.name));
        }
        if !is_valid_attr_name(&attr.name) {
            return Err(format!(
                "Invalid attr name '{}': use letters, digits and '_', starting with a letter",
                attr.name
            ));
        }
        if DataType::from_spec_name(&attr.name).is_some() {
            return Err(format!(
                "Attr can't have name {} that matches a data type",
                attr.name
            ));
        }
        let (base, is_list) = split_list_type(&attr.r#type);
        if attr.r#type.starts_with("list(") && !is_list {
            return Err(format!(
                "'list(' is missing ')' in attr {}'s type {}",
                attr.name, attr.r#type
            ));
        }
        if !ATTR_BASE_TYPES.contains(&base) {
            return Err(format!(
                "Unrecognized type '{}' in attr '{}'",
                base, attr.name
            ));
        }
        if attr.has_minimum {
            if !(base == "int" || is_list) {
                return Err(format!(
                    "Attr '{}' has minimum for unsupported type {}",
                    attr.name, attr.r#type
                ));
            }
            if is_list && attr.minimum < 0 {
                return Err(format!(
                    "Attr '{}' with list type must have a non-negative minimum, not {}",
                    attr.name, attr.minimum
                ));
            }
        } else if attr.minimum != 0 {
            return Err(format!(
                "Attr '{}' with has_minimum = false but minimum {} not equal to default of 0",
                attr.name, attr.minimum
            ));
        }
        if let Some(allowed) = &attr.allowed_values {
            let list_type = if is_list {
                attr.r#type.clone()
            } else {
                format!("list({})", attr.r#type)
            };
            attr_value_has_type(allowed, &list_type).map_err(|e| {
                format!(
                    "{} for attr '{}' in Op '{}'",
                    e.message(),
                    attr.name,
                    op.name
                )
            })?;
        }
        if let Some(default) = &attr.default_value {
            validate_attr_value(default, attr)
                .map_err(|e| format!("{} in Op '{}'", e.message(), op.name))?;
        }
    }
    for arg in &op.input_arg {
        validate_arg(arg, op, false, &mut names)?;
    }
    for arg in &op.output_arg {
        validate_arg(arg, op, true, &mut names)?;
    }
    Ok(())
}

fn validate_arg<'a>(
    arg: &'a ArgDef,
    op: &OpDef,
    output: bool,
    names: &mut HashSet<&'a str>,
) -> std::result::Result<(), String> {
    let suffix = format!(
        " for {} '{}'",
        if output { "output" } else { "input" },
        arg.name
    );
    if !names.insert(&arg.name) {
        return Err(format!("Duplicate name: {}", arg.name));
    }
    if !is_valid_arg_name(&arg.name) {
        return Err(format!(
            "Invalid argument name '{}': use lowercase letters, digits and '_', starting with a letter",
            arg.name
        ));
    }
    let has_type = arg.r#type != 0;
    if !(has_type || !arg.type_attr.is_empty() || !arg.type_list_attr.is_empty()) {
        return Err(format!("Missing type{suffix}"));
    }
    let find = |name: &str| op.attr.iter().find(|a| a.name == name);
    if !arg.number_attr.is_empty() {
        let attr = find(&arg.number_attr)
            .ok_or_else(|| format!("No attr with name '{}'{suffix}", arg.number_attr))?;
        if attr.r#type != "int" {
            return Err(format!(
                "Attr '{}' used as length{suffix} has type {} != int",
                attr.name, attr.r#type
            ));
        }
        if !attr.has_minimum {
            return Err(format!(
                "Attr '{}' used as length{suffix} must have minimum",
                attr.name
            ));
        }
        if attr.minimum < 0 {
            return Err(format!(
                "Attr '{}' used as length{suffix} must have minimum >= 0",
                attr.name
            ));
        }
        if !arg.type_list_attr.is_empty() {
            return Err(format!(
                "Can't have both number_attr and type_list_attr{suffix}"
            ));
        }
        if usize::from(has_type) + usize::from(!arg.type_attr.is_empty()) != 1 {
            return Err(format!(
                "Exactly one of type, type_attr must be set{suffix}"
            ));
        }
    } else {
        let set = usize::from(has_type)
            + usize::from(!arg.type_attr.is_empty())
            + usize::from(!arg.type_list_attr.is_empty());
        if set != 1 {
            return Err(format!(
                "Exactly one of type, type_attr, type_list_attr must be set{suffix}"
            ));
        }
    }
    if !arg.type_attr.is_empty() {
        let attr = find(&arg.type_attr)
            .ok_or_else(|| format!("No attr with name '{}'{suffix}", arg.type_attr))?;
        if attr.r#type != "type" {
            return Err(format!(
                "Attr '{}' used as type_attr{suffix} has type {} != type",
                attr.name, attr.r#type
            ));
        }
    } else if !arg.type_list_attr.is_empty() {
        let attr = find(&arg.type_list_attr)
            .ok_or_else(|| format!("No attr with name '{}'{suffix}", arg.type_list_attr))?;
        if attr.r#type != "list(type)" {
            return Err(format!(
                "Attr '{}' used as type_list_attr{suffix} has type {} != list(type)",
                attr.name, attr.r#type
            ));
        }
    } else {
        match DataType::from_i32(arg.r#type) {
            None => return Err(format!("Invalid DataType enum {}{suffix}", arg.r#type)),
            Some(dt) if dt.is_ref() => {
                return Err(format!(
                    "Illegal use of ref type '{}'. Use 'Ref(type)' instead{suffix}",
                    dt.name()
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn check(text: &str) -> std::result::Result<(), String> {
        let op: OpDef = proto::from_text(text).unwrap();
        validate_op_def(&op).map_err(|e| e.message().to_string())
    }

    #[test]
    fn op_names() {
        assert!(is_valid_op_name("ZeroOut"));
        assert!(is_valid_op_name("_Internal.anything"));
        assert!(is_valid_op_name("Op2>x_y"));
        assert!(!is_valid_op_name("zeroOut"));
        assert!(!is_valid_op_name(""));
        assert!(!is_valid_op_name("Zero-Out"));
        assert!(check("name: 'zero_out'")
            .unwrap_err()
            .contains("Did you use CamelCase?"));
    }

    #[test]
    fn tensorflow_rules() {
        let cases = [
            ("name: 'A' attr { name: 'a' type: 'int' } attr { name: 'a' type: 'int' }", "Duplicate name: a"),
            ("name: 'A' attr { name: 'int32' type: 'int' }", "Attr can't have name int32 that matches a data type"),
            ("name: 'A' attr { name: 'a' type: 'list(int' }", "'list(' is missing ')' in attr a's type list(int"),
            ("name: 'A' attr { name: 'a' type: 'float' has_minimum: true }", "Attr 'a' has minimum for unsupported type float"),
            (
                "name: 'A' attr { name: 'a' type: 'list(int)' has_minimum: true minimum: -1 }",
                "Attr 'a' with list type must have a non-negative minimum, not -1",
            ),
            (
                "name: 'A' attr { name: 'a' type: 'int' minimum: 3 }",
                "Attr 'a' with has_minimum = false but minimum 3 not equal to default of 0",
            ),
            (
                "name: 'A' attr { name: 'a' type: 'type' allowed_values { list { i: 1 } } }",
                "AttrValue had value with type 'list(int)' when 'list(type)' expected for attr 'a' in Op 'A'",
            ),
            (
                "name: 'A' attr { name: 'a' type: 'int' default_value { s: 'x' } }",
                "AttrValue had value with type 'string' when 'int' expected for attr 'a' in Op 'A'",
            ),
            ("name: 'A' input_arg { name: 'x' }", "Missing type for input 'x'"),
            ("name: 'A' input_arg { name: 'x' type: DT_FLOAT type_attr: 'T' }", "Exactly one of type, type_attr, type_list_attr must be set for input 'x'"),
            ("name: 'A' output_arg { name: 'x' type_attr: 'T' }", "No attr with name 'T' for output 'x'"),
            (
                "name: 'A' attr { name: 'T' type: 'int' } input_arg { name: 'x' type_attr: 'T' }",
                "Attr 'T' used as type_attr for input 'x' has type int != type",
            ),
            (
                "name: 'A' attr { name: 'N' type: 'int' } input_arg { name: 'x' type: DT_FLOAT number_attr: 'N' }",
                "Attr 'N' used as length for input 'x' must have minimum",
            ),
            (
                "name: 'A' attr { name: 'N' type: 'int' has_minimum: true minimum: -1 } input_arg { name: 'x' type: DT_FLOAT number_attr: 'N' }",
                "Attr 'N' used as length for input 'x' must have minimum >= 0",
            ),
            (
                "name: 'A' attr { name: 'T' type: 'list(type)' } input_arg { name: 'x' type_attr: 'T' }",
                "Attr 'T' used as type_attr for input 'x' has type list(type) != type",
            ),
            ("name: 'A' input_arg { name: 'x' type: DT_FLOAT_REF }", "Illegal use of ref type 'float_ref'. Use 'Ref(type)' instead for input 'x'"),
            ("name: 'A' input_arg { name: 'x' type: DT_FLOAT } output_arg { name: 'x' type: DT_FLOAT }", "Duplicate name: x"),
            ("name: 'A' input_arg { name: 'X' type: DT_FLOAT }", "Invalid argument name 'X'"),
            (
                "name: 'A' attr { name: 'T' type: 'type' default_value { type: DT_BOOL } allowed_values { list { type: DT_FLOAT } } }",
                "Value for attr 'T' of bool is not in the list of allowed values: float in Op 'A'",
            ),
        ];
        for (text, want) in cases {
            let got = check(text).expect_err(text);
            assert!(got.starts_with("A: ") || got.starts_with("A:"), "{got}");
            assert!(got.contains(want), "{text}\n  got:  {got}\n  want: {want}");
        }
        check("name: 'A' attr { name: 'T' type: 'type' } input_arg { name: 'x' type_attr: 'T' is_ref: true }").unwrap();
    }
}
