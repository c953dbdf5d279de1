//! [`OpDefBuilder`]: declare an op from spec strings, as TensorFlow's
//! `REGISTER_OP(...)` chain does, and get a validated `OpDef`.

use super::spec::{parse_arg_spec, parse_attr_spec, ArgSpec};
use super::validate::validate_op_def;
use crate::dtype::DataType;
use crate::op_attr::{ErasedAttr, OpAttr};
use crate::proto::{op_def::ArgDef, FullTypeDef, FullTypeId, OpDef, OpDeprecation};
use crate::{Result, Status};
use std::sync::Arc;

/// Builds an [`OpDef`] from spec strings.
///
/// ```
/// use opforge_core::OpDefBuilder;
/// let op = OpDefBuilder::new("ZeroOut")
///     .attr("T: {float, int32} = DT_INT32")
///     .input("to_zero: T")
///     .output("zeroed: T")
///     .doc("Zeros all but the first element.")
///     .finalize()
///     .unwrap();
/// assert_eq!(op.input_arg[0].type_attr, "T");
/// assert_eq!(op.summary, "Zeros all but the first element.");
///
/// let err = OpDefBuilder::new("ZeroOut").attr("T: {float, int32").finalize().unwrap_err();
/// assert!(err.message().starts_with("ZeroOut: attr \"T: {float, int32\": missing '}'"));
/// ```
#[derive(Clone, Default)]
pub struct OpDefBuilder {
    name: String,
    attrs: Vec<String>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    control_outputs: Vec<String>,
    doc: Option<String>,
    is_stateful: bool,
    is_commutative: bool,
    is_aggregate: bool,
    allows_uninitialized_input: bool,
    is_distributed_communication: bool,
    deprecation: Option<(i32, String)>,
    errors: Vec<String>,
    /// Per-op attributes (shape function, gradient, ...) to register with the op.
    op_attrs: Vec<ErasedAttr>,
    output_full_types: Vec<(String, FullTypeDef)>,
    /// Attr descriptions given apart from `doc` (`attr_doc`).
    attr_docs: Vec<(String, String)>,
}

impl std::fmt::Debug for OpDefBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpDefBuilder")
            .field("name", &self.name)
            .field("attrs", &self.attrs)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("op_attrs", &self.op_attrs)
            .finish_non_exhaustive()
    }
}

impl OpDefBuilder {
    /// Starts the definition of op `name` (CamelCase; a leading `_` marks an internal op).
    pub fn new(name: impl Into<String>) -> OpDefBuilder {
        OpDefBuilder {
            name: name.into(),
            ..Default::default()
        }
    }

    /// The op's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds an attr: `"name: type [>= min] [= default]"`.
    pub fn attr(mut self, spec: impl Into<String>) -> Self {
        self.attrs.push(spec.into());
        self
    }

    /// Adds an input: `"name: T"`, `"name: float"`, `"name: N * T"`, `"name: Ref(T)"`.
    pub fn input(mut self, spec: impl Into<String>) -> Self {
        self.inputs.push(spec.into());
        self
    }

    /// Adds an output, in the same syntax as [`OpDefBuilder::input`].
    pub fn output(mut self, spec: impl Into<String>) -> Self {
        self.outputs.push(spec.into());
        self
    }

    /// Adds a named control output.
    pub fn control_output(mut self, name: impl Into<String>) -> Self {
        self.control_outputs.push(name.into());
        self
    }

    /// Sets the documentation: the first paragraph is the summary, the text
    /// up to the first `name:` line the description, and each `name: text`
    /// paragraph documents that input, output or attr.
    pub fn doc(mut self, text: impl Into<String>) -> Self {
        if self.doc.is_some() {
            self.errors
                .push(format!("{}: doc() called twice", self.name));
        }
        self.doc = Some(text.into());
        self
    }

    /// Documents attr `name` (an attr of the op; a `doc()` line for it
    /// wins). Parameter structs give their fields' descriptions this way
    /// (`OpDefBuilder::params`, in [`crate::param`]).
    pub fn attr_doc(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.attr_docs.push((name.into(), text.into()));
        self
    }

    /// Records a problem that `finalize` reports with the others.
    pub(crate) fn error(mut self, message: String) -> Self {
        self.errors.push(message);
        self
    }

