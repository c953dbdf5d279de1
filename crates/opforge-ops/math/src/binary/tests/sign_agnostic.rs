//! The ops that compute unsigned integers as the signed integers of their
//! size (`sign_agnostic!`): every unsigned dtype, on every path of the
//! elementwise engine (one element, same shapes, a scalar operand,
//! broadcasting, an input forwarded to the output), against Rust's own
//! wrapping arithmetic.

use super::*;

/// Values that wrap in every operation: the extremes, the sign bit and
/// small numbers.
macro_rules! wrap_values {
    ($t:ty) => {{
        let half = <$t>::MAX / 2 + 1;
        vec![
            0 as $t,
            1,
            2,
            3,
            half - 1,
            half,
            half + 1,
            <$t>::MAX - 1,
            <$t>::MAX,
        ]
    }};
}

fn bin(op: &str, x: Tensor, y: Tensor) -> Tensor {
    ctx().op(op).input(x).input(y).run1().unwrap()
}

macro_rules! check_unsigned {
    ($($t:ty),*) => {$({
        let v: Vec<$t> = wrap_values!($t);
        let n = v.len();
        // Every pair of values: x[i, j] = v[i], y[i, j] = v[j].
        let xs: Vec<$t> = (0..n * n).map(|k| v[k / n]).collect();
        let ys: Vec<$t> = (0..n * n).map(|k| v[k % n]).collect();
        let dims = [n as i64, n as i64];
        type F = fn($t, $t) -> $t;
        let mut ops: Vec<(&str, F)> = vec![
            ("AddV2", <$t>::wrapping_add),
            ("Sub", <$t>::wrapping_sub),
            ("Mul", <$t>::wrapping_mul),
        ];
        // TensorFlow's `Add` takes uint8 as its only unsigned type.
        if <$t as Element>::DTYPE == DataType::UInt8 {
            ops.push(("Add", <$t>::wrapping_add));
        }
        for (op, f) in ops {
            let want: Vec<$t> = xs.iter().zip(&ys).map(|(&a, &b)| f(a, b)).collect();
            // Same shapes (the inputs are shared: nothing is forwarded).
            let (x, y) = (t(&dims, xs.clone()), t(&dims, ys.clone()));
            assert_eq!(bin(op, x.clone(), y.clone()).flat::<$t>().unwrap(), &want[..], "{op}");
            // An input the op may write its output into.
            let got = bin(op, t(&dims, xs.clone()), t(&dims, ys.clone()));
            assert_eq!(got.flat::<$t>().unwrap(), &want[..], "{op} forwarded");
            // Broadcasting: a column against a row.
            let col = t(&[n as i64, 1], v.clone());
            let row = t(&[1, n as i64], v.clone());
            assert_eq!(bin(op, col, row).flat::<$t>().unwrap(), &want[..], "{op} broadcast");
            // A scalar operand, on either side, and two scalars.
            for (i, &a) in v.iter().enumerate() {
                let want_row: Vec<$t> = v.iter().map(|&b| f(a, b)).collect();
                let got = bin(op, Tensor::scalar(a), t(&[n as i64], v.clone()));
                assert_eq!(got.flat::<$t>().unwrap(), &want_row[..], "{op} scalar x");
                let want_col: Vec<$t> = v.iter().map(|&b| f(b, a)).collect();
                let got = bin(op, t(&[n as i64], v.clone()), Tensor::scalar(a));
                assert_eq!(got.flat::<$t>().unwrap(), &want_col[..], "{op} scalar y");
                let got = bin(op, Tensor::scalar(a), Tensor::scalar(v[n - 1 - i]));
                assert_eq!(got.flat::<$t>().unwrap(), &[f(a, v[n - 1 - i])], "{op} scalars");
            }
        }
        let eq: Vec<bool> = xs.iter().zip(&ys).map(|(a, b)| a == b).collect();
        let ne: Vec<bool> = eq.iter().map(|e| !e).collect();
        let (x, y) = (t(&dims, xs.clone()), t(&dims, ys.clone()));
        assert_eq!(bin("Equal", x.clone(), y.clone()).flat::<bool>().unwrap(), &eq[..]);
        assert_eq!(bin("NotEqual", x, y).flat::<bool>().unwrap(), &ne[..]);
        // AddN of three: x + y + x.
        let want: Vec<$t> = xs
            .iter()
            .zip(&ys)
            .map(|(&a, &b)| a.wrapping_add(b).wrapping_add(a))
            .collect();
        let got = ctx()
            .op("AddN")
            .input_list(vec![t(&dims, xs.clone()), t(&dims, ys.clone()), t(&dims, xs.clone())])
            .run1()
            .unwrap();
        assert_eq!(got.flat::<$t>().unwrap(), &want[..], "AddN");
        assert_eq!(got.dtype(), <$t as Element>::DTYPE);
    })*};
}

#[test]
fn unsigned_integers_wrap_as_rust_does_on_every_path() {
    check_unsigned!(u8, u16, u32, u64);
}
