//! TensorFlow-compatible protocol buffers, written by opforge with
//! TensorFlow's field numbers (see `proto/tensorflow/*.proto`), and their
//! three encodings: binary wire format, text format and the proto3 JSON
//! mapping.
//!
//! ```
//! use opforge_core::proto::{self, OpDef};
//! let op: OpDef = proto::from_text("name: 'Foo' is_stateful: true").unwrap();
//! assert_eq!(op.name, "Foo");
//! let bytes = proto::to_binary(&op);
//! let back: OpDef = proto::from_binary(&bytes).unwrap();
//! assert_eq!(proto::to_text(&back), "name: \"Foo\"\nis_stateful: true\n");
//! assert_eq!(proto::to_json(&back)["is_stateful"], true);
//! ```

use crate::{Result, Status};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use std::sync::OnceLock;

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
}
pub use generated::*;

mod text;
mod text_split;

static DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/tensorflow_descriptor.bin"));

/// The descriptors of every opforge proto (package `tensorflow`).
pub fn descriptor_pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(DESCRIPTOR_SET)
            .expect("the build script wrote a valid descriptor set")
    })
}

/// The reflection descriptor of message type `M`.
pub fn descriptor<M: prost::Name>() -> MessageDescriptor {
    let name = M::full_name();
    descriptor_pool()
        .get_message_by_name(&name)
        .unwrap_or_else(|| panic!("{name} is compiled into opforge's descriptor pool"))
}

fn to_dynamic<M: prost::Message + prost::Name>(msg: &M) -> DynamicMessage {
    let mut dynamic = DynamicMessage::new(descriptor::<M>());
    dynamic
        .transcode_from(msg)
        .expect("a prost message re-encodes into its own descriptor");
    dynamic
}

fn from_dynamic<M: prost::Message + prost::Name + Default>(dynamic: &DynamicMessage) -> Result<M> {
    dynamic
        .transcode_to::<M>()
        .map_err(|e| Status::data_loss(format!("cannot decode {}: {e}", M::full_name())))
}

/// Encodes `msg` in the binary wire format.
pub fn to_binary<M: prost::Message>(msg: &M) -> Vec<u8> {
    msg.encode_to_vec()
}

/// Decodes a message from the binary wire format (`DataLoss` on bad bytes).
pub fn from_binary<M: prost::Message + prost::Name + Default>(bytes: &[u8]) -> Result<M> {
    M::decode(bytes)
        .map_err(|e| Status::data_loss(format!("cannot parse binary {}: {e}", M::full_name())))
}

/// Prints `msg` in protobuf text format with the layout of TensorFlow's
/// `.pbtxt` files: one field per line in field-number order, nested messages
/// indented by two spaces, each element of a repeated field on its own line,
/// map entries sorted by key.
pub fn to_text<M: prost::Message + prost::Name>(msg: &M) -> String {
    text::print(&to_dynamic(msg), true)
}

/// Prints `msg` in text format on one line (`ShortDebugString`).
pub fn to_short_text<M: prost::Message + prost::Name>(msg: &M) -> String {
    text::print(&to_dynamic(msg), false)
}

/// Parses a message from protobuf text format (`InvalidArgument` with the
/// line and column of the problem). A large text is read a slice at a time,
/// as [`text_to_binary`] reads it.
pub fn from_text<M: prost::Message + prost::Name + Default>(text: &str) -> Result<M> {
    from_binary(&text_to_binary::<M>(text)?)
}

/// A message of type `M` in text format, re-encoded in the binary wire
/// format without building `M` (for decoders that read the bytes their own
/// way, such as [`Graph::from_graph_def_bytes`](crate::graph::Graph::from_graph_def_bytes)).
/// Errors as [`from_text`].
///
/// ```
/// use opforge_core::proto::{self, OpDef};
/// let bytes = proto::text_to_binary::<OpDef>("name: 'Foo'").unwrap();
/// assert_eq!(proto::from_binary::<OpDef>(&bytes).unwrap().name, "Foo");
/// ```
///
/// A large text is converted a slice at a time (at least 64 KiB each, cut
/// before a top-level repeated field such as a `GraphDef`'s `node`), so
/// memory stays near the size of the text and its encoding rather than
/// that of one reflective message of the whole (several KB a node). A slice
/// that does not parse on its own sends the whole text through the
/// ordinary parser, whose error is the one returned.
pub fn text_to_binary<M: prost::Name>(text: &str) -> Result<Vec<u8>> {
    use prost::Message;
    const SLICE: usize = 64 << 10;
    if let Some(ranges) = text_split::split(text, &descriptor::<M>(), SLICE) {
        let mut out = Vec::with_capacity(text.len() / 2);
        for range in ranges {
            match parse_text::<M>(&text[range]) {
                Ok(slice) => slice
                    .encode(&mut out)
                    .expect("a Vec grows to hold any encoding"),
                Err(_) => return text_to_binary_whole::<M>(text),
            }
        }
        return Ok(out);
    }
    text_to_binary_whole::<M>(text)
}

