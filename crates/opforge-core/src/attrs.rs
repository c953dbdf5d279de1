//! Node attributes: the complete attr map of a call to an op, inferred from
//! the inputs' dtypes and the attrs the caller gave (TensorFlow's
//! `NodeDefBuilder`, `AddDefaultsToNodeDef`, `ValidateNodeDef` and
//! `InOutTypesForNode`), plus typed access to attr values.

use crate::dtype::DataType;
use crate::op_def::{data_type_list_string, summarize_attr_value, validate_attr_value};
use crate::proto::{
    attr_value::ListValue, attr_value::Value, op_def::ArgDef, AttrValue, OpDef, TensorShapeProto,
};
use crate::{Result, Status, Tensor};
use std::ops::Range;

mod map;

pub use map::AttrMap;

/// The dtypes a caller passes for one input argument: one tensor, or a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgTypes {
    /// A single tensor of this dtype.
    Single(DataType),
    /// A list of tensors (for `N * T` and `list(type)` arguments).
    List(Vec<DataType>),
}

impl ArgTypes {
    fn dtypes(&self) -> &[DataType] {
        match self {
            ArgTypes::Single(d) => std::slice::from_ref(d),
            ArgTypes::List(l) => l,
        }
    }
}

/// A call resolved against its OpDef: every attr, and the flat dtypes of
/// the inputs and outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedCall {
    /// Every attr of the op, given, inferred or defaulted.
    pub attrs: AttrMap,
    /// The dtype of each flat input tensor.
    pub input_types: Vec<DataType>,
    /// The dtype of each flat output tensor.
    pub output_types: Vec<DataType>,
}

/// A short `[T=DT_FLOAT, axis=0]` summary of attrs, for error messages.
pub fn summarize_attrs(attrs: &AttrMap) -> String {
    let parts: Vec<String> = attrs
        .iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .map(|(k, v)| format!("{k}={}", summarize_attr_value(v)))
        .collect();
    format!("[{}]", parts.join(", "))
}

fn type_value(dt: DataType) -> AttrValue {
    AttrValue {
        value: Some(Value::Type(dt as i32)),
    }
}

fn set_or_check(
    op: &OpDef,
    attrs: &mut AttrMap,
    name: &str,
    value: AttrValue,
    arg: &ArgDef,
    what: &str,
) -> Result<()> {
    match attrs.get(name) {
        None => {
            attrs.insert(name.to_string(), value);
            Ok(())
        }
        Some(existing) if *existing == value => Ok(()),
        Some(existing) => Err(Status::invalid_argument(format!(
            "{}: input '{}' {what} {}, but attr '{name}' is already {} (from an earlier input or the given attrs)",
            op.name,
            arg.name,
            summarize_attr_value(&value),
            summarize_attr_value(existing)
        ))),
    }
}

