//! `StringToNumber` (TensorFlow's `parsing_ops`), exactly as TensorFlow 2.x
//! registers it: strings parsed as C's `strtod`/`strtoll` do, with
//! TensorFlow's error messages.

use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::unchanged_shape;
use opforge_core::{
    register_kernel, register_not_differentiable, register_op, DataType, Element, OpDefBuilder,
    Result, Status,
};

/// `StringToNumber`, exactly as TensorFlow 2.x registers it.
pub fn string_to_number() -> OpDefBuilder {
    OpDefBuilder::new("StringToNumber")
        .input("string_tensor: string")
        .output("output: out_type")
        .attr("out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT")
        .set_shape_fn(unchanged_shape)
        .doc(
            "Converts each string in the input Tensor to the specified numeric type.\n\
             \n\
             (Note that int32 overflow results in an error while float overflow\n\
             results in a rounded value.)",
        )
}

register_op!(string_to_number());

/// Whitespace as C's `isspace` sees it, which TensorFlow's parsers skip.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn trim_c_space(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_c_space(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|&b| !is_c_space(b))
        .map_or(start, |e| e + 1);
    &s[start..end]
}

/// Strings this long or longer never convert to a float (TensorFlow's
/// `safe_strtof` / `safe_strtod` reject them: `kFastToBufferSize`).
const MAX_FLOAT_STRING: usize = 32;

/// Parses a float as TensorFlow's `safe_strtod` does (double-conversion with
/// leading/trailing spaces, hex integers, and case-insensitive `inf` / `nan`
/// allowed); `None` if the string is not exactly one number.
fn parse_float<F: std::str::FromStr>(s: &[u8], from_f64: fn(f64) -> F) -> Option<F> {
    if s.len() >= MAX_FLOAT_STRING {
        return None;
    }
    let t = std::str::from_utf8(trim_c_space(s)).ok()?;
    let (neg, body) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let sign = |v: f64| if neg { -v } else { v };
    if body.eq_ignore_ascii_case("inf") {
        return Some(from_f64(sign(f64::INFINITY)));
    }
    if body.eq_ignore_ascii_case("nan") {
        return Some(from_f64(f64::NAN));
    }
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        // Hex integers: exact up to 2^53, then rounded as f64 (then F).
        let v = hex.bytes().fold(0f64, |acc, b| {
            acc * 16.0 + f64::from(char::from(b).to_digit(16).unwrap_or(0))
        });
        return Some(from_f64(sign(v)));
    }
    // Rust's parser reads exactly the decimal syntax (digits, optional
    // point and exponent), rounding correctly to F; reject what it accepts
    // beyond that ("infinity", "nan" forms were handled above).
    if !body
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    // A lone sign leaves nothing to read.
    if !body
        .as_bytes()
        .first()
        .is_some_and(|&b| b.is_ascii_digit() || b == b'.')
    {
        return None;
    }
    t.parse::<F>().ok()
}

/// Parses an integer as TensorFlow's `safe_strto32` / `safe_strto64` /
/// `safe_strtou32` / `safe_strtou64` do: optional spaces, an optional `-`
/// (signed types only; no `+`), decimal digits, optional spaces, and no overflow.
fn parse_int<T: TryFrom<i128>>(s: &[u8], signed: bool) -> Option<T> {
    let t = trim_c_space(s);
    let (neg, digits) = match t.first() {
        Some(b'-') if signed => (true, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
        if v > i128::from(u64::MAX) + 1 {
            return None;
        }
    }
    T::try_from(if neg { -v } else { v }).ok()
}

/// `StringToNumber`'s kernel.
struct StringToNumberKernel;

impl CreateKernel for StringToNumberKernel {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(StringToNumberKernel)
    }
}

fn convert_strings<T: Element>(
    input: &[&[u8]],
    out: &mut [T],
    parse: impl Fn(&[u8]) -> Option<T>,
) -> Result<()> {
    for (o, s) in out.iter_mut().zip(input) {
        *o = parse(s).ok_or_else(|| {
            Status::invalid_argument(format!(
                "StringToNumberOp could not correctly convert string: {}",
                String::from_utf8_lossy(s)
            ))
        })?;
    }
    Ok(())
}

