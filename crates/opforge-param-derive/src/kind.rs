//! What a field's Rust type is, as far as its tokens tell: enough to check
//! the literals of `#[param(...)]` at compile time. The attr type itself
//! comes from the `ParamType` impl of the field's type in the generated
//! code, so an unusual spelling (a type alias) still works; only the
//! literal checks need this.

use syn::{GenericArgument, PathArguments, Type};

/// The kind of a field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An integer type (`int` attr).
    Int,
    /// `f32` or `f64` (`float` attr).
    Float,
    /// `bool`.
    Bool,
    /// `String`.
    Str,
    /// `DataType` (`type` attr).
    Type,
    /// `TensorShapeProto` (`shape` attr).
    Shape,
    /// Any other type: an enum deriving `ParamEnum` (a `string` attr).
    Enum,
}

impl Kind {
    /// Whether bounds apply.
    pub(crate) fn is_number(self) -> bool {
        matches!(self, Kind::Int | Kind::Float)
    }

    /// How the kind is named in messages.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Kind::Int => "an integer",
            Kind::Float => "a float",
            Kind::Bool => "a bool",
            Kind::Str => "a String",
            Kind::Type => "a DataType",
            Kind::Shape => "a shape",
            Kind::Enum => "an enum",
        }
    }
}

/// A field's type: its kind, whether it is a `Vec` of that kind, and
/// whether it is an `Option`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FieldType {
    pub(crate) kind: Kind,
    pub(crate) list: bool,
    pub(crate) optional: bool,
}

impl FieldType {
    /// How the type is named in messages.
    pub(crate) fn describe(self) -> String {
        let base = if self.list {
            format!("a Vec of {}s", &self.kind.describe()[2..].trim_start())
        } else {
            self.kind.describe().to_string()
        };
        if self.optional {
            format!("an Option of {base}")
        } else {
            base
        }
    }
}

/// The last segment of a path type and its single generic argument, if any.
fn last_segment(ty: &Type) -> Option<(String, Option<&Type>)> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let seg = p.path.segments.last()?;
    let arg = match &seg.arguments {
        PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    };
    Some((seg.ident.to_string(), arg))
}

fn scalar_kind(ty: &Type) -> Kind {
    match last_segment(ty) {
        Some((name, None)) => match name.as_str() {
            "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize" => {
                Kind::Int
            }
            "f32" | "f64" => Kind::Float,
            "bool" => Kind::Bool,
            "String" => Kind::Str,
            "DataType" => Kind::Type,
            "TensorShapeProto" => Kind::Shape,
            _ => Kind::Enum,
        },
        _ => Kind::Enum,
    }
}

/// Classifies a field's type: `Option<T>`, `Vec<T>`, `Option<Vec<T>>`, or
/// a scalar.
pub(crate) fn classify(ty: &Type) -> FieldType {
    let (optional, ty) = match last_segment(ty) {
        Some((name, Some(inner))) if name == "Option" => (true, inner),
        _ => (false, ty),
    };
    match last_segment(ty) {
        Some((name, Some(inner))) if name == "Vec" => FieldType {
            kind: scalar_kind(inner),
            list: true,
            optional,
        },
        _ => FieldType {
            kind: scalar_kind(ty),
            list: false,
            optional,
        },
    }
}