/// Resolves a call: infers type attrs (`T`), number attrs (`N`) and
/// `list(type)` attrs from the inputs, fills defaults, checks every
/// constraint, and computes the input and output dtypes.
///
/// ```
/// use opforge_core::attrs::{resolve_call, ArgTypes, AttrMap};
/// use opforge_core::{DataType, OpDefBuilder};
/// let op = OpDefBuilder::new("AddN").attr("N: int >= 1").attr("T: {float, int32}")
///     .input("inputs: N * T").output("sum: T").finalize().unwrap();
/// let call = resolve_call(&op, &[ArgTypes::List(vec![DataType::Float; 3])], &AttrMap::new()).unwrap();
/// assert_eq!(call.output_types, vec![DataType::Float]);
/// let bad = resolve_call(&op, &[ArgTypes::List(vec![DataType::Bool])], &AttrMap::new()).unwrap_err();
/// assert!(bad.message().contains("Value for attr 'T' of bool is not in the list of allowed values: float, int32"));
/// ```
pub fn resolve_call(op: &OpDef, inputs: &[ArgTypes], given: &AttrMap) -> Result<ResolvedCall> {
    if inputs.len() != op.input_arg.len() {
        let names: Vec<&str> = op.input_arg.iter().map(|a| a.name.as_str()).collect();
        return Err(Status::invalid_argument(format!(
            "{} takes {} inputs ({}), but {} were given",
            op.name,
            op.input_arg.len(),
            names.join(", "),
            inputs.len()
        )));
    }
    let mut attrs = given.clone();
    check_known_attrs(op, &attrs)?;
    for (arg, types) in op.input_arg.iter().zip(inputs) {
        let dtypes: Vec<DataType> = types.dtypes().iter().map(|d| d.base()).collect();
        if !arg.number_attr.is_empty() {
            let ArgTypes::List(_) = types else {
                return Err(Status::invalid_argument(format!(
                    "{}: input '{}' takes a list of tensors ({} * ...), not a single tensor",
                    op.name, arg.name, arg.number_attr
                )));
            };
            let n = AttrValue {
                value: Some(Value::I(dtypes.len() as i64)),
            };
            set_or_check(op, &mut attrs, &arg.number_attr, n, arg, "has length")?;
            if let Some(first) = dtypes.first() {
                if let Some(other) = dtypes.iter().find(|d| *d != first) {
                    return Err(Status::invalid_argument(format!(
                        "{}: the tensors of input '{}' must all have one dtype, but it has {first} and {other}",
                        op.name, arg.name
                    )));
                }
                check_arg_type(op, &mut attrs, arg, *first)?;
            }
        } else if !arg.type_list_attr.is_empty() {
            let list = AttrValue {
                value: Some(Value::List(Box::new(ListValue {
                    r#type: dtypes.iter().map(|&d| d as i32).collect(),
                    ..Default::default()
                }))),
            };
            set_or_check(op, &mut attrs, &arg.type_list_attr, list, arg, "has types")?;
        } else {
            let ArgTypes::Single(dt) = types else {
                return Err(Status::invalid_argument(format!(
                    "{}: input '{}' takes a single tensor, not a list",
                    op.name, arg.name
                )));
            };
            check_arg_type(op, &mut attrs, arg, dt.base())?;
        }
    }
    add_defaults(op, &mut attrs);
    validate_attrs(op, &attrs)?;
    let (input_types, output_types) = in_out_types(op, &attrs)?;
    Ok(ResolvedCall {
        attrs,
        input_types,
        output_types,
    })
}

