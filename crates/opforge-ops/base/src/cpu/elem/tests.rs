//! Spot checks of the element traits' semantics.

use super::*;
use half::{bf16, f16};

#[test]
fn integers_wrap() {
    assert_eq!(Num::add(i8::MAX, 1), i8::MIN);
    assert_eq!(Num::mul(200u8, 2), 144);
    assert_eq!(Signed::neg(i32::MIN), i32::MIN);
    assert_eq!(i16::MIN.trunc_div(-1), i16::MIN);
    assert_eq!(i16::MIN.trunc_rem(-1), 0);
    assert_eq!(3i32.int_pow(-1), 0);
    assert_eq!(3u8.int_pow(5), 243);
    assert_eq!(i64::MIN.abs_wrapping(), i64::MIN);
}

#[test]
fn half_rounds_each_operation_and_accumulates_in_f32() {
    let a = f16::from_f32(2048.0);
    let one = f16::ONE;
    // 2049 is not a half: each addition rounds back to 2048.
    assert_eq!(Num::add(Num::add(a, one), one), a);
    // The accumulator does not round until the end.
    let acc = a.to_acc().add(one.to_acc()).add(one.to_acc());
    assert_eq!(f16::from_acc(acc), f16::from_f32(2050.0));
    assert_eq!(bf16::from_mean_acc(bf16::ONE.to_mean_acc()), bf16::ONE);
    assert_eq!(RealFloat::abs(f16::from_f32(-0.0)).to_bits(), 0);
}

#[test]
fn means_divide_as_tensorflow() {
    assert!(0.0f32.div_count(0).is_nan());
    assert_eq!(7i64.div_count(0), 0);
    assert_eq!((-7i64).div_count(2), -3);
    assert_eq!(i8::from_mean_acc((-128i8).to_mean_acc().div_count(1)), -128);
    assert_eq!(Complex::<f32>::ONE.div_count(0), Complex::<f32>::ZERO);
}

#[test]
fn keys_and_nan() {
    assert_eq!(f16::from_f32(1.5).key(), 1.5f32);
    assert_eq!(<f16 as Ordered>::ARG_LOWEST, -65504.0);
    assert!(Ordered::is_nan(f32::NAN));
    assert!(!Ordered::is_nan(i8::MIN));
    assert_eq!(true.key(), 1u8);
    assert!(!bool::from_key(<bool as Ordered>::MAX_IDENTITY));
}

#[test]
fn narrowing_is_static_cast() {
    assert_eq!(i8::narrow(Wide::Int(300)), 44);
    assert_eq!(u8::narrow(Wide::F32(-1.5)), 0);
    assert_eq!(i32::narrow(Wide::F64(f64::NAN)), 0);
    assert_eq!(i32::narrow(Wide::F64(1e20)), i32::MAX);
    assert!(bool::narrow(Wide::C64(Complex::new(0.5, 0.0))));
    assert_eq!(f16::narrow(Wide::Int(6)), f16::from_f32(6.0));
    assert_eq!(
        Complex::<f64>::narrow(Wide::Bool(true)),
        Complex::new(1.0, 0.0)
    );
    assert_eq!(f16::from_f32(0.25).widen(), Wide::F32(0.25));
    assert_eq!(u64::MAX.widen(), Wide::UInt(u64::MAX));
}
