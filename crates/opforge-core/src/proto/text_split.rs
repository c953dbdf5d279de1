//! Splitting a text-format message at its top-level repeated fields, so that
//! a large one (a `GraphDef` of 100,000 nodes) converts to the binary wire
//! format a slice at a time instead of as one reflective message, which
//! costs several KB a node (issue 16: the Identity chain).
//!
//! The lexer knows only what it must to find top-level field names: strings
//! (both quotes, backslash escapes), `#` comments, the brackets that nest
//! (`{}`, `<>`, `[]`) and the `:` that makes the next identifier a value.
//! Whatever it gets wrong, the caller never trusts it alone: a slice that
//! does not parse sends the whole text through the ordinary parser, so an
//! error is exactly the error the whole parse gives.

use prost_reflect::MessageDescriptor;

/// A top-level field in text format: where its name starts, and the name.
#[derive(Debug, PartialEq)]
struct TopField<'a> {
    start: usize,
    name: &'a str,
}

/// The fields at nesting depth 0 of `text`, in order; `None` when the
/// brackets do not balance (the caller then parses the whole text, which
/// reports the problem).
fn top_level_fields(text: &str) -> Option<Vec<TopField<'_>>> {
    let bytes = text.as_bytes();
    let mut fields = Vec::new();
    let mut depth = 0usize;
    // Whether the last token at depth 0 was a `:` (the next identifier is
    // then a value, as in `version: FOO`, not a field name).
    let mut after_colon = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                after_colon = false;
                continue;
            }
            b'{' | b'<' | b'[' => {
                depth += 1;
                after_colon = false;
            }
            b'}' | b'>' | b']' => {
                depth = depth.checked_sub(1)?;
                after_colon = false;
            }
            b':' => after_colon = true,
            b',' | b';' => after_colon = false,
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if depth == 0 && !after_colon {
                    fields.push(TopField {
                        start,
                        name: &text[start..i],
                    });
                }
                after_colon = false;
                continue;
            }
            b'0'..=b'9' | b'-' | b'+' | b'.' => {
                // A number, possibly `1e-5`, `0x1F`, `-inf` or `1.5f`.
                i += 1;
                while i < bytes.len() {
                    let c = bytes[i];
                    let exponent_sign =
                        (c == b'-' || c == b'+') && matches!(bytes[i - 1], b'e' | b'E');
                    if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || exponent_sign {
                        i += 1;
                    } else {
                        break;
                    }
                }
                after_colon = false;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (depth == 0).then_some(fields)
}

