//! The mover bodies of `Tile` and `Pad`.

use super::*;

/// Tiles `srcs[0]` (of shape `dims`) `multiples[i]` times along each
/// dimension `i`.
pub(super) struct Tile {
    pub(super) dims: Vec<usize>,
    pub(super) multiples: Vec<usize>,
}

impl MoveElements for Tile {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], out: &mut [T]) {
        tile(pool, srcs[0], &self.dims, &self.multiples, out)
    }
}

fn tile<T: Carrier>(
    pool: &ThreadPool,
    src: &[T],
    dims: &[usize],
    multiples: &[usize],
    out: &mut [T],
) {
    // (input size, multiple) per dimension; a dimension with multiple 1 is
    // contiguous with the one before it and merges into it.
    let mut plan: Vec<(usize, usize)> = Vec::new();
    for (&n, &m) in dims.iter().zip(multiples) {
        match plan.last_mut() {
            Some(last) if m == 1 => last.0 *= n,
            _ if n == 1 && m == 1 => {}
            _ => plan.push((n, m)),
        }
    }
    if plan.is_empty() {
        plan.push((1, 1));
    }
    let (inner_n, inner_m) = plan[plan.len() - 1];
    let outer = &plan[..plan.len() - 1];
    let out_dims: Vec<usize> = outer.iter().map(|&(n, m)| n * m).collect();
    let in_dims: Vec<usize> = plan.iter().map(|&(n, _)| n).collect();
    let in_strides = strides_of(&in_dims);
    for_each_rows(pool, out, inner_n * inner_m, |first, chunk| {
        let mut idx = unravel(first, &out_dims);
        for orow in chunk.chunks_mut(inner_n * inner_m) {
            let off: usize = idx
                .iter()
                .zip(outer)
                .zip(&in_strides)
                .map(|((&i, &(n, _)), &s)| (i % n) * s)
                .sum();
            let row = &src[off..off + inner_n];
            for rep in orow.chunks_mut(inner_n) {
                rep.clone_from_slice(row);
            }
            advance(&mut idx, &out_dims);
        }
    });
}

/// Pads `srcs[0]` (dimensions `(size, before, after)`) with the element of
/// `srcs[1]`, or zeros (empty strings) without it.
pub(super) struct Pad {
    pub(super) dims: Vec<(usize, usize, usize)>,
}

impl MoveElements for Pad {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], out: &mut [T]) {
        let value = srcs
            .get(1)
            .and_then(|c| c.first())
            .cloned()
            .unwrap_or_default();
        pad(pool, srcs[0], &self.dims, &value, out)
    }
}

fn pad<T: Carrier>(
    pool: &ThreadPool,
    src: &[T],
    dims: &[(usize, usize, usize)],
    value: &T,
    out: &mut [T],
) {
    // A dimension without padding is contiguous with the one before it and merges into it.
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    for &(n, b, a) in dims {
        match plan.last_mut() {
            Some(last) if b == 0 && a == 0 => *last = (last.0 * n, last.1 * n, last.2 * n),
            _ if n == 1 && b == 0 && a == 0 => {}
            _ => plan.push((n, b, a)),
        }
    }
    if plan.is_empty() {
        plan.push((1, 0, 0));
    }
    let (n_l, b_l, a_l) = plan[plan.len() - 1];
    let row_len = b_l + n_l + a_l;
    let outer = &plan[..plan.len() - 1];
    let out_dims: Vec<usize> = outer.iter().map(|&(n, b, a)| b + n + a).collect();
    let in_dims: Vec<usize> = plan.iter().map(|&(n, _, _)| n).collect();
    let in_strides = strides_of(&in_dims);
    for_each_rows(pool, out, row_len, |first, chunk| {
        let mut idx = unravel(first, &out_dims);
        for orow in chunk.chunks_mut(row_len) {
            let inside = idx
                .iter()
                .zip(outer)
                .all(|(&i, &(n, b, _))| i >= b && i < b + n);
            if inside {
                let off: usize = idx
                    .iter()
                    .zip(outer)
                    .zip(&in_strides)
                    .map(|((&i, &(_, b, _)), &s)| (i - b) * s)
                    .sum();
                orow[..b_l].fill(value.clone());
                orow[b_l..b_l + n_l].clone_from_slice(&src[off..off + n_l]);
                orow[b_l + n_l..].fill(value.clone());
            } else {
                orow.fill(value.clone());
            }
            advance(&mut idx, &out_dims);
        }
    });
}

pub(super) fn to_usize(dims: &[i64]) -> Vec<usize> {
    dims.iter().map(|&d| d as usize).collect()
}

// ---------------------------------------------------------------------------
