//! Medians of small windows, the pure part of the kernels.
//!
//! A window's median is computed by a *selection network*: Batcher's
//! odd-even merge sorting network for the window's size, pruned to the
//! comparators the middle position(s) depend on. The network is data
//! independent (no branches), so one pass runs it on many windows at once,
//! one per lane: [`median_lanes`] takes the windows of `lanes` channels
//! element-major (`buf[e * lanes + l]`), and each comparator is a loop of
//! `min`/`max` over the lanes, which the compiler turns into SIMD.
//!
//! NaN: the comparators are the plain `a < b` selects (one `minps`/`maxps`
//! each); a NaN scrambles the result, so each lane's NaN flag is gathered
//! with the values and a lane that saw one answers NaN, as `numpy.median`
//! does. An even count gives the mean of the two middle values, as
//! `numpy.median` computes it (`(a + b) / 2` in the element type).

use std::sync::OnceLock;

/// The element types the kernels compute in (half and bfloat16 compute in
/// `f32`).
pub trait Float: Copy + PartialOrd + Send + Sync + Default + 'static {
    /// A quiet NaN.
    const NAN: Self;
    /// Zero.
    const ZERO: Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// The smaller of two (either one if a NaN is involved).
    fn lo(a: Self, b: Self) -> Self;
    /// The larger of two (either one if a NaN is involved).
    fn hi(a: Self, b: Self) -> Self;
    /// `(a + b) / 2`, as `numpy.mean` of two values.
    fn mid(a: Self, b: Self) -> Self;
    /// `a / 2`.
    fn halve(a: Self) -> Self;
    /// `a + b`.
    fn add(a: Self, b: Self) -> Self;
}

macro_rules! float {
    ($t:ty) => {
        impl Float for $t {
            const NAN: Self = <$t>::NAN;
            const ZERO: Self = 0.0;
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn lo(a: Self, b: Self) -> Self {
                if a < b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn hi(a: Self, b: Self) -> Self {
                if a > b {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn mid(a: Self, b: Self) -> Self {
                (a + b) / 2.0
            }
            #[inline(always)]
            fn halve(a: Self) -> Self {
                a / 2.0
            }
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
        }
    };
}

float!(f32);
float!(f64);

/// The largest window with a selection network; larger windows select
/// with `select_nth_unstable` per lane.
pub const MAX_NETWORK: usize = 64;

/// Batcher's odd-even merge sort for `n` inputs (`n` a power of two), its
/// comparators `(i, j)`, `i < j`, in order: after them, position `i` holds
/// the smaller value.
fn batcher(n: usize) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let mut p = 1;
    while p < n {
        let mut k = p;
        while k >= 1 {
            let mut j = k % p;
            while j + k < n {
                for i in 0..k.min(n - j - k) {
                    if (i + j) / (2 * p) == (i + j + k) / (2 * p) {
                        pairs.push((i + j, i + j + k));
                    }
                }
                j += 2 * k;
            }
            k /= 2;
        }
        p *= 2;
    }
    pairs
}

/// The selection network of the median of `n` values: Batcher's network of
/// the next power of two without the comparators touching positions `>= n`
/// (those hold `+inf` in the padded network and never move), then without
/// the comparators the middle positions `(n - 1) / 2` and `n / 2` do not
/// depend on.
pub fn median_network(n: usize) -> Vec<(usize, usize)> {
    let sort: Vec<(usize, usize)> = batcher(n.next_power_of_two())
        .into_iter()
        .filter(|&(_, j)| j < n)
        .collect();
    let mut needed = vec![false; n];
    if n > 0 {
        needed[(n - 1) / 2] = true;
        needed[n / 2] = true;
    }
    let mut kept = Vec::new();
    for &(i, j) in sort.iter().rev() {
        if needed[i] || needed[j] {
            needed[i] = true;
            needed[j] = true;
            kept.push((i, j));
        }
    }
    kept.reverse();
    kept
}

/// [`median_network`] for every `n <= MAX_NETWORK`, made once.
pub fn network(n: usize) -> &'static [(usize, usize)] {
    static NETS: OnceLock<Vec<Vec<(usize, usize)>>> = OnceLock::new();
    &NETS.get_or_init(|| (0..=MAX_NETWORK).map(median_network).collect())[n]
}

/// The medians of `lanes` windows of `k` values each, laid out
/// element-major in `buf` (`buf[e * lanes + l]` is element `e` of window
/// `l`; `buf` is scrambled), into `out[..lanes]`; `nan[l]` says whether
/// window `l` holds a NaN (its median is then NaN). `k == 0` gives NaN.
#[inline(always)]
pub fn median_lanes<W: Float>(buf: &mut [W], k: usize, lanes: usize, nan: &[bool], out: &mut [W]) {
    let (buf, out, nan) = (&mut buf[..k * lanes], &mut out[..lanes], &nan[..lanes]);
    if k == 0 {
        out.fill(W::NAN);
        return;
    }
    if k <= MAX_NETWORK {
        for &(i, j) in network(k) {
            let (a, b) = buf.split_at_mut(j * lanes);
            let a = &mut a[i * lanes..(i + 1) * lanes];
            let b = &mut b[..lanes];
            for (x, y) in a.iter_mut().zip(b.iter_mut()) {
                let (u, v) = (*x, *y);
                *x = W::lo(u, v);
                *y = W::hi(u, v);
            }
        }
        let m = k / 2;
        let upper = &buf[m * lanes..(m + 1) * lanes];
        if k % 2 == 1 {
            out.copy_from_slice(upper);
        } else {
            let lower = &buf[(m - 1) * lanes..m * lanes];
            for ((o, &a), &b) in out.iter_mut().zip(lower).zip(upper) {
                *o = W::mid(a, b);
            }
        }
    } else {
        let mut window = vec![W::ZERO; k];
        for (l, o) in out.iter_mut().enumerate() {
            if nan[l] {
                continue;
            }
            for (e, w) in window.iter_mut().enumerate() {
                *w = buf[e * lanes + l];
            }
            *o = select_median(&mut window);
        }
    }
    for (o, &n) in out.iter_mut().zip(nan) {
        if n {
            *o = W::NAN;
        }
    }
}

/// The median of NaN-free values by `select_nth_unstable` (`v` is
/// reordered; not empty).
fn select_median<W: Float>(v: &mut [W]) -> W {
    let cmp = |a: &W, b: &W| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal);
    let (k, m) = (v.len(), v.len() / 2);
    let (lower, upper, _) = v.select_nth_unstable_by(m, cmp);
    let upper = *upper;
    if k % 2 == 1 {
        upper
    } else {
        let below = lower.iter().copied().fold(lower[0], W::hi);
        W::mid(below, upper)
    }
}