impl OpKernel for StringToNumberKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape = ctx.input(0).shape().clone();
        let out_type = ctx.output_type(0);
        ctx.allocate_output(0, shape)?;
        let (ins, out) = ctx.inputs_and_output(0)?;
        let input = ins[0].strings()?;
        // TensorFlow parses (and reports) each string's `c_str()`: up to its first NUL.
        let input: Vec<&[u8]> = input
            .iter()
            .map(|s| s.split(|&b| b == 0).next().unwrap_or(&[]))
            .collect();
        let input = input.as_slice();
        match out_type {
            DataType::Float => convert_strings(input, out.flat_mut::<f32>()?, |s| {
                parse_float::<f32>(s, |v| v as f32)
            }),
            DataType::Double => convert_strings(input, out.flat_mut::<f64>()?, |s| {
                parse_float::<f64>(s, |v| v)
            }),
            DataType::Int32 => {
                convert_strings(input, out.flat_mut::<i32>()?, |s| parse_int(s, true))
            }
            DataType::Int64 => {
                convert_strings(input, out.flat_mut::<i64>()?, |s| parse_int(s, true))
            }
            DataType::UInt32 => {
                convert_strings(input, out.flat_mut::<u32>()?, |s| parse_int(s, false))
            }
            DataType::UInt64 => {
                convert_strings(input, out.flat_mut::<u64>()?, |s| parse_int(s, false))
            }
            other => Err(Status::unimplemented(format!(
                "StringToNumber does not support out_type {other}"
            ))),
        }
    }
}

register_kernel!(
    KernelDefBuilder::new("StringToNumber").type_constraint_list(
        "out_type",
        &[
            DataType::Float,
            DataType::Double,
            DataType::Int32,
            DataType::Int64,
            DataType::UInt32,
            DataType::UInt64,
        ],
    ),
    StringToNumberKernel
);

