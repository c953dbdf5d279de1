//! String helpers with no dependency on the rest of the crate, shared by the
//! protobuf text format, tensor summaries and attr value printing.

/// C-style escaping of bytes, as TensorFlow's `absl::CEscape`.
pub fn c_escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(c_escape(b"a\"b\n\x01"), "a\\\"b\\n\\001");
    }
}
