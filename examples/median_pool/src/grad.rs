//! `MedianPoolGrad`'s computation: each output gradient goes to its window's
//! median element (half to each of the two middle ones for an even count,
//! ties to the lowest flat index), by rank counting for small windows and
//! by a sort per channel for larger ones.

use super::*;

/// The largest window whose gradient counts ranks ([`grad_image`]).
pub(crate) const RANK_COUNT_MAX: usize = 49;

/// One batch element's gradient (`dx` is image `n` of the input's shape,
/// zeroed). For each window position, its elements are gathered for all
/// channels (element-major, as the forward kernel does) and each element's
/// rank in the window is counted over the channels as SIMD lanes: the
/// elements before it that are `<=` and the ones after it that are `<`
/// (ties ordered by flat index, which is window order). The element of rank
/// `k / 2` gets the gradient (odd count), the ones of ranks `k / 2 - 1` and
/// `k / 2` half each (even count); a channel whose window holds a NaN sends
/// it to its first NaN.
pub(crate) fn grad_image<W: Float>(x: &[W], dy: &[W], g: &Geometry, n: usize, dx: &mut [W]) {
    let c = g.c;
    let mut buf: Vec<W> = Vec::with_capacity(g.kh * g.kw * c);
    let mut rank: Vec<u32> = Vec::with_capacity(g.kh * g.kw * c);
    let mut at: Vec<usize> = Vec::with_capacity(g.kh * g.kw);
    let mut nan = vec![false; c];
    let image = g.h * g.w * c;
    let x = &x[n * image..(n + 1) * image];
    for oh in 0..g.out_h {
        let rows = g.rows(oh);
        for ow in 0..g.out_w {
            let cols = g.cols(ow);
            buf.clear();
            at.clear();
            nan.fill(false);
            for ih in rows.clone() {
                for iw in cols.clone() {
                    let base = (ih * g.w + iw) * c;
                    let src = &x[base..base + c];
                    buf.extend_from_slice(src);
                    at.push(base);
                    for (f, v) in nan.iter_mut().zip(src) {
                        *f |= v.is_nan();
                    }
                }
            }
            let k = at.len();
            if k == 0 {
                continue;
            }
            rank.clear();
            rank.resize(k * c, 0);
            for i in 0..k {
                let vi = &buf[i * c..(i + 1) * c];
                let ri = &mut rank[i * c..(i + 1) * c];
                for j in 0..k {
                    let vj = &buf[j * c..(j + 1) * c];
                    if j < i {
                        for ch in 0..c {
                            ri[ch] += u32::from(vj[ch] <= vi[ch]);
                        }
                    } else if j > i {
                        for ch in 0..c {
                            ri[ch] += u32::from(vj[ch] < vi[ch]);
                        }
                    }
                }
            }
            let d = &dy[((n * g.out_h + oh) * g.out_w + ow) * c..][..c];
            let m = (k / 2) as u32;
            for ch in 0..c {
                if nan[ch] {
                    if let Some(e) = (0..k).find(|&e| buf[e * c + ch].is_nan()) {
                        dx[at[e] + ch] = W::add(dx[at[e] + ch], d[ch]);
                    }
                    continue;
                }
                let share = if k % 2 == 1 { d[ch] } else { W::halve(d[ch]) };
                for e in 0..k {
                    let r = rank[e * c + ch];
                    if r == m || (k % 2 == 0 && r + 1 == m) {
                        dx[at[e] + ch] = W::add(dx[at[e] + ch], share);
                    }
                }
            }
        }
    }
}

/// [`grad_image`] one channel at a time through
/// [`select::median_positions`] (a stable sort of each window): used for
/// windows of more than [`RANK_COUNT_MAX`] elements (rank counting is
/// quadratic in the window), and the reference the unit tests compare
/// [`grad_image`] with.
pub(crate) fn grad_image_sorted<W: Float>(x: &[W], dy: &[W], g: &Geometry, n: usize, dx: &mut [W]) {
    let mut window: Vec<W> = Vec::with_capacity(g.kh * g.kw);
    let mut index: Vec<usize> = Vec::with_capacity(g.kh * g.kw);
    let mut scratch = Vec::new();
    let image = g.h * g.w * g.c;
    let x = &x[n * image..(n + 1) * image];
    for oh in 0..g.out_h {
        let rows = g.rows(oh);
        for ow in 0..g.out_w {
            let cols = g.cols(ow);
            for ch in 0..g.c {
                window.clear();
                index.clear();
                for ih in rows.clone() {
                    for iw in cols.clone() {
                        let i = (ih * g.w + iw) * g.c + ch;
                        window.push(x[i]);
                        index.push(i);
                    }
                }
                let d = dy[((n * g.out_h + oh) * g.out_w + ow) * g.c + ch];
                match select::median_positions(&window, &mut scratch) {
                    Some((p, None)) => dx[index[p]] = W::add(dx[index[p]], d),
                    Some((p, Some(q))) => {
                        let half = W::halve(d);
                        dx[index[p]] = W::add(dx[index[p]], half);
                        dx[index[q]] = W::add(dx[index[q]], half);
                    }
                    None => {}
                }
            }
        }
    }
}

/// `MedianPoolGrad` into `dx` on the host's threads, one unit per batch
/// element (windows overlap only within one).
pub(crate) fn grad_into<W: Float>(
    pool: &ThreadPool<'_>,
    x: &[W],
    dy: &[W],
    g: &Geometry,
    dx: &mut [W],
) -> Result<()> {
    dx.fill(W::ZERO);
    let image = g.h * g.w * g.c;
    if dx.is_empty() || image == 0 {
        return Ok(());
    }
    let mut images: Vec<&mut [W]> = dx.chunks_mut(image).collect();
    let cost = (g.out_h * g.out_w * g.c * (g.kh * g.kw * 40 + 20)) as u64;
    pool.parallel_chunks_mut(&mut images, cost, |first, chunk| {
        for (i, d) in chunk.iter_mut().enumerate() {
            if g.kh * g.kw <= RANK_COUNT_MAX {
                grad_image(x, dy, g, first + i, d);
            } else {
                grad_image_sorted(x, dy, g, first + i, d);
            }
        }
    })
}