// A string input: not differentiable.
register_not_differentiable!("StringToNumber");

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::autodiff::{Gradient, GradientFn, GradientTape, OpsExt};
    use opforge_core::proto::{self, OpDef};
    use opforge_core::{Code, Tensor};
    use opforge_testing::util::{assert_close, ctx};

    #[test]
    fn string_to_number_matches_tensorflow() {
        // TensorFlow 2.21's registered OpDef (summary and description stripped).
        let expected: OpDef = proto::from_text(
            r#"
            name: "StringToNumber"
            input_arg { name: "string_tensor" type: DT_STRING }
            output_arg { name: "output" type_attr: "out_type" }
            attr {
              name: "out_type"
              type: "type"
              default_value { type: DT_FLOAT }
              allowed_values {
                list { type: [DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT32, DT_UINT64] }
              }
            }
            "#,
        )
        .unwrap();
        let mut op = string_to_number().finalize().unwrap();
        op.summary.clear();
        op.description.clear();
        assert_eq!(op, expected);
    }

    fn to_number(strings: &[&str], out_type: DataType) -> opforge_core::Result<Tensor> {
        let vals = strings.iter().map(|s| s.as_bytes().to_vec()).collect();
        ctx()
            .op("StringToNumber")
            .input(Tensor::from_strings(&[strings.len() as i64], vals).unwrap())
            .attr("out_type", out_type)
            .run1()
    }

    /// Fuzz finding (kernel): a string that is only a sign (`"-"`, `" + "`)
    /// made the float parser index an empty body: the kernel panicked. It is
    /// not a number, as in TensorFlow.
    #[test]
    fn string_to_number_of_a_lone_sign_is_an_error() {
        for s in ["-", "+", " - "] {
            for dt in [DataType::Float, DataType::Double, DataType::Int32] {
                let e = to_number(&[s], dt).unwrap_err();
                assert_eq!(e.code(), Code::InvalidArgument, "{s:?} {dt}: {e}");
                assert!(
                    e.message()
                        .contains("StringToNumberOp could not correctly convert string"),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn string_to_number_floats() {
        let y = to_number(
            &[
                "1.5", " -2e3 ", "0.1", "+7", ".5", "5.", "0x1A", "-0X10", "1e40",
            ],
            DataType::Float,
        )
        .unwrap();
        assert_eq!(
            y.flat::<f32>().unwrap(),
            &[1.5, -2000.0, 0.1, 7.0, 0.5, 5.0, 26.0, -16.0, f32::INFINITY]
        );
        let y = to_number(&["INF", "-inf", "NaN", "-nan"], DataType::Float).unwrap();
        let v = y.flat::<f32>().unwrap();
        assert_eq!(&v[..2], &[f32::INFINITY, f32::NEG_INFINITY]);
        assert!(v[2].is_nan() && v[3].is_nan());
        // Default out_type is float.
        let y = ctx()
            .op("StringToNumber")
            .input(Tensor::from_strings(&[], vec![b"3.25".to_vec()]).unwrap())
            .run1()
            .unwrap();
        assert_eq!(y.scalar_value::<f32>().unwrap(), 3.25);
        let y = to_number(&["0.1", "1e308", "-4.9e-324"], DataType::Double).unwrap();
        assert_eq!(y.flat::<f64>().unwrap(), &[0.1, 1e308, -4.9e-324]);
        let y = to_number(&[], DataType::Double).unwrap();
        assert_eq!(y.dims(), &[0]);
        let y = ctx()
            .op("StringToNumber")
            .input(
                Tensor::from_strings(&[2, 1], vec![b"1".to_vec(), b"2\x00junk".to_vec()]).unwrap(),
            )
            .attr("out_type", DataType::Double)
            .run1()
            .unwrap();
        assert_close(&y, &[2, 1], &[1.0, 2.0], 0.0);
    }

    #[test]
    fn string_to_number_integers() {
        let y = to_number(
            &["12", " -7 ", "2147483647", "-2147483648", "007"],
            DataType::Int32,
        )
        .unwrap();
        assert_eq!(y.flat::<i32>().unwrap(), &[12, -7, i32::MAX, i32::MIN, 7]);
        let y = to_number(
            &["9223372036854775807", "-9223372036854775808"],
            DataType::Int64,
        )
        .unwrap();
        assert_eq!(y.flat::<i64>().unwrap(), &[i64::MAX, i64::MIN]);
        let y = to_number(&["4294967295", "0"], DataType::UInt32).unwrap();
        assert_eq!(y.flat::<u32>().unwrap(), &[u32::MAX, 0]);
        let y = to_number(&["18446744073709551615"], DataType::UInt64).unwrap();
        assert_eq!(y.flat::<u64>().unwrap(), &[u64::MAX]);
    }

    #[test]
    fn string_to_number_errors() {
        let bad: &[(&str, DataType)] = &[
            ("abc", DataType::Float),
            ("", DataType::Float),
            ("  ", DataType::Double),
            ("1.5abc", DataType::Float),
            ("infinity", DataType::Float),
            ("1,5", DataType::Double),
            ("--1", DataType::Double),
            ("0x", DataType::Float),
            // 32 characters: too long for TensorFlow's float parser.
            ("1.000000000000000000000000000000", DataType::Double),
            ("1.5", DataType::Int32),
            ("+1", DataType::Int32),
            ("2147483648", DataType::Int32),
            ("-2147483649", DataType::Int32),
            ("9223372036854775808", DataType::Int64),
            ("-1", DataType::UInt32),
            ("4294967296", DataType::UInt32),
            ("18446744073709551616", DataType::UInt64),
            (
                "99999999999999999999999999999999999999999",
                DataType::UInt64,
            ),
            ("1 2", DataType::Int64),
            ("0x10", DataType::Int32),
        ];
        for (s, dt) in bad {
            let e = to_number(&["1", s], *dt).unwrap_err();
            assert_eq!(e.code(), Code::InvalidArgument, "{s:?} as {dt}");
            assert!(
                e.message().starts_with(&format!(
                    "StringToNumberOp could not correctly convert string: {s}"
                )),
                "{s:?} as {dt}: {e}"
            );
        }
        // 31 characters still parse.
        let y = to_number(&["1.00000000000000000000000000000"], DataType::Double).unwrap();
        assert_eq!(y.flat::<f64>().unwrap(), &[1.0]);
        let e = ctx()
            .op("StringToNumber")
            .input(Tensor::from_strings(&[], vec![b"1".to_vec()]).unwrap())
            .attr("out_type", DataType::Int8)
            .run1()
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
    }

    #[test]
    fn string_to_number_is_not_differentiable() {
        assert!(matches!(
            opforge_core::registry::Registry::global()
                .attr::<Gradient>("StringToNumber")
                .as_deref(),
            Some(GradientFn::NotDifferentiable)
        ));
        let mut tape = GradientTape::new(ctx(), false);
        let s = tape.watch(Tensor::from_strings(&[1], vec![b"2.5".to_vec()]).unwrap());
        let y = tape.op1("StringToNumber", &[s], &[]).unwrap();
        assert_eq!(tape.gradient(y, &[s]).unwrap(), vec![None]);
    }
}