/// The median of `v` (reordered), as `numpy.median`: NaN if `v` holds a
/// NaN or is empty.
pub fn median<W: Float>(v: &mut [W]) -> W {
    let nan = [v.iter().any(|x| x.is_nan())];
    let mut out = [W::ZERO];
    median_lanes(v, v.len(), 1, &nan, &mut out);
    out[0]
}

/// Which of a window's elements the gradient of its median goes to, with
/// the share of each: `window` holds the values in flat-index order
/// (`scratch` is reused). Odd count: the middle element of the stable sort
/// (ties to the lowest flat index) gets 1; even count: the two middle ones
/// get 1/2 each. A window holding a NaN routes everything to its first NaN
/// (the value the median propagates). Returns `(position, both)`: the
/// position in `window` of the (lower) middle element, and for an even
/// count the position of the upper one.
pub fn median_positions<W: Float>(
    window: &[W],
    scratch: &mut Vec<usize>,
) -> Option<(usize, Option<usize>)> {
    let k = window.len();
    if k == 0 {
        return None;
    }
    if let Some(p) = window.iter().position(|v| v.is_nan()) {
        return Some((p, None));
    }
    scratch.clear();
    scratch.extend(0..k);
    // Stable: equal values keep their flat-index order.
    scratch.sort_by(|&a, &b| {
        window[a]
            .partial_cmp(&window[b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let m = k / 2;
    Some(if k % 2 == 1 {
        (scratch[m], None)
    } else {
        (scratch[m - 1], Some(scratch[m]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: deterministic random numbers without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// numpy.median by sorting: NaN if any NaN, mean of the two middle
    /// values for an even count.
    fn reference(v: &[f64]) -> f64 {
        if v.is_empty() || v.iter().any(|x| x.is_nan()) {
            return f64::NAN;
        }
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let m = s.len() / 2;
        if s.len() % 2 == 1 {
            s[m]
        } else {
            (s[m - 1] + s[m]) / 2.0
        }
    }

    /// A random window of `k` values: few distinct values (ties) or many,
    /// sometimes with NaN or infinities.
    fn window(rng: &mut Rng, k: usize) -> Vec<f64> {
        let kind = rng.below(4);
        let mut v: Vec<f64> = (0..k)
            .map(|_| match kind {
                0 => rng.below(3) as f64 - 1.0,
                1 => (rng.below(2001) as f64 - 1000.0) / 8.0,
                2 => match rng.below(10) {
                    0 => f64::INFINITY,
                    1 => f64::NEG_INFINITY,
                    _ => rng.below(5) as f64,
                },
                _ => rng.next() as f64 / u64::MAX as f64 - 0.5,
            })
            .collect();
        if rng.below(5) == 0 {
            let i = rng.below(k as u64) as usize;
            v[i] = f64::NAN;
        }
        v
    }

    fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a == b
    }

    #[test]
    fn networks_select_the_middle_of_every_0_1_input() {
        // The 0-1 principle: a comparator network that puts the right
        // values at the middle positions for every 0/1 input does for
        // every input.
        for n in 1..=14usize {
            let net = median_network(n);
            for bits in 0u32..(1 << n) {
                let mut v: Vec<u8> = (0..n).map(|i| ((bits >> i) & 1) as u8).collect();
                let ones = bits.count_ones() as usize;
                for &(i, j) in &net {
                    let (a, b) = (v[i], v[j]);
                    v[i] = a.min(b);
                    v[j] = a.max(b);
                }
                for m in [(n - 1) / 2, n / 2] {
                    assert_eq!(v[m], u8::from(m >= n - ones), "n {n} input {bits:b}");
                }
            }
        }
        // Pruned: the 9-element network is far below a full sort's.
        assert!(network(9).len() < 30, "{}", network(9).len());
        assert!(network(1).is_empty());
    }

    #[test]
    fn median_matches_sorting_on_random_windows_of_every_size() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for k in 1..=25usize {
            for _ in 0..400 {
                let v = window(&mut rng, k);
                let want = reference(&v);
                let got = median(&mut v.clone());
                assert!(same(got, want), "k {k} {v:?}: {got} != {want}");
                let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                let want32 = reference(&v32.iter().map(|&x| x as f64).collect::<Vec<_>>());
                let got32 = median(&mut v32.clone());
                // The f32 mean of two f32 values, as numpy computes it.
                let want32 = if k % 2 == 0 && !want32.is_nan() {
                    let mut s = v32.clone();
                    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
                    (s[k / 2 - 1] + s[k / 2]) / 2.0
                } else {
                    want32 as f32
                };
                assert!(
                    same(got32 as f64, want32 as f64),
                    "k {k} {v32:?}: {got32} != {want32}"
                );
            }
        }
    }

    #[test]
    fn lanes_compute_independent_windows() {
        let mut rng = Rng(42);
        for k in 1..=25usize {
            for lanes in [1usize, 3, 16, 17] {
                let windows: Vec<Vec<f64>> = (0..lanes).map(|_| window(&mut rng, k)).collect();
                let mut buf = vec![0.0; k * lanes];
                for (l, w) in windows.iter().enumerate() {
                    for (e, &x) in w.iter().enumerate() {
                        buf[e * lanes + l] = x;
                    }
                }
                let nan: Vec<bool> = windows
                    .iter()
                    .map(|w| w.iter().any(|x| x.is_nan()))
                    .collect();
                let mut out = vec![0.0; lanes];
                median_lanes(&mut buf, k, lanes, &nan, &mut out);
                for (l, w) in windows.iter().enumerate() {
                    assert!(
                        same(out[l], reference(w)),
                        "k {k} lane {l} {w:?}: {}",
                        out[l]
                    );
                }
            }
        }
    }

    #[test]
    fn windows_beyond_the_networks_select() {
        let mut rng = Rng(7);
        for k in [MAX_NETWORK + 1, 81, 100] {
            for _ in 0..50 {
                let v = window(&mut rng, k);
                assert!(same(median(&mut v.clone()), reference(&v)), "k {k}");
            }
        }
        assert!(median::<f32>(&mut []).is_nan());
    }

    #[test]
    fn gradient_positions_break_ties_to_the_lowest_index() {
        let mut s = Vec::new();
        assert_eq!(median_positions(&[3.0, 1.0, 2.0], &mut s), Some((2, None)));
        assert_eq!(median_positions(&[2.0, 2.0, 2.0], &mut s), Some((1, None)));
        assert_eq!(
            median_positions(&[5.0, 1.0, 1.0, 5.0], &mut s),
            Some((2, Some(0)))
        );
        assert_eq!(
            median_positions(&[1.0, 1.0, 1.0, 1.0], &mut s),
            Some((1, Some(2)))
        );
        assert_eq!(
            median_positions(&[1.0, f64::NAN, f64::NAN], &mut s),
            Some((1, None))
        );
        assert_eq!(median_positions::<f32>(&[], &mut s), None);
        // Against a brute-force rank count on random windows with ties.
        let mut rng = Rng(5);
        for k in 1..=25usize {
            for _ in 0..100 {
                let v: Vec<f64> = (0..k).map(|_| rng.below(4) as f64).collect();
                // rank of i: elements smaller, or equal with a lower index.
                let rank = |i: usize| {
                    v.iter()
                        .enumerate()
                        .filter(|&(j, &x)| x < v[i] || (x == v[i] && j < i))
                        .count()
                };
                let at = |r: usize| (0..k).find(|&i| rank(i) == r).unwrap();
                let want = if k % 2 == 1 {
                    (at(k / 2), None)
                } else {
                    (at(k / 2 - 1), Some(at(k / 2)))
                };
                assert_eq!(median_positions(&v, &mut s), Some(want), "{v:?}");
            }
        }
    }
}
