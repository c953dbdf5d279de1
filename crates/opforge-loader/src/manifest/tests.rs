//! Unit tests of the manifest reader.

use super::*;

fn record(json: &str) -> Vec<u8> {
    let mut v = b"OPFM".to_vec();
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&(json.len() as u32).to_le_bytes());
    v.extend_from_slice(&crc32(json.as_bytes()).to_le_bytes());
    v.extend_from_slice(json.as_bytes());
    while v.len() % 8 != 0 {
        v.push(0);
    }
    v
}

const LIB: &str = r#"{"kind":"library","name":"x","version":"1","abi":{"major":1,"minor":0,"min_host_minor":0,"layout_hash":"6ca0052a81b1895f"}}"#;

#[test]
fn crc_is_zlibs() {
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
}

#[test]
fn records_parse_with_padding_and_unknown_kinds() {
    let mut data = vec![0u8; 16];
    data.extend(record(LIB));
    data.extend(record(r#"{"kind":"future","x":1}"#));
    data.extend(record(
        r#"{"kind":"op","name":"A","inputs":["x: int32"],"outputs":["y: int32"],"shape_fn":true}"#,
    ));
    let m = from_records(
        Path::new("f"),
        parse_records(Path::new("f"), &data, false).unwrap(),
    )
    .unwrap();
    assert_eq!(m.library.name, "x");
    // LIB is a 1.0 library record.
    assert_eq!(
        Some(m.library.abi.layout_hash),
        opforge_abi::known_layout_hash(1, 0)
    );
    assert_eq!(m.ops.as_ref().unwrap()[0].op_def().unwrap().name, "A");
    let j = m.to_json().unwrap();
    assert_eq!(j["shape_fns"], json!(["A"]));
    assert_eq!(j["kernels"], json!([]));
}

#[test]
fn corrupt_records_are_data_loss_naming_the_offset() {
    let mut data = record(LIB);
    let n = data.len();
    data[n - 20] ^= 0x55; // inside the JSON: the CRC no longer matches
    let e = parse_records(Path::new("f"), &data, false).unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::DataLoss);
    assert!(e.message().contains("offset 0"), "{}", e.message());
    let mut data = record(LIB);
    data[0] = b'X';
    let e = parse_records(Path::new("f"), &data, false).unwrap_err();
    assert!(e.message().contains("bad magic"), "{}", e.message());
    let data = &record(LIB)[..40];
    let e = parse_records(Path::new("f"), data, false).unwrap_err();
    assert!(e.message().contains("section ends"), "{}", e.message());
    let e = from_records(Path::new("f"), vec![]).unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::FailedPrecondition);
}

fn parsed(records: &[&str]) -> Result<Manifest> {
    let data: Vec<u8> = records.iter().flat_map(|r| record(r)).collect();
    from_records(
        Path::new("f"),
        parse_records(Path::new("f"), &data, false).unwrap(),
    )
}

#[test]
fn a_kernel_declared_twice_is_refused() {
    let k =
        r#"{"kind":"kernel","op":"A","device":"CPU","constraints":{"T":["DT_FLOAT","DT_INT32"]}}"#;
    // The same constraints in another order are the same kernel.
    let k2 =
        r#"{"kind":"kernel","op":"A","device":"CPU","constraints":{"T":["DT_INT32","DT_FLOAT"]}}"#;
    let e = parsed(&[LIB, k, k2]).unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::InvalidArgument);
    assert!(
        e.message().contains(
            "declares the kernel A on CPU, T in [DT_INT32, DT_FLOAT] twice, in the records \
             at offsets 144 and 248"
        ),
        "{}",
        e.message()
    );
    // Another label is another kernel.
    let k3 = r#"{"kind":"kernel","op":"A","device":"CPU","label":"x","constraints":{"T":["DT_INT32","DT_FLOAT"]}}"#;
    assert_eq!(parsed(&[LIB, k, k3]).unwrap().kernels.unwrap().len(), 2);
}

#[test]
fn records_of_unknown_kinds_are_named_when_the_library_record_is_missing() {
    let e = parsed(&[r#"{"kind":"future","x":1}"#]).unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::FailedPrecondition);
    assert!(
        e.message()
            .contains(r#"kinds this host does not know ("future" at offset 0)"#),
        "{}",
        e.message()
    );
    assert!(
        !e.message().contains("add OPFORGE_LIBRARY"),
        "{}",
        e.message()
    );
    // Known records only: the library record is missing, add it.
    let e = parsed(&[r#"{"kind":"op","name":"A"}"#]).unwrap_err();
    assert!(
        e.message().contains("add OPFORGE_LIBRARY"),
        "{}",
        e.message()
    );
    // A record without a kind is damaged.
    let e = parsed(&[LIB, r#"{"name":"A"}"#]).unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::DataLoss);
    assert!(e.message().contains("at offset 144"), "{}", e.message());
    assert!(e.message().contains("(its keys: name)"), "{}", e.message());
}

#[test]
fn an_abi_field_out_of_range_names_its_value() {
    let lib = LIB.replace(r#""minor":0"#, r#""minor":-1"#);
    let e = parsed(&[&lib]).unwrap_err();
    assert!(
        e.message()
            .contains("'minor' is -1, not an integer from 0 to 4294967295"),
        "{}",
        e.message()
    );
}

#[test]
fn non_object_files_are_invalid_argument() {
    let e = parse(Path::new("f"), b"not an elf").unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::InvalidArgument);
}

#[test]
fn a_library_record_with_an_empty_name_takes_the_files() {
    // A missing name is damage, as before.
    let nameless = LIB.replace(r#""name":"x","#, "");
    let data = record(&nameless);
    let e = from_records(
        Path::new("f"),
        parse_records(Path::new("f"), &data, false).unwrap(),
    )
    .unwrap_err();
    assert_eq!(e.code(), opforge_core::Code::DataLoss, "{e}");
    let empty = LIB.replace(r#""name":"x""#, r#""name":"""#);
    {
        let json = empty;
        let data = record(&json);
        for (file, want) in [
            ("/tmp/libzero_out.so", "zero_out"),
            ("zero_out.so", "zero_out"),
            ("dir/libtf_ops.so.1", "tf_ops"),
            ("lib.so", "lib"),
        ] {
            let path = Path::new(file);
            let m = from_records(path, parse_records(path, &data, false).unwrap()).unwrap();
            assert_eq!(m.library.name, want, "{json} in {file}");
        }
    }
}