    /// Marks the op stateful: it may give different outputs for the same
    /// inputs, or have side effects, so it is never folded or deduplicated.
    pub fn stateful(mut self) -> Self {
        self.is_stateful = true;
        self
    }

    /// Marks a binary op commutative (`op(a, b) == op(b, a)`).
    pub fn commutative(mut self) -> Self {
        self.is_commutative = true;
        self
    }

    /// Marks the op an aggregate: it takes N inputs of one type and shape and
    /// produces one output of that type and shape (like `AddN`).
    pub fn aggregate(mut self) -> Self {
        self.is_aggregate = true;
        self
    }

    /// Lets the op take uninitialized (ref) inputs, like `Assign`.
    pub fn allows_uninitialized_input(mut self) -> Self {
        self.allows_uninitialized_input = true;
        self
    }

    /// Marks the op as doing distributed communication.
    pub fn distributed_communication(mut self) -> Self {
        self.is_distributed_communication = true;
        self
    }

    /// Attaches a per-op attribute of kind `A` (see [`crate::op_attr`]),
    /// registered together with the op. The shape function is one:
    /// `set_shape_fn` (in [`crate::shape_inference`]) calls this.
    pub fn set_attr<A: OpAttr>(mut self, value: Arc<A::Value>) -> Self {
        let attr = ErasedAttr::new::<A>(value);
        self.op_attrs.retain(|a| a.kind() != attr.kind());
        self.op_attrs.push(attr);
        self
    }

    /// Declares that the op has no kernel on purpose, and why (see
    /// [`WithoutKernel`]).
    pub fn without_kernel(self, reason: &str) -> Self {
        self.set_attr::<WithoutKernel>(Arc::from(reason))
    }

    /// The per-op attribute of kind `A` attached so far, if any.
    pub fn get_attr<A: OpAttr>(&self) -> Option<Arc<A::Value>> {
        self.op_attrs.iter().find_map(ErasedAttr::get::<A>)
    }

    /// Every per-op attribute attached so far.
    pub fn op_attrs(&self) -> &[ErasedAttr] {
        &self.op_attrs
    }

    /// Sets the experimental full type of output `output` (TensorFlow's
    /// type constructors), e.g. `Shape`'s output is
    /// `TFT_SHAPE_TENSOR[TFT_VAR["out_type"]]`; see [`FullTypeDef::unary_var`].
    pub fn output_full_type(mut self, output: &str, full_type: FullTypeDef) -> Self {
        self.output_full_types.push((output.to_string(), full_type));
        self
    }

    /// Deprecates the op from GraphDef version `version` on.
    pub fn deprecated(mut self, version: i32, explanation: impl Into<String>) -> Self {
        if self.deprecation.is_some() {
            self.errors
                .push(format!("{}: deprecated() called twice", self.name));
        }
        self.deprecation = Some((version, explanation.into()));
        self
    }