/// Byte ranges of `text` that are each a valid text-format `desc` on their
/// own and whose binary encodings, concatenated, decode to the message the
/// whole text is; each range holds at least `min_len` bytes except the last.
/// Cuts fall only before a top-level repeated (non-map) field. `None` when
/// splitting could change the meaning: a singular field given twice (an
/// error the whole parse must report), or a message with a `oneof`.
pub(crate) fn split(
    text: &str,
    desc: &MessageDescriptor,
    min_len: usize,
) -> Option<Vec<std::ops::Range<usize>>> {
    if text.len() <= min_len {
        return None;
    }
    if desc.oneofs().next().is_some() {
        return None;
    }
    let fields = top_level_fields(text)?;
    let mut singular_seen = std::collections::HashSet::new();
    let mut ranges = Vec::new();
    let mut chunk_start = 0;
    for field in &fields {
        let repeated = desc
            .get_field_by_name(field.name)
            .is_some_and(|f| f.is_list());
        if !repeated {
            if !singular_seen.insert(field.name) {
                return None;
            }
            continue;
        }
        if field.start - chunk_start >= min_len {
            ranges.push(chunk_start..field.start);
            chunk_start = field.start;
        }
    }
    ranges.push(chunk_start..text.len());
    (ranges.len() > 1).then_some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{self, GraphDef, OpList};

    fn names(text: &str) -> Vec<&str> {
        top_level_fields(text)
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect()
    }

    #[test]
    fn only_depth_zero_field_names_count() {
        assert_eq!(
            names("node { name: 'a}{' op: \"x\\\"{\" } # node {\nversions < producer: 3 > node{}"),
            ["node", "versions", "node"]
        );
        assert_eq!(names("version: 3 node: { attr [{}] }"), ["version", "node"]);
        // Identifiers after `:` are values; numbers are not names.
        assert_eq!(
            names("a: FOO b: -inf c: 1e-5 d: 0xEf e: 1.5f"),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(top_level_fields("node { }}"), None);
        assert_eq!(top_level_fields("node { "), None);
    }

    /// Parses `text` whole and in slices of at least `min_len` bytes; both
    /// must give the same message.
    fn same_both_ways<M>(text: &str, min_len: usize) -> usize
    where
        M: prost::Message + prost::Name + Default + PartialEq + std::fmt::Debug,
    {
        let whole: M = proto::from_text(text).unwrap();
        let ranges = split(text, &proto::descriptor::<M>(), min_len).unwrap_or_default();
        if ranges.is_empty() {
            return 0;
        }
        let mut bytes = Vec::new();
        for r in &ranges {
            bytes.extend(proto::text_to_binary_whole::<M>(&text[r.clone()]).unwrap());
        }
        assert_eq!(
            proto::from_binary::<M>(&bytes).unwrap(),
            whole,
            "{ranges:?}"
        );
        ranges.len()
    }

    #[test]
    fn slices_decode_to_the_whole_message() {
        let graph = r#"
            versions { producer: 27 min_consumer: 12 }  # a comment with node {
            node { name: "a" op: "Const" attr { key: "value" value { tensor {
                dtype: DT_STRING string_val: "}\"{'" tensor_shape {} } } } }
            node: < name: 'b' op: "Identity" input: ["a"] >
            library { function { signature { name: "f" } } }
            node { name: "c" op: "Identity" input: "b" input: "^a" }
        "#;
        assert_eq!(same_both_ways::<GraphDef>(graph, 1), 4);
        assert_eq!(same_both_ways::<GraphDef>(graph, 150), 2);
        assert_eq!(same_both_ways::<GraphDef>(graph, 10_000), 0);
        let ops = "op { name: 'A' } op { name: 'B' attr { name: 'T' type: 'type' } }";
        assert_eq!(same_both_ways::<OpList>(ops, 1), 2);
    }

    #[test]
    fn a_singular_field_given_twice_is_not_split() {
        let desc = proto::descriptor::<GraphDef>();
        let text = "versions { } node { } versions { }";
        assert_eq!(split(text, &desc, 1), None);
        assert_eq!(
            split("versions { } node { } node { }", &desc, 1)
                .unwrap()
                .len(),
            3
        );
    }

    fn node_strategy() -> impl proptest::strategy::Strategy<Value = crate::proto::NodeDef> {
        use crate::proto::{attr_value, AttrValue, NodeDef};
        use proptest::prelude::*;
        // Names and strings full of what the lexer must not misread.
        let text = "[a-z{}<>\\[\\]#:;,'\"\\\\\n -]{0,12}";
        (
            text,
            "[A-Za-z]{1,8}",
            proptest::collection::vec(text, 0..3),
            proptest::collection::vec((text, text, any::<i64>(), any::<f32>()), 0..3),
        )
            .prop_map(|(name, op, input, attrs)| NodeDef {
                name,
                op,
                input,
                attr: attrs
                    .into_iter()
                    .enumerate()
                    .flat_map(|(i, (key, s, n, f))| {
                        [
                            (format!("{key}{i}s"), attr_value::Value::S(s.into_bytes())),
                            (format!("{key}{i}i"), attr_value::Value::I(n)),
                            (format!("{key}{i}f"), attr_value::Value::F(f)),
                        ]
                    })
                    .map(|(k, v)| (k, AttrValue { value: Some(v) }))
                    .collect(),
                ..Default::default()
            })
    }

    proptest::proptest! {
        /// Any GraphDef, printed as text (pretty or on one line), converts
        /// in slices to the message the whole text parses to.
        #[test]
        fn any_graph_converts_the_same_in_slices(
            nodes in proptest::collection::vec(node_strategy(), 0..8),
            producer in 0..100i32,
            pretty in proptest::bool::ANY,
            min_len in proptest::prop_oneof![proptest::strategy::Just(1usize), 1..400usize],
        ) {
            let count = nodes.len();
            let graph = GraphDef {
                node: nodes,
                versions: Some(crate::proto::VersionDef { producer, ..Default::default() }),
                ..Default::default()
            };
            let text = if pretty { proto::to_text(&graph) } else { proto::to_short_text(&graph) };
            let slices = same_both_ways::<GraphDef>(&text, min_len);
            if min_len == 1 && count >= 2 {
                // Every node starts a slice: the lexer found them all.
                proptest::prop_assert_eq!(slices, count);
            }
            let bytes = proto::text_to_binary::<GraphDef>(&text).unwrap();
            proptest::prop_assert_eq!(proto::from_binary::<GraphDef>(&bytes).unwrap(), graph);
        }
    }
}