/// [`text_to_binary`] without slicing: one reflective message of the whole.
pub(crate) fn text_to_binary_whole<M: prost::Name>(text: &str) -> Result<Vec<u8>> {
    use prost::Message;
    Ok(parse_text::<M>(text)?.encode_to_vec())
}

fn parse_text<M: prost::Name>(text: &str) -> Result<DynamicMessage> {
    DynamicMessage::parse_text_format(descriptor::<M>(), text).map_err(|e| {
        let mut msg = format!("cannot parse text-format {}: {e}", M::full_name());
        if let Some(span) = miette_like_position(&e, text) {
            msg.push_str(&span);
        }
        Status::invalid_argument(msg)
    })
}

fn miette_like_position(
    err: &prost_reflect::text_format::ParseError,
    text: &str,
) -> Option<String> {
    // prost-reflect exposes the byte span of a parse error only through its
    // Debug output (`span: START..END`) unless its `miette` feature is on.
    let debug = format!("{err:?}");
    let offset: usize = debug
        .split("span: ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let offset = offset.min(text.len());
    let before = text.get(..offset)?;
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    Some(format!(" (at line {line}, column {column})"))
}

/// The proto3 JSON mapping of `msg`, with the `.proto` field names
/// (`input_arg`, not `inputArg`), enums by name and 64-bit integers as
/// strings, as protobuf's `MessageToDict(preserving_proto_field_name=True)`.
pub fn to_json<M: prost::Message + prost::Name>(msg: &M) -> serde_json::Value {
    let options = prost_reflect::SerializeOptions::new().use_proto_field_name(true);
    let mut json = to_dynamic(msg)
        .serialize_with_options(serde_json::value::Serializer, &options)
        .expect("every opforge message maps to JSON");
    shorten_floats(&mut json, &descriptor::<M>());
    json
}

/// serde widens `float` fields to f64 (`0.01f32` becomes
/// `0.009999999776482582`); print them as the shortest decimal that reads
/// back as the same f32, as protobuf's own JSON printers do. Only fields
/// declared `float` are touched, so `double` values keep every digit.
fn shorten_floats(json: &mut serde_json::Value, desc: &MessageDescriptor) {
    use prost_reflect::Kind;
    let serde_json::Value::Object(obj) = json else {
        return;
    };
    for field in desc.fields() {
        let Some(value) = obj.get_mut(field.name()) else {
            continue;
        };
        let items: Vec<&mut serde_json::Value> = match value {
            serde_json::Value::Array(a) => a.iter_mut().collect(),
            serde_json::Value::Object(o) if field.is_map() => o.values_mut().collect(),
            other => vec![other],
        };
        match field.kind() {
            Kind::Float => {
                for item in items {
                    if let Some(short) = item
                        .as_f64()
                        .and_then(|f| format!("{}", f as f32).parse::<f64>().ok())
                    {
                        if let Some(n) = serde_json::Number::from_f64(short) {
                            *item = serde_json::Value::Number(n);
                        }
                    }
                }
            }
            Kind::Message(m) => {
                let target = if field.is_map() {
                    m.map_entry_value_field().kind()
                } else {
                    Kind::Message(m.clone())
                };
                if let Kind::Message(m) = target {
                    for item in items {
                        shorten_floats(item, &m);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Reads a message from its proto3 JSON mapping (either field-name style).
pub fn from_json<M: prost::Message + prost::Name + Default>(
    value: &serde_json::Value,
) -> Result<M> {
    let dynamic = DynamicMessage::deserialize(descriptor::<M>(), value).map_err(|e| {
        Status::invalid_argument(format!("cannot read {} from JSON: {e}", M::full_name()))
    })?;
    from_dynamic(&dynamic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_is_in_the_pool() {
        for name in [
            "tensorflow.OpDef",
            "tensorflow.OpDef.ArgDef",
            "tensorflow.OpDef.AttrDef",
            "tensorflow.OpList",
            "tensorflow.OpDeprecation",
            "tensorflow.AttrValue",
            "tensorflow.AttrValue.ListValue",
            "tensorflow.NameAttrList",
            "tensorflow.TensorShapeProto",
            "tensorflow.TensorProto",
            "tensorflow.NodeDef",
            "tensorflow.GraphDef",
            "tensorflow.VersionDef",
            "tensorflow.FunctionDefLibrary",
            "tensorflow.FullTypeDef",
            "tensorflow.ResourceHandleProto",
        ] {
            assert!(
                descriptor_pool().get_message_by_name(name).is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn field_numbers_match_tensorflow() {
        let op = descriptor::<OpDef>();
        let num = |d: &MessageDescriptor, f: &str| d.get_field_by_name(f).map(|f| f.number());
        assert_eq!(num(&op, "is_stateful"), Some(17));
        assert_eq!(num(&op, "is_commutative"), Some(18));
        assert_eq!(num(&op, "allows_uninitialized_input"), Some(19));
        assert_eq!(num(&op, "control_output"), Some(20));
        let attr = descriptor::<AttrValue>();
        assert_eq!(num(&attr, "list"), Some(1));
        assert_eq!(num(&attr, "func"), Some(10));
        assert_eq!(num(&attr, "placeholder"), Some(9));
        let tensor = descriptor::<TensorProto>();
        assert_eq!(num(&tensor, "half_val"), Some(13));
        assert_eq!(num(&tensor, "float8_val"), Some(18));
        let graph = descriptor::<GraphDef>();
        assert_eq!(num(&graph, "versions"), Some(4));
        assert_eq!(num(&graph, "library"), Some(2));
    }

    #[test]
    fn text_round_trip_with_nested_messages_and_enums() {
        let text = r#"
            name: "n" op: "Const" input: "a:1" input: "^b" device: "/device:CPU:0"
            attr { key: "dtype" value { type: DT_FLOAT } }
            attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } float_val: 1.5 } } }
        "#;
        let node: NodeDef = from_text(text).unwrap();
        assert_eq!(node.input, vec!["a:1", "^b"]);
        assert_eq!(
            node.attr["dtype"].value,
            Some(attr_value::Value::Type(DataType::DtFloat as i32))
        );
        let printed = to_text(&node);
        let again: NodeDef = from_text(&printed).unwrap();
        assert_eq!(again, node);
        assert!(printed.contains("type: DT_FLOAT"), "{printed}");
    }

    #[test]
    fn text_errors_say_where() {
        let err = from_text::<OpDef>("name: \"x\"\n  bogus_field: 3").unwrap_err();
        assert_eq!(err.code(), crate::Code::InvalidArgument);
        assert!(err.message().contains("line 2"), "{err}");
        assert!(from_binary::<OpDef>(&[0xff, 0xff]).is_err());
    }

    #[test]
    fn json_uses_proto_field_names_and_string_int64() {
        let attr = op_def::AttrDef {
            name: "N".into(),
            r#type: "int".into(),
            has_minimum: true,
            minimum: 2,
            ..Default::default()
        };
        let json = to_json(&attr);
        assert_eq!(
            json,
            serde_json::json!({"name": "N", "type": "int", "has_minimum": true, "minimum": "2"})
        );
        assert_eq!(from_json::<op_def::AttrDef>(&json).unwrap(), attr);
    }

    #[test]
    fn json_floats_are_shortest_but_doubles_keep_their_digits() {
        let v: AttrValue = from_text("list { f: 0.01 f: 1e-5 }").unwrap();
        assert_eq!(
            to_json(&v),
            serde_json::json!({"list": {"f": [0.01, 0.00001]}})
        );
        let t: TensorProto =
            from_text("dtype: DT_DOUBLE double_val: 0.009999999776482582 float_val: 0.3").unwrap();
        let json = to_json(&t);
        assert_eq!(json["double_val"][0], 0.009999999776482582);
        assert_eq!(json["float_val"][0], 0.3);
        let n: NodeDef = from_text("attr { key: 'a' value { f: 0.1 } }").unwrap();
        assert_eq!(to_json(&n)["attr"]["a"]["f"], 0.1);
    }
}
