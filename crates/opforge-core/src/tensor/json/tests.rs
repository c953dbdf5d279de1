//! Tests of the tensor JSON codec.

use super::*;
use crate::proto::{tensor_shape_proto::Dim, TensorShapeProto};
use crate::resource_handle::ResourceHandle;
use proptest::prelude::*;
use serde_json::json;

fn round_trip(t: &Tensor) -> Tensor {
    let v = tensor_to_json(t).unwrap();
    // Through the text form too, as `opforge exec` prints and reads it.
    let text = v.to_string();
    let back: Value = serde_json::from_str(&text).unwrap();
    tensor_from_json(&back).unwrap()
}

fn msg(v: Value) -> String {
    tensor_from_json(&v).unwrap_err().to_string()
}

#[test]
fn every_element_dtype_round_trips() {
    let cases = vec![
        Tensor::from_vec(&[2], vec![1.5f32, -0.0]).unwrap(),
        Tensor::from_vec(&[2], vec![0.1f64, 1e300]).unwrap(),
        Tensor::from_vec(&[1], vec![f16::from_f32(0.1)]).unwrap(),
        Tensor::from_vec(&[1], vec![bf16::from_f32(-3.25)]).unwrap(),
        Tensor::from_vec(&[2], vec![i8::MIN, i8::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![i16::MIN, i16::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![i32::MIN, i32::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![i64::MIN, i64::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![0u8, u8::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![0u16, u16::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![0u32, u32::MAX]).unwrap(),
        Tensor::from_vec(&[2], vec![0u64, u64::MAX]).unwrap(),
        Tensor::from_vec(&[2, 1], vec![true, false]).unwrap(),
        Tensor::from_vec(&[1], vec![Complex::new(1.5f32, f32::NAN)]).unwrap(),
        Tensor::from_vec(&[1], vec![Complex::new(-2.0f64, 0.25)]).unwrap(),
        Tensor::from_strings(&[3], vec![b"abc".to_vec(), vec![0xff, 0], Vec::new()]).unwrap(),
        Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
    ];
    for t in cases {
        let back = round_trip(&t);
        assert_eq!(back.dtype(), t.dtype());
        assert_eq!(back.dims(), t.dims());
        // Compare bitwise-ish: NaN != NaN under PartialEq, so compare the JSON.
        assert_eq!(tensor_to_json(&back).unwrap(), tensor_to_json(&t).unwrap());
    }
}

#[test]
fn printed_forms() {
    let t = Tensor::from_vec(
        &[2, 3],
        vec![
            0.1f32,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            3.0,
        ],
    )
    .unwrap();
    assert_eq!(
        tensor_to_json(&t).unwrap().to_string(),
        r#"{"dtype":"DT_FLOAT","shape":[2,3],"values":[0.1,"nan","inf","-inf",-0.0,3.0]}"#
    );
    let h = Tensor::from_vec(
        &[3],
        vec![
            f16::from_f32(0.1),
            f16::from_f32(65504.0),
            f16::from_f32(-1e-7),
        ],
    )
    .unwrap();
    assert_eq!(
        tensor_to_json(&h).unwrap()["values"],
        json!([0.1, 65500.0, -1e-7])
    );
    let b = Tensor::from_vec(&[2], vec![bf16::from_f32(0.1), bf16::from_f32(3.0e38)]).unwrap();
    assert_eq!(tensor_to_json(&b).unwrap()["values"], json!([0.1, 3.0e38]));
    let c = Tensor::from_vec(&[], vec![Complex::new(1.0f64, -2.5)]).unwrap();
    assert_eq!(
        tensor_to_json(&c).unwrap(),
        json!({"dtype": "DT_COMPLEX128", "shape": [], "values": [[1.0, -2.5]]})
    );
    let s =
        Tensor::from_strings(&[2], vec![b"h\xc3\xa9".to_vec(), vec![0xff, 0xfe, 0x41]]).unwrap();
    assert_eq!(
        tensor_to_json(&s).unwrap(),
        json!({"dtype": "DT_STRING", "shape": [2], "values": ["hé", {"base64": "//5B"}]})
    );
    let h = ResourceHandle {
        device: "/device:CPU:0".into(),
        container: "localhost".into(),
        name: "v".into(),
        type_name: "Var".into(),
        dtypes_and_shapes: vec![(
            DataType::Float,
            TensorShapeProto {
                dim: vec![Dim {
                    size: -1,
                    name: String::new(),
                }],
                unknown_rank: false,
            },
        )],
    };
    let r = Tensor::from_resource_handles(&[], vec![h.clone()]).unwrap();
    let j = tensor_to_json(&r).unwrap();
    assert_eq!(
        j,
        json!({"dtype": "DT_RESOURCE", "shape": [], "values": [{
            "device": "/device:CPU:0", "container": "localhost", "name": "v", "type_name": "Var",
            "dtypes_and_shapes": [{"dtype": "DT_FLOAT", "shape": [-1]}]}]})
    );
    assert_eq!(
        tensor_from_json(&j).unwrap().resource_handles().unwrap(),
        &[h]
    );
    let minimal =
        tensor_from_json(&json!({"dtype": "DT_RESOURCE", "shape": [], "values": [{"name": "w"}]}))
            .unwrap();
    assert_eq!(minimal.resource_handles().unwrap()[0].name, "w");
}

#[test]
fn lenient_inputs() {
    let t = tensor_from_json(&json!({"dtype": "float32", "shape": [4],
        "values": [1, "NaN", "+Infinity", "-INF"]}))
    .unwrap();
    let v = t.flat::<f32>().unwrap();
    assert_eq!(v[0], 1.0);
    assert!(v[1].is_nan());
    assert_eq!(&v[2..], &[f32::INFINITY, f32::NEG_INFINITY]);
    let i = tensor_from_json(&json!({"dtype": "DT_INT64", "shape": [3],
        "values": [1e3, 7.0, "-9223372036854775808"]}))
    .unwrap();
    assert_eq!(i.flat::<i64>().unwrap(), &[1000, 7, i64::MIN]);
    let u = tensor_from_json(&json!({"dtype": "DT_UINT64", "shape": [1],
        "values": ["18446744073709551615"]}))
    .unwrap();
    assert_eq!(u.flat::<u64>().unwrap(), &[u64::MAX]);
    let c = tensor_from_json(&json!({"dtype": "DT_COMPLEX64", "shape": [2],
        "values": [2, [0, "-inf"]]}))
    .unwrap();
    assert_eq!(
        c.flat::<Complex<f32>>().unwrap(),
        &[Complex::new(2.0, 0.0), Complex::new(0.0, f32::NEG_INFINITY)]
    );
    let s = tensor_from_json(&json!({"dtype": "DT_STRING", "shape": [2],
        "values": [{"base64": "AP8"}, {"base64": "aGk="}]}))
    .unwrap();
    assert_eq!(s.strings().unwrap(), &[vec![0, 0xff], b"hi".to_vec()]);
    // The largest finite values still read (rounding down to MAX).
    let m = tensor_from_json(&json!({"dtype": "DT_FLOAT", "shape": [1],
        "values": [3.4028235e38]}))
    .unwrap();
    assert_eq!(m.flat::<f32>().unwrap(), &[f32::MAX]);
}

#[test]
fn errors() {
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [2, 3], "values": [1, 2]}));
    assert!(
        m.contains("a DT_FLOAT tensor of shape [2,3] has 6 elements, but 2 values were given"),
        "{m}"
    );
    let m = msg(json!({"dtype": "DT_UINT8", "shape": [2], "values": [1, 300]}));
    assert!(
        m.contains("values[1]: 300 is out of range for DT_UINT8 [0, 255]"),
        "{m}"
    );
    assert!(m.starts_with("INVALID_ARGUMENT"), "{m}");
    let m = msg(json!({"dtype": "DT_INT8", "shape": [1], "values": [-129]}));
    assert!(m.contains("out of range for DT_INT8 [-128, 127]"), "{m}");
    let m = msg(json!({"dtype": "DT_UINT64", "shape": [1], "values": [-1]}));
    assert!(m.contains("out of range"), "{m}");
    let m = msg(json!({"dtype": "DT_INT32", "shape": [1], "values": [1.5]}));
    assert!(
        m.contains("values[0]: 1.5 is not an integer, as DT_INT32 needs"),
        "{m}"
    );
    let m = msg(json!({"dtype": "DT_INT32", "shape": [1], "values": ["12a"]}));
    assert!(m.contains("is not an integer"), "{m}");
    let m = msg(json!({"dtype": "DT_INT32", "shape": [1], "values": [true]}));
    assert!(m.contains("is not an integer"), "{m}");
    let m = msg(json!({"dtype": "DT_FOO", "shape": [], "values": [1]}));
    assert!(m.contains("unknown dtype \"DT_FOO\""), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT_REF", "shape": [], "values": [1]}));
    assert!(m.contains("unknown dtype"), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [1], "values": [1e39]}));
    assert!(m.contains("out of range for DT_FLOAT"), "{m}");
    let m = msg(json!({"dtype": "DT_HALF", "shape": [1], "values": [70000]}));
    assert!(m.contains("out of range for DT_HALF"), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [1], "values": ["one"]}));
    assert!(m.contains("\"one\" is not a number for DT_FLOAT"), "{m}");
    let m = msg(json!({"dtype": "DT_BOOL", "shape": [1], "values": [1]}));
    assert!(m.contains("1 is not true or false"), "{m}");
    let m = msg(json!({"dtype": "DT_STRING", "shape": [1], "values": [5]}));
    assert!(m.contains("not a string"), "{m}");
    let m = msg(json!({"dtype": "DT_STRING", "shape": [1], "values": [{"base64": "a"}]}));
    assert!(m.contains("not valid base64"), "{m}");
    let m = msg(json!({"dtype": "DT_COMPLEX64", "shape": [1], "values": [[1, 2, 3]]}));
    assert!(m.contains("not a complex number"), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [-1], "values": []}));
    assert!(m.contains("shape[0] must be a non-negative integer"), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": 3, "values": []}));
    assert!(m.contains("\"shape\" must be an array"), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [], "values": 3}));
    assert!(m.contains("\"values\" must be a flat array"), "{m}");
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [], "valeus": [3]}));
    assert!(m.contains("unknown key \"valeus\""), "{m}");
    let m = msg(json!({"shape": [], "values": [3]}));
    assert!(m.contains("no \"dtype\""), "{m}");
    let m = msg(json!([1, 2]));
    assert!(m.contains("must be a JSON object"), "{m}");
    let m = msg(json!({"dtype": "DT_QINT8", "shape": [], "values": [3]}));
    assert!(m.starts_with("UNIMPLEMENTED"), "{m}");
    let m = msg(json!({"dtype": "DT_RESOURCE", "shape": [], "values": [{"nme": "v"}]}));
    assert!(
        m.contains("unknown key \"nme\" in a resource handle"),
        "{m}"
    );
    // A huge shape with too few values fails before allocating.
    let m = msg(json!({"dtype": "DT_FLOAT", "shape": [1_000_000_000_000i64], "values": []}));
    assert!(m.contains("but 0 values were given"), "{m}");
}