fn check_arg_type(op: &OpDef, attrs: &mut AttrMap, arg: &ArgDef, dt: DataType) -> Result<()> {
    if !arg.type_attr.is_empty() {
        return set_or_check(op, attrs, &arg.type_attr, type_value(dt), arg, "has type");
    }
    let want = DataType::from_i32(arg.r#type).unwrap_or(DataType::Invalid);
    if want != dt {
        return Err(Status::invalid_argument(format!(
            "{}: input '{}' must be {want}, but a {dt} tensor was given",
            op.name, arg.name
        )));
    }
    Ok(())
}

/// Errors on attrs the op does not have (names starting with `_` are
/// internal and always allowed).
pub(crate) fn check_known_attrs(op: &OpDef, attrs: &AttrMap) -> Result<()> {
    for name in attrs.keys() {
        if !name.starts_with('_') && !op.attr.iter().any(|a| &a.name == name) {
            let known: Vec<&str> = op.attr.iter().map(|a| a.name.as_str()).collect();
            return Err(Status::invalid_argument(format!(
                "{} has no attr named '{name}'; its attrs are: {}",
                op.name,
                if known.is_empty() {
                    "(none)".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
    }
    Ok(())
}

/// Adds the default of every attr that is not set (TensorFlow's `AddDefaultsToNodeDef`).
pub fn add_defaults(op: &OpDef, attrs: &mut AttrMap) {
    for attr in &op.attr {
        if let (Some(default), false) = (&attr.default_value, attrs.contains_key(&attr.name)) {
            attrs.insert(attr.name.clone(), default.clone());
        }
    }
}

/// Checks that every attr of the op is present and valid and that no
/// unknown attr is set.
pub fn validate_attrs(op: &OpDef, attrs: &AttrMap) -> Result<()> {
    check_known_attrs(op, attrs)?;
    for attr in &op.attr {
        let Some(value) = attrs.get(&attr.name) else {
            return Err(Status::invalid_argument(format!(
                "{}: attr '{}' ({}) has no value: it was not given, has no default, and cannot be inferred from the inputs",
                op.name, attr.name, attr.r#type
            )));
        };
        validate_attr_value(value, attr)
            .map_err(|e| Status::invalid_argument(format!("{}: {}", op.name, e.message())))?;
    }
    Ok(())
}

/// The most tensors one list argument (`N * T`) of a node may have: far
/// above any real graph, low enough that a hostile count attr (`num_split:
/// 10^12`) is an error instead of an allocation that kills the process.
pub const MAX_LIST_ARG_LEN: i64 = 1 << 24;

/// The dtypes of one argument, given the node's attrs.
pub fn arg_types(op: &OpDef, arg: &ArgDef, attrs: &AttrMap) -> Result<Vec<DataType>> {
    let get = |name: &str| {
        attrs.get(name).ok_or_else(|| {
            Status::invalid_argument(format!(
                "{}: attr '{name}' of argument '{}' has no value",
                op.name, arg.name
            ))
        })
    };
    let single = if !arg.type_attr.is_empty() {
        match get(&arg.type_attr)?.value {
            Some(Value::Type(t)) => DataType::from_i32(t).unwrap_or(DataType::Invalid),
            _ => {
                return Err(Status::invalid_argument(format!(
                    "{}: attr '{}' is not a type",
                    op.name, arg.type_attr
                )))
            }
        }
    } else if !arg.type_list_attr.is_empty() {
        return match &get(&arg.type_list_attr)?.value {
            Some(Value::List(l)) => Ok(l
                .r#type
                .iter()
                .map(|&t| DataType::from_i32(t).unwrap_or(DataType::Invalid))
                .collect()),
            None => Ok(Vec::new()),
            _ => Err(Status::invalid_argument(format!(
                "{}: attr '{}' is not a list(type)",
                op.name, arg.type_list_attr
            ))),
        };
    } else {
        DataType::from_i32(arg.r#type).unwrap_or(DataType::Invalid)
    };
    let single = if arg.is_ref { single.to_ref() } else { single };
    if arg.number_attr.is_empty() {
        return Ok(vec![single]);
    }
    match get(&arg.number_attr)?.value {
        Some(Value::I(n)) if n > MAX_LIST_ARG_LEN => Err(Status::invalid_argument(format!(
            "{}: attr '{}' = {n} asks for {n} '{}' tensors; a list argument has at most \
             {MAX_LIST_ARG_LEN} (opforge's limit, so a hostile count cannot exhaust memory)",
            op.name, arg.number_attr, arg.name
        ))),
        Some(Value::I(n)) if n >= 0 => Ok(vec![single; n as usize]),
        _ => Err(Status::invalid_argument(format!(
            "{}: attr '{}' must be a non-negative int",
            op.name, arg.number_attr
        ))),
    }
}

/// The flat input and output dtypes of a node (TensorFlow's `InOutTypesForNode`).
pub fn in_out_types(op: &OpDef, attrs: &AttrMap) -> Result<(Vec<DataType>, Vec<DataType>)> {
    let mut ins = Vec::new();
    for arg in &op.input_arg {
        ins.extend(arg_types(op, arg, attrs)?);
    }
    let mut outs = Vec::new();
    for arg in &op.output_arg {
        outs.extend(arg_types(op, arg, attrs)?);
    }
    Ok((ins, outs))
}

/// The range of flat indices each argument takes, in order.
pub fn arg_ranges(op: &OpDef, args: &[ArgDef], attrs: &AttrMap) -> Result<Vec<Range<usize>>> {
    let mut start = 0;
    let mut out = Vec::with_capacity(args.len());
    for arg in args {
        let n = arg_types(op, arg, attrs)?.len();
        out.push(start..start + n);
        start += n;
    }
    Ok(out)
}

/// The dtypes allowed for a type attr, as text (for error messages).
pub fn allowed_types_string(op: &OpDef, attr_name: &str) -> Option<String> {
    let attr = op.attr.iter().find(|a| a.name == attr_name)?;
    match attr.allowed_values.as_ref()?.value.as_ref()? {
        Value::List(l) => Some(data_type_list_string(&l.r#type)),
        _ => None,
    }
}

/// Reads a typed value out of an `AttrValue`.
pub trait FromAttrValue: Sized {
    /// The attr type this Rust type reads, for messages (`int`, `list(type)`).
    const ATTR_TYPE: &'static str;
    /// The value, or `None` if the `AttrValue` holds another type.
    fn from_attr_value(value: &AttrValue) -> Option<Self>;
}

macro_rules! scalar_attr {
    ($t:ty, $name:literal, $pat:pat => $e:expr) => {
        impl FromAttrValue for $t {
            const ATTR_TYPE: &'static str = $name;
            fn from_attr_value(value: &AttrValue) -> Option<Self> {
                match &value.value {
                    Some($pat) => $e,
                    _ => None,
                }
            }
        }
    };
}

macro_rules! list_attr {
    ($t:ty, $name:literal, $l:ident => $e:expr) => {
        impl FromAttrValue for Vec<$t> {
            const ATTR_TYPE: &'static str = $name;
            fn from_attr_value(value: &AttrValue) -> Option<Self> {
                match &value.value {
                    Some(Value::List($l)) => $e,
                    None => Some(Vec::new()),
                    _ => None,
                }
            }
        }
    };
}

scalar_attr!(i64, "int", Value::I(i) => Some(*i));
scalar_attr!(i32, "int", Value::I(i) => i32::try_from(*i).ok());
scalar_attr!(f32, "float", Value::F(f) => Some(*f));
scalar_attr!(bool, "bool", Value::B(b) => Some(*b));
scalar_attr!(String, "string", Value::S(s) => String::from_utf8(s.clone()).ok());
scalar_attr!(Vec<u8>, "string", Value::S(s) => Some(s.clone()));
scalar_attr!(DataType, "type", Value::Type(t) => DataType::from_i32(*t));
scalar_attr!(TensorShapeProto, "shape", Value::Shape(s) => Some(s.clone()));
scalar_attr!(Tensor, "tensor", Value::Tensor(t) => Tensor::from_proto(t).ok());
list_attr!(i64, "list(int)", l => Some(l.i.clone()));
list_attr!(i32, "list(int)", l => l.i.iter().map(|&i| i32::try_from(i).ok()).collect());
list_attr!(f32, "list(float)", l => Some(l.f.clone()));
list_attr!(bool, "list(bool)", l => Some(l.b.clone()));
list_attr!(String, "list(string)", l => l.s.iter().map(|s| String::from_utf8(s.clone()).ok()).collect());
list_attr!(DataType, "list(type)", l => l.r#type.iter().map(|&t| DataType::from_i32(t)).collect());
list_attr!(TensorShapeProto, "list(shape)", l => Some(l.shape.clone()));

/// Reads attr `name` of `attrs` as a `T`, with an error naming the op and attr.
pub fn get_attr<T: FromAttrValue>(op_name: &str, attrs: &AttrMap, name: &str) -> Result<T> {
    let value = attrs
        .get(name)
        .ok_or_else(|| Status::invalid_argument(format!("{op_name}: no attr named '{name}'")))?;
    T::from_attr_value(value).ok_or_else(|| {
        Status::invalid_argument(format!(
            "{op_name}: attr '{name}' is {}, not a valid {}",
            summarize_attr_value(value),
            T::ATTR_TYPE
        ))
    })
}

/// Conversions of Rust values into `AttrValue`s, for building calls.
pub trait IntoAttrValue {
    /// The `AttrValue`.
    fn into_attr_value(self) -> AttrValue;
}

impl IntoAttrValue for AttrValue {
    fn into_attr_value(self) -> AttrValue {
        self
    }
}

macro_rules! into_attr {
    ($t:ty, $v:ident => $e:expr) => {
        impl IntoAttrValue for $t {
            fn into_attr_value(self) -> AttrValue {
                let $v = self;
                AttrValue { value: Some($e) }
            }
        }
    };
}

into_attr!(i64, v => Value::I(v));
into_attr!(i32, v => Value::I(v as i64));
into_attr!(f32, v => Value::F(v));
into_attr!(bool, v => Value::B(v));
into_attr!(&str, v => Value::S(v.as_bytes().to_vec()));
into_attr!(String, v => Value::S(v.into_bytes()));
into_attr!(DataType, v => Value::Type(v as i32));
into_attr!(TensorShapeProto, v => Value::Shape(v));
into_attr!(Vec<i64>, v => Value::List(Box::new(ListValue { i: v, ..Default::default() })));
into_attr!(Vec<i32>, v => Value::List(Box::new(ListValue { i: v.into_iter().map(i64::from).collect(), ..Default::default() })));
into_attr!(Vec<f32>, v => Value::List(Box::new(ListValue { f: v, ..Default::default() })));
into_attr!(Vec<DataType>, v => Value::List(Box::new(ListValue { r#type: v.into_iter().map(|d| d as i32).collect(), ..Default::default() })));
into_attr!(Vec<&str>, v => Value::List(Box::new(ListValue { s: v.into_iter().map(|s| s.as_bytes().to_vec()).collect(), ..Default::default() })));

impl IntoAttrValue for &Tensor {
    fn into_attr_value(self) -> AttrValue {
        AttrValue {
            value: self.to_proto().ok().map(|t| Value::Tensor(Box::new(t))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpDefBuilder;

    fn op(b: OpDefBuilder) -> OpDef {
        b.finalize().unwrap()
    }

    fn attrs(pairs: &[(&str, AttrValue)]) -> AttrMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn infers_type_number_and_list_attrs() {
        let o = op(OpDefBuilder::new("Mix")
            .attr("T: {float, int32}")
            .attr("N: int >= 1")
            .attr("L: list(type) >= 0")
            .attr("k: int = 3")
            .input("a: T")
            .input("b: N * T")
            .input("c: L")
            .input("d: int64")
            .output("o: N * T")
            .output("p: L")
            .output("q: float"));
        let call = resolve_call(
            &o,
            &[
                ArgTypes::Single(DataType::Int32),
                ArgTypes::List(vec![DataType::Int32; 2]),
                ArgTypes::List(vec![DataType::Bool, DataType::String]),
                ArgTypes::Single(DataType::Int64),
            ],
            &AttrMap::new(),
        )
        .unwrap();
        assert_eq!(
            summarize_attrs(&call.attrs),
            "[L=[DT_BOOL, DT_STRING], N=2, T=DT_INT32, k=3]"
        );
        use DataType::*;
        assert_eq!(
            call.input_types,
            vec![Int32, Int32, Int32, Bool, String, Int64]
        );
        assert_eq!(call.output_types, vec![Int32, Int32, Bool, String, Float]);
        assert_eq!(
            arg_ranges(&o, &o.output_arg, &call.attrs).unwrap(),
            vec![0..2, 2..4, 4..5]
        );
    }

    #[test]
    fn errors_name_the_op_and_the_problem() {
        let o = op(OpDefBuilder::new("Add2")
            .attr("T: {float, double, int32}")
            .input("x: T")
            .input("y: T")
            .output("z: T"));
        let e = resolve_call(
            &o,
            &[
                ArgTypes::Single(DataType::Float),
                ArgTypes::Single(DataType::Int32),
            ],
            &AttrMap::new(),
        )
        .unwrap_err();
        assert!(
            e.message()
                .starts_with("Add2: input 'y' has type DT_INT32, but attr 'T' is already DT_FLOAT"),
            "{e}"
        );
        let e = resolve_call(
            &o,
            &[
                ArgTypes::Single(DataType::Bool),
                ArgTypes::Single(DataType::Bool),
            ],
            &AttrMap::new(),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Add2: Value for attr 'T' of bool is not in the list of allowed values: float, double, int32"
        );
        let e =
            resolve_call(&o, &[ArgTypes::Single(DataType::Float)], &AttrMap::new()).unwrap_err();
        assert_eq!(e.message(), "Add2 takes 2 inputs (x, y), but 1 were given");
        let given = attrs(&[("bogus", 1i64.into_attr_value())]);
        let e = resolve_call(
            &o,
            &[
                ArgTypes::Single(DataType::Float),
                ArgTypes::Single(DataType::Float),
            ],
            &given,
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Add2 has no attr named 'bogus'; its attrs are: T"
        );
        let cast = op(OpDefBuilder::new("Cast2")
            .attr("SrcT: type")
            .attr("DstT: type")
            .input("x: SrcT")
            .output("y: DstT"));
        let e =
            resolve_call(&cast, &[ArgTypes::Single(DataType::Float)], &AttrMap::new()).unwrap_err();
        assert!(
            e.message().contains("attr 'DstT' (type) has no value"),
            "{e}"
        );
        let ok = resolve_call(
            &cast,
            &[ArgTypes::Single(DataType::Float)],
            &attrs(&[("DstT", DataType::Int64.into_attr_value())]),
        )
        .unwrap();
        assert_eq!(ok.output_types, vec![DataType::Int64]);
        let n = op(OpDefBuilder::new("Min2")
            .attr("N: int >= 2")
            .input("x: N * float")
            .output("y: float"));
        let e = resolve_call(
            &n,
            &[ArgTypes::List(vec![DataType::Float])],
            &AttrMap::new(),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "Min2: Value for attr 'N' of 1 must be at least minimum 2"
        );
        let e =
            resolve_call(&n, &[ArgTypes::Single(DataType::Float)], &AttrMap::new()).unwrap_err();
        assert!(e.message().contains("takes a list of tensors"), "{e}");
        let e = resolve_call(
            &n,
            &[ArgTypes::List(vec![DataType::Float, DataType::Int32])],
            &AttrMap::new(),
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("must all have one dtype, but it has float and int32"),
            "{e}"
        );
        let e = resolve_call(
            &n,
            &[ArgTypes::List(vec![DataType::Int32; 2])],
            &AttrMap::new(),
        )
        .unwrap_err();
        assert!(
            e.message()
                .contains("must be float, but a int32 tensor was given"),
            "{e}"
        );
    }

    #[test]
    fn typed_attr_access() {
        let a = attrs(&[
            ("i", 3i64.into_attr_value()),
            ("l", vec![1i64, 2].into_attr_value()),
            ("t", DataType::Half.into_attr_value()),
            ("s", "NHWC".into_attr_value()),
        ]);
        assert_eq!(get_attr::<i64>("Op", &a, "i").unwrap(), 3);
        assert_eq!(get_attr::<Vec<i32>>("Op", &a, "l").unwrap(), vec![1, 2]);
        assert_eq!(get_attr::<DataType>("Op", &a, "t").unwrap(), DataType::Half);
        assert_eq!(get_attr::<String>("Op", &a, "s").unwrap(), "NHWC");
        assert_eq!(
            get_attr::<bool>("Op", &a, "i").unwrap_err().message(),
            "Op: attr 'i' is 3, not a valid bool"
        );
        assert!(get_attr::<i64>("Op", &a, "zz").is_err());
    }
}
