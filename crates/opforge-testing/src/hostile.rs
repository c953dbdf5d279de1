//! Hostile-input machinery shared by the tests that sweep every registered
//! op (`tests/hostile_shape.rs`, `tests/hostile_kernel.rs`).

use opforge_core::proto::attr_value::{ListValue, Value};
use opforge_core::proto::{AttrValue, OpDef};
use opforge_core::DataType;

/// A plausible value for every attr of `op` (its default, else one of the
/// attr's type), so shape functions get past their attr reads.
pub fn plausible_attrs(op: &OpDef) -> Vec<(String, AttrValue)> {
    op.attr
        .iter()
        .map(|a| {
            if let Some(d) = &a.default_value {
                return (a.name.clone(), d.clone());
            }
            let allowed_type = a
                .allowed_values
                .as_ref()
                .and_then(|v| match &v.value {
                    Some(Value::List(l)) => l.r#type.first().copied(),
                    _ => None,
                })
                .unwrap_or(DataType::Float as i32);
            let value = match a.r#type.as_str() {
                "type" => Value::Type(allowed_type),
                "int" => Value::I(a.minimum.max(2)),
                "float" => Value::F(0.5),
                "bool" => Value::B(false),
                "string" => Value::S(
                    a.allowed_values
                        .as_ref()
                        .and_then(|v| match &v.value {
                            Some(Value::List(l)) => l.s.first().cloned(),
                            _ => None,
                        })
                        .unwrap_or_default(),
                ),
                "shape" => Value::Shape(Default::default()),
                "list(type)" => Value::List(Box::new(ListValue {
                    r#type: vec![allowed_type; (a.minimum.max(2)) as usize],
                    ..Default::default()
                })),
                "list(int)" => Value::List(Box::new(ListValue {
                    i: vec![1; (a.minimum.max(4)) as usize],
                    ..Default::default()
                })),
                _ => Value::List(Box::default()),
            };
            (a.name.clone(), AttrValue { value: Some(value) })
        })
        .collect()
}