    /// Builds the `OpDef` and validates it with TensorFlow's rules. The error
    /// (`InvalidArgument`) lists every problem, one per line, each naming the
    /// op, the spec and where in it the problem is.
    pub fn finalize(&self) -> Result<OpDef> {
        let mut op = OpDef {
            name: self.name.clone(),
            is_stateful: self.is_stateful,
            is_commutative: self.is_commutative,
            is_aggregate: self.is_aggregate,
            allows_uninitialized_input: self.allows_uninitialized_input,
            is_distributed_communication: self.is_distributed_communication,
            deprecation: self
                .deprecation
                .as_ref()
                .map(|(version, explanation)| OpDeprecation {
                    version: *version,
                    explanation: explanation.clone(),
                }),
            ..Default::default()
        };
        let mut errors = self.errors.clone();
        for spec in &self.attrs {
            match parse_attr_spec(spec) {
                Ok(attr) => {
                    if op.attr.iter().any(|a| a.name == attr.name) {
                        errors.push(format!(
                            "{}: attr \"{spec}\": duplicate attr name '{}'",
                            self.name, attr.name
                        ));
                    } else {
                        op.attr.push(attr);
                    }
                }
                Err(e) => errors.push(e.render(&self.name, "attr", spec)),
            }
        }
        for (specs, is_output) in [(&self.inputs, false), (&self.outputs, true)] {
            let kind = if is_output { "output" } else { "input" };
            for spec in specs {
                match parse_arg_spec(spec).and_then(|arg| resolve_arg(&mut op, arg)) {
                    Ok(arg) => {
                        let args = if is_output {
                            &mut op.output_arg
                        } else {
                            &mut op.input_arg
                        };
                        args.push(arg);
                    }
                    Err(e) => errors.push(e.render(&self.name, kind, spec)),
                }
            }
        }
        for name in &self.control_outputs {
            if super::spec::is_valid_attr_name(name) {
                op.control_output.push(name.clone());
            } else {
                errors.push(format!(
                    "{}: control output \"{name}\": expected a name of letters, digits and '_', starting with a letter",
                    self.name
                ));
            }
        }
        for (name, full_type) in &self.output_full_types {
            match op.output_arg.iter_mut().find(|a| &a.name == name) {
                Some(arg) => arg.experimental_full_type = Some(full_type.clone()),
                None => errors.push(format!(
                    "{}: output_full_type: the op has no output named '{name}'",
                    self.name
                )),
            }
        }
        if let Some(doc) = &self.doc {
            finalize_doc(doc, &mut op, &mut errors);
        }
        for (name, text) in &self.attr_docs {
            match op.attr.iter_mut().find(|a| &a.name == name) {
                Some(attr) if attr.description.is_empty() => attr.description = text.clone(),
                Some(_) => {}
                None => errors.push(format!(
                    "{}: attr_doc: the op has no attr named '{name}'",
                    self.name
                )),
            }
        }
        if !errors.is_empty() {
            return Err(Status::invalid_argument(errors.join("\n")));
        }
        validate_op_def(&op)?;
        Ok(op)
    }
}

/// Resolves an argument's type or attr names against the op's attrs, and
/// applies TensorFlow's implied constraints (a length attr or a `list(type)`
/// attr used by an argument gets minimum 1; a resource makes the op stateful).
fn resolve_arg(
    op: &mut OpDef,
    arg: ArgSpec,
) -> std::result::Result<ArgDef, super::spec::SpecError> {
    use super::spec::SpecError;
    let mut def = ArgDef {
        name: arg.name,
        is_ref: arg.is_ref,
        ..Default::default()
    };
    let (type_or_attr, at) = arg.type_or_attr;
    if let Some(dt) = DataType::from_spec_name(&type_or_attr) {
        def.r#type = dt as i32;
    } else {
        let Some(attr) = op.attr.iter().find(|a| a.name == type_or_attr) else {
            return Err(SpecError::new(
                at,
                format!(
                    "'{type_or_attr}' is neither a data type nor an attr of this op; declare it with \
                     .attr(\"{type_or_attr}: type\") or use a type such as float or int32"
                ),
            ));
        };
        match attr.r#type.as_str() {
            "type" => def.type_attr = type_or_attr,
            "list(type)" => def.type_list_attr = type_or_attr,
            other => {
                return Err(SpecError::new(
                    at,
                    format!(
                        "attr '{type_or_attr}' has type {other}; an argument's type must be a data type, \
                         a 'type' attr or a 'list(type)' attr"
                    ),
                ))
            }
        }
    }
    if let Some((number, at)) = arg.number_attr {
        let Some(attr) = op.attr.iter_mut().find(|a| a.name == number) else {
            return Err(SpecError::new(
                at,
                format!("'{number}' in '{number} * ...' must be an int attr of this op; declare it with .attr(\"{number}: int\")"),
            ));
        };
        if attr.r#type != "int" {
            return Err(SpecError::new(
                at,
                format!(
                    "'{number}' is used as a list length but is a {} attr; it must be an int attr",
                    attr.r#type
                ),
            ));
        }
        if !def.type_list_attr.is_empty() {
            return Err(SpecError::new(
                at,
                format!(
                    "'{number} * {}' repeats a list(type) attr; use either 'N * T' with a type attr T or '{}' alone",
                    def.type_list_attr, def.type_list_attr
                ),
            ));
        }
        if !attr.has_minimum {
            attr.has_minimum = true;
            attr.minimum = 1;
        }
        def.number_attr = number;
    } else if !def.type_list_attr.is_empty() {
        if let Some(attr) = op.attr.iter_mut().find(|a| a.name == def.type_list_attr) {
            if !attr.has_minimum {
                attr.has_minimum = true;
                attr.minimum = 1;
            }
        }
    }
    if def.r#type == DataType::Resource as i32 {
        op.is_stateful = true;
    }
    Ok(def)
}