#[test]
fn base64() {
    for (raw, enc) in [
        (&b""[..], ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg=="),
        (b"\xff\xfe\xfd", "//79"),
    ] {
        assert_eq!(base64_encode(raw), enc);
        assert_eq!(base64_decode(enc).unwrap(), raw);
    }
    assert!(base64_decode("Zh==").is_err()); // non-zero leftover bits
    assert!(base64_decode("Z===").is_err());
    assert!(base64_decode("Zm9v!").is_err());
}

fn same_f32(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn same_f64(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

proptest! {
    #[test]
    fn f32_round_trips(v in prop::collection::vec(
        prop_oneof![any::<f32>(), Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY),
                    any::<u32>().prop_map(f32::from_bits)], 0..20)) {
        let t = Tensor::from_vec(&[v.len() as i64], v.clone()).unwrap();
        let back = round_trip(&t);
        let got = back.flat::<f32>().unwrap();
        prop_assert!(v.iter().zip(got).all(|(a, b)| same_f32(*a, *b)), "{:?} vs {:?}", v, got);
    }

    #[test]
    fn f64_round_trips(v in prop::collection::vec(
        prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY),
                    any::<u64>().prop_map(f64::from_bits)], 0..20)) {
        let t = Tensor::from_vec(&[v.len() as i64], v.clone()).unwrap();
        // In memory (the JSON value) the round trip is exact.
        let back = tensor_from_json(&tensor_to_json(&t).unwrap()).unwrap();
        let got = back.flat::<f64>().unwrap();
        prop_assert!(v.iter().zip(got).all(|(a, b)| same_f64(*a, *b)), "{:?} vs {:?}", v, got);
    }

    #[test]
    fn half_and_bfloat16_round_trip(bits in prop::collection::vec(any::<u16>(), 0..20)) {
        let h: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
        let t = Tensor::from_vec(&[h.len() as i64], h.clone()).unwrap();
        let back = round_trip(&t);
        let got = back.flat::<f16>().unwrap();
        prop_assert!(h.iter().zip(got).all(|(a, b)| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()), "{:?} vs {:?}", h, got);
        let b: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b)).collect();
        let t = Tensor::from_vec(&[b.len() as i64], b.clone()).unwrap();
        let back = round_trip(&t);
        let got = back.flat::<bf16>().unwrap();
        prop_assert!(b.iter().zip(got).all(|(a, b)| (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()), "{:?} vs {:?}", b, got);
    }

    #[test]
    fn i64_round_trips(v in prop::collection::vec(any::<i64>(), 0..20), rows in 1i64..3) {
        let n = v.len() as i64 * rows;
        let data: Vec<i64> = (0..rows).flat_map(|_| v.clone()).collect();
        let t = Tensor::from_vec(&[rows, n / rows], data).unwrap();
        let back = round_trip(&t);
        prop_assert_eq!(back, t);
    }

    #[test]
    fn bool_round_trips(v in prop::collection::vec(any::<bool>(), 0..20)) {
        let t = Tensor::from_vec(&[v.len() as i64], v).unwrap();
        prop_assert_eq!(round_trip(&t), t);
    }

    #[test]
    fn string_round_trips(v in prop::collection::vec(
        prop_oneof![any::<String>().prop_map(String::into_bytes),
                    prop::collection::vec(any::<u8>(), 0..12)], 0..10)) {
        let t = Tensor::from_strings(&[v.len() as i64], v).unwrap();
        prop_assert_eq!(round_trip(&t), t);
    }
}
