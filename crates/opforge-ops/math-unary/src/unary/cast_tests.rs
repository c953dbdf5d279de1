//! `Cast` between bool and every integer type, against Rust's `as` (which
//! is C++'s `static_cast` for these): casts to an integer compile once per
//! destination size (`sign_agnostic!`), so each signedness is checked.

use super::*;
use half::bf16;
use opforge_core::Tensor;
use opforge_testing::util::{ctx, t};

fn cast(x: Tensor, dst: DataType) -> Tensor {
    cast_truncating(x, dst, false)
}

fn cast_truncating(x: Tensor, dst: DataType, truncate: bool) -> Tensor {
    let op = ctx().op("Cast").input(x).attr("DstT", dst);
    op.attr("Truncate", truncate).run1().unwrap()
}

/// Each destination integer type for one source type and its values.
macro_rules! to_every_integer {
    ($src:ty, $values:expr) => {{
        let values: Vec<$src> = $values;
        let x = t(&[values.len() as i64], values.clone());
        to_every_integer!(@dst x, values, i8, i16, i32, i64, u8, u16, u32, u64);
    }};
    (@dst $x:ident, $values:ident, $($dst:ty),*) => {$({
        let want: Vec<$dst> = $values.iter().map(|&v| v as $dst).collect();
        let got = cast($x.clone(), <$dst as Element>::DTYPE);
        assert_eq!(got.dtype(), <$dst as Element>::DTYPE);
        assert_eq!(
            got.flat::<$dst>().unwrap(),
            &want[..],
            "{} to {}",
            $x.dtype(),
            <$dst as Element>::DTYPE
        );
    })*};
}

/// The extremes, the values around the sign bit of every size and small
/// numbers, of one integer type.
macro_rules! edge_values {
    ($t:ty) => {{
        let mut v: Vec<i128> = vec![0, 1, 2, 127, 128, 255, 256, 32767, 32768, 65535, 65536];
        v.extend([
            i32::MAX as i128,
            1 << 31,
            u32::MAX as i128,
            1 << 32,
            i64::MAX as i128,
        ]);
        v.extend([
            u64::MAX as i128,
            -1,
            -2,
            -128,
            -129,
            -32768,
            -32769,
            i32::MIN as i128,
        ]);
        v.push(i64::MIN as i128);
        v.push(<$t>::MIN as i128);
        v.push(<$t>::MAX as i128);
        v.into_iter()
            .filter(|&x| x >= <$t>::MIN as i128 && x <= <$t>::MAX as i128)
            .map(|x| x as $t)
            .collect::<Vec<$t>>()
    }};
}

#[test]
fn integer_and_bool_casts_to_every_integer_match_rust_as() {
    to_every_integer!(i8, edge_values!(i8));
    to_every_integer!(i16, edge_values!(i16));
    to_every_integer!(i32, edge_values!(i32));
    to_every_integer!(i64, edge_values!(i64));
    to_every_integer!(u8, edge_values!(u8));
    to_every_integer!(u16, edge_values!(u16));
    to_every_integer!(u32, edge_values!(u32));
    to_every_integer!(u64, edge_values!(u64));
    to_every_integer!(bool, vec![true, false, true]);
}

#[test]
fn truncating_casts_clear_low_bits_only_where_tensorflow_does() {
    // 1 + 3/256 lies halfway between the bfloat16 values 1 + 1/128 and
    // 1 + 2/128: rounding to nearest even gives the latter; Truncate clears
    // the 16 low bits first, which gives the former.
    let x = t(&[2], vec![1.0f32 + 3.0 / 256.0, -(1.0f32 + 3.0 / 256.0)]);
    let got = cast_truncating(x.clone(), DataType::BFloat16, true);
    let v: Vec<f32> = got
        .flat::<bf16>()
        .unwrap()
        .iter()
        .map(|b| b.to_f32())
        .collect();
    assert_eq!(v, [1.0 + 1.0 / 128.0, -(1.0 + 1.0 / 128.0)]);
    let got = cast(x, DataType::BFloat16);
    let v: Vec<f32> = got
        .flat::<bf16>()
        .unwrap()
        .iter()
        .map(|b| b.to_f32())
        .collect();
    assert_eq!(v, [1.0 + 1.0 / 64.0, -(1.0 + 1.0 / 64.0)]);
    // Truncate has no effect on a cast TensorFlow does not truncate.
    let x = t(&[2], vec![300i32, -1]);
    let got = cast_truncating(x, DataType::UInt8, true);
    assert_eq!(got.flat::<u8>().unwrap(), &[44, 255]);
}