/// Splits `doc` into the op's summary, description and per-argument docs as
/// TensorFlow's `FinalizeDoc` does.
fn finalize_doc(doc: &str, op: &mut OpDef, errors: &mut Vec<String>) {
    let lines: Vec<&str> = doc.split('\n').map(str::trim_end).collect();
    let is_name_line = |l: &str| -> Option<String> {
        let name: String = l
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        (name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && l[name.len()..].starts_with(':'))
        .then_some(name)
    };
    let mut l = 0;
    while l < lines.len() && lines[l].is_empty() {
        l += 1;
    }
    if l < lines.len() {
        op.summary = lines[l].to_string();
        l += 1;
    }
    while l < lines.len() && lines[l].is_empty() {
        l += 1;
    }
    let start = l;
    while l < lines.len() && is_name_line(lines[l]).is_none() {
        l += 1;
    }
    let mut end = l;
    while start < end && lines[end - 1].is_empty() {
        end -= 1;
    }
    op.description = lines[start..end].join("\n");
    while l < lines.len() {
        let name = is_name_line(lines[l]).unwrap_or_default();
        let mut desc: Vec<&str> = vec![lines[l][name.len() + 1..].trim_start()];
        l += 1;
        while l < lines.len() && is_name_line(lines[l]).is_none() {
            desc.push(lines[l]);
            l += 1;
        }
        while desc.len() > 1 && desc.last().is_some_and(|d| d.is_empty()) {
            desc.pop();
        }
        let indent = desc[1..]
            .iter()
            .filter(|d| !d.is_empty())
            .map(|d| d.len() - d.trim_start().len())
            .min()
            .unwrap_or(0);
        for d in desc.iter_mut().skip(1) {
            if !d.is_empty() {
                *d = &d[indent..];
            }
        }
        let text = desc.join("\n");
        if let Some(arg) = op
            .input_arg
            .iter_mut()
            .chain(op.output_arg.iter_mut())
            .find(|a| a.name == name)
        {
            arg.description = text;
        } else if let Some(attr) = op.attr.iter_mut().find(|a| a.name == name) {
            attr.description = text;
        } else {
            errors.push(format!(
                "{}: doc: no input, output or attr named '{name}' (a doc line that starts with '{name}:' documents one)",
                op.name
            ));
        }
    }
}

impl FullTypeDef {
    /// `TYPE_ID[TFT_VAR[var]]`: a type constructor applied to the type held
    /// by attr `var` (e.g. `Shape`'s `TFT_SHAPE_TENSOR[TFT_VAR["out_type"]]`).
    pub fn unary_var(type_id: FullTypeId, var: &str) -> FullTypeDef {
        FullTypeDef {
            type_id: type_id as i32,
            args: vec![FullTypeDef {
                type_id: FullTypeId::TftVar as i32,
                args: Vec::new(),
                attr: Some(crate::proto::full_type_def::Attr::S(var.to_string())),
            }],
            attr: None,
        }
    }
}

/// The per-op attribute (see [`crate::op_attr`]) of an op that has, on
/// purpose, no kernel on any device, with the reason: an op TensorFlow
/// itself ships without a kernel, or one whose kernel needs something the
/// runtime does not have. `opforge ops show` and `ops list` print it, and
/// running such an op fails with `NotFound` naming the reason. Attach it
/// with [`OpDefBuilder::without_kernel`](OpDefBuilder::without_kernel).
///
/// ```
/// use opforge_core::{op_def::WithoutKernel, OpDefBuilder, Registry};
/// let r = Registry::new();
/// r.register_op(OpDefBuilder::new("Marker").without_kernel("a graph annotation only")).unwrap();
/// assert_eq!(&*r.attr::<WithoutKernel>("Marker").unwrap(), "a graph annotation only");
/// ```
pub struct WithoutKernel;

impl OpAttr for WithoutKernel {
    type Value = str;
    const NAME: &'static str = "WithoutKernel";

    fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_is_split_like_tensorflow() {
        let op = OpDefBuilder::new("Doc")
            .attr("a: int")
            .input("x: float")
            .output("y: float")
            .doc(
                "\nSummary line.\n\nLonger\ndescription.\n\nx: The input.\n  continues here\n    more\na: An attr.\n\ny: The output.\n",
            )
            .finalize()
            .unwrap();
        assert_eq!(op.summary, "Summary line.");
        assert_eq!(op.description, "Longer\ndescription.");
        assert_eq!(
            op.input_arg[0].description,
            "The input.\ncontinues here\n  more"
        );
        assert_eq!(op.attr[0].description, "An attr.");
        assert_eq!(op.output_arg[0].description, "The output.");
        let err = OpDefBuilder::new("Doc")
            .doc("S.\n\nnope: x")
            .finalize()
            .unwrap_err();
        assert!(
            err.message()
                .contains("no input, output or attr named 'nope'"),
            "{err}"
        );
    }

    #[test]
    fn implied_constraints() {
        let op = OpDefBuilder::new("L")
            .attr("N: int")
            .attr("T: type")
            .attr("Tl: list(type)")
            .input("a: N * T")
            .input("b: Tl")
            .input("h: resource")
            .output("o: T")
            .finalize()
            .unwrap();
        assert!(op.attr[0].has_minimum && op.attr[0].minimum == 1);
        assert!(op.attr[2].has_minimum && op.attr[2].minimum == 1);
        assert!(op.is_stateful);
        assert_eq!(op.input_arg[2].r#type, DataType::Resource as i32);
        let op = OpDefBuilder::new("L")
            .attr("N: int >= 0")
            .input("a: N * float")
            .finalize()
            .unwrap();
        assert!(op.attr[0].has_minimum && op.attr[0].minimum == 0);
    }

    #[test]
    fn output_full_types() {
        let op = OpDefBuilder::new("S")
            .attr("out_type: {int32, int64} = DT_INT32")
            .output("output: out_type")
            .output_full_type(
                "output",
                FullTypeDef::unary_var(FullTypeId::TftShapeTensor, "out_type"),
            )
            .finalize()
            .unwrap();
        assert_eq!(
            crate::proto::to_short_text(&op.output_arg[0]),
            "name: \"output\" type_attr: \"out_type\" experimental_full_type { type_id: TFT_SHAPE_TENSOR args { type_id: TFT_VAR s: \"out_type\" } }"
        );
        assert!(OpDefBuilder::new("S")
            .output_full_type("nope", FullTypeDef::default())
            .finalize()
            .is_err());
    }

    #[test]
    fn flags() {
        let op = OpDefBuilder::new("F")
            .stateful()
            .commutative()
            .aggregate()
            .allows_uninitialized_input()
            .distributed_communication()
            .deprecated(7, "Use G")
            .control_output("c")
            .finalize()
            .unwrap();
        assert!(op.is_stateful && op.is_commutative && op.is_aggregate);
        assert!(op.allows_uninitialized_input && op.is_distributed_communication);
        assert_eq!(
            op.deprecation
                .as_ref()
                .map(|d| (d.version, d.explanation.as_str())),
            Some((7, "Use G"))
        );
        assert_eq!(op.control_output, vec!["c"]);
        assert!(OpDefBuilder::new("F")
            .deprecated(1, "a")
            .deprecated(2, "b")
            .finalize()
            .is_err());
    }

    #[test]
    fn every_error_is_reported() {
        let err = OpDefBuilder::new("Bad")
            .attr("T: {float")
            .attr("x: blob")
            .input("a: U")
            .output("B: float")
            .finalize()
            .unwrap_err();
        assert_eq!(err.code(), crate::Code::InvalidArgument);
        let msg = err.message();
        for needle in [
            "attr \"T: {float\"",
            "attr \"x: blob\"",
            "input \"a: U\"",
            "output \"B: float\"",
        ] {
            assert!(msg.contains(needle), "missing {needle} in {msg}");
        }
    }
}
