//! The operations of [`InferenceContext`] on shapes and dims: checks that
//! refine (`with_rank`, `merge`, ...), subshapes and concatenation, dim
//! arithmetic, and shapes from shape tensors.

use super::{DimOrConst, DimensionHandle, InferenceContext, ShapeHandle, MAX_RANK};
use crate::dtype::DataType;
use crate::{Result, Status, Tensor};

impl InferenceContext {
    // ---- checks that refine ----

    /// `s` with rank `rank`: `s` itself if its rank is known (and equal),
    /// else a new shape of `rank` unknown dims.
    pub fn with_rank(&mut self, s: ShapeHandle, rank: usize) -> Result<ShapeHandle> {
        match self.rank(s) {
            Some(r) if r == rank => Ok(s),
            Some(r) => Err(Status::invalid_argument(format!(
                "Shape must be rank {rank} but is rank {r}"
            ))),
            None => Ok(self.unknown_shape_of_rank(rank)),
        }
    }

    /// `s`, checked to have rank at least `rank`.
    pub fn with_rank_at_least(&mut self, s: ShapeHandle, rank: usize) -> Result<ShapeHandle> {
        match self.rank(s) {
            Some(r) if r < rank => Err(Status::invalid_argument(format!(
                "Shape must be at least rank {rank} but is rank {r}"
            ))),
            _ => Ok(s),
        }
    }

    /// `s`, checked to have rank at most `rank`.
    pub fn with_rank_at_most(&mut self, s: ShapeHandle, rank: usize) -> Result<ShapeHandle> {
        match self.rank(s) {
            Some(r) if r > rank => Err(Status::invalid_argument(format!(
                "Shape must be at most rank {rank} but is rank {r}"
            ))),
            _ => Ok(s),
        }
    }

    /// `d` with value `value`: `d` itself if known (and equal), else a new dim.
    pub fn with_value(&mut self, d: DimensionHandle, value: i64) -> Result<DimensionHandle> {
        match self.value(d) {
            Some(v) if v == value => Ok(d),
            Some(v) => Err(Status::invalid_argument(format!(
                "Dimension must be {value} but is {v}"
            ))),
            None => Ok(self.make_dim(value)),
        }
    }

    /// Two dims that must be equal, merged (TensorFlow's `Merge`): `a`
    /// unless only `b` is known.
    pub fn merge_dim(&mut self, a: DimensionHandle, b: DimensionHandle) -> Result<DimensionHandle> {
        if a == b {
            return Ok(a);
        }
        match (self.value(a), self.value(b)) {
            (_, None) => Ok(a),
            (None, _) => Ok(b),
            (Some(x), Some(y)) if x == y => Ok(a),
            (Some(x), Some(y)) => Err(Status::invalid_argument(format!(
                "Dimensions must be equal, but are {x} and {y}"
            ))),
        }
    }

    /// Two shapes that must be compatible, merged, keeping handle identity
    /// where one input already has all the information.
    pub fn merge(&mut self, a: ShapeHandle, b: ShapeHandle) -> Result<ShapeHandle> {
        if a == b {
            return Ok(a);
        }
        let (Some(da), Some(db)) = (self.shapes[a.0].clone(), self.shapes[b.0].clone()) else {
            return Ok(if self.rank_known(b) { b } else { a });
        };
        if da.len() != db.len() {
            return Err(Status::invalid_argument(format!(
                "Shapes must be equal rank, but are {} and {}",
                da.len(),
                db.len()
            )));
        }
        let (mut return_a, mut return_b) = (true, true);
        for (i, (&x, &y)) in da.iter().zip(&db).enumerate() {
            if x == y {
                continue;
            }
            match (self.value(x), self.value(y)) {
                (None, Some(_)) => return_a = false,
                (Some(_), None) => return_b = false,
                (Some(vx), Some(vy)) if vx != vy => {
                    return Err(Status::invalid_argument(format!(
                        "Dimension {i} in both shapes must be equal, but are {vx} and {vy}. Shapes are {} and {}.",
                        self.debug_string(a),
                        self.debug_string(b)
                    )))
                }
                _ => {}
            }
        }
        if return_a {
            return Ok(a);
        }
        if return_b {
            return Ok(b);
        }
        let mut dims = Vec::with_capacity(da.len());
        for (&x, &y) in da.iter().zip(&db) {
            dims.push(self.merge_dim(x, y)?);
        }
        Ok(self.new_shape(Some(dims)))
    }

    /// Merges `prefix` into the leading dims of `s`: returns the refined
    /// `(s, prefix)`.
    pub fn merge_prefix(
        &mut self,
        s: ShapeHandle,
        prefix: ShapeHandle,
    ) -> Result<(ShapeHandle, ShapeHandle)> {
        let (Some(_), Some(pdims)) = (self.rank(s), self.shapes[prefix.0].clone()) else {
            return Ok((s, prefix));
        };
        let s = self.with_rank_at_least(s, pdims.len())?;
        let sdims = self.shapes[s.0].clone().unwrap_or_default();
        let mut dims = Vec::with_capacity(sdims.len());
        for (i, &p) in pdims.iter().enumerate() {
            dims.push(self.merge_dim(sdims[i], p)?);
        }
        let prefix_out = self.new_shape(Some(dims.clone()));
        dims.extend_from_slice(&sdims[pdims.len()..]);
        let s_out = self.new_shape(Some(dims));
        Ok((s_out, prefix_out))
    }

    /// The dims `[start, end)` of `s` (negative indices count from the end;
    /// `end = None` means to the end). The whole shape is `s` itself.
    pub fn subshape(
        &mut self,
        s: ShapeHandle,
        start: i64,
        end: Option<i64>,
    ) -> Result<ShapeHandle> {
        self.subshape_strided(s, start, end.unwrap_or(i64::MAX), 1)
    }

    /// TensorFlow's strided `Subshape`.
    pub fn subshape_strided(
        &mut self,
        s: ShapeHandle,
        start: i64,
        end: i64,
        stride: i64,
    ) -> Result<ShapeHandle> {
        let (orig_start, orig_end) = (start, end);
        if start == 0
            && stride == 1
            && (end == i64::MAX || self.rank(s).is_some_and(|r| end >= r as i64))
        {
            return Ok(s);
        }
        let Some(dims) = self.shapes[s.0].clone() else {
            return Ok(self.unknown_shape());
        };
        let rank = dims.len() as i64;
        let (mut start, mut end) = (start.min(rank), end.min(rank));
        if stride < 0 && start == rank {
            start -= 1;
        }
        if start < 0 {
            start += rank;
            if start < 0 {
                return Err(Status::invalid_argument(format!(
                    "Subshape start out of bounds: {orig_start}, for shape with rank {rank}"
                )));
            }
        }
        if end < 0 {
            end += rank;
            if end < 0 {
                return Err(Status::invalid_argument(format!(
                    "Subshape end out of bounds: {orig_end}, for shape with rank {rank}"
                )));
            }
        }
        if stride > 0 && start > end {
            return Err(Status::invalid_argument(format!(
                "Subshape must have computed start <= end, but is {start} and {end} (computed from start \
                 {orig_start} and end {orig_end} over shape with rank {rank})"
            )));
        }
        if stride < 0 && start < end {
            return Err(Status::invalid_argument(format!(
                "Subshape must have computed start >= end since stride is negative, but is {start} and {end} \
                 (computed from start {orig_start} and end {orig_end} over shape with rank {rank} and stride {stride})"
            )));
        }
        if stride == 0 {
            return Err(Status::invalid_argument("Subshape stride must be non-zero"));
        }
        let mut out = Vec::new();
        let mut i = start;
        while if stride > 0 { i < end } else { i > end } {
            out.push(dims[i as usize]);
            i += stride;
        }
        Ok(self.new_shape(Some(out)))
    }

    /// `a` followed by `b` (unknown if either rank is).
    pub fn concatenate(&mut self, a: ShapeHandle, b: ShapeHandle) -> Result<ShapeHandle> {
        match (self.shapes[a.0].clone(), self.shapes[b.0].clone()) {
            (Some(mut x), Some(y)) => {
                x.extend(y);
                Ok(self.new_shape(Some(x)))
            }
            _ => Ok(self.unknown_shape()),
        }
    }

    /// `s` with dim `idx` replaced by `d`.
    pub fn replace_dim(
        &mut self,
        s: ShapeHandle,
        idx: i64,
        d: DimensionHandle,
    ) -> Result<ShapeHandle> {
        let Some(mut dims) = self.shapes[s.0].clone() else {
            return Ok(self.unknown_shape());
        };
        let rank = dims.len() as i64;
        let i = if idx < 0 { idx + rank } else { idx };
        if i < 0 || i >= rank {
            return Err(Status::invalid_argument(format!(
                "Out of range dim_index {idx} for shape with {rank} dimensions"
            )));
        }
        dims[i as usize] = d;
        Ok(self.new_shape(Some(dims)))
    }

    // ---- dim arithmetic ----

    /// `a + b`.
    pub fn add(&mut self, a: DimensionHandle, b: impl Into<DimOrConst>) -> Result<DimensionHandle> {
        let b = b.into();
        let (va, vb) = (self.raw_value(a), self.const_value(b));
        if vb == 0 {
            Ok(a)
        } else if va == 0 {
            Ok(self.make_dim(b))
        } else if va < 0 || vb < 0 {
            Ok(self.unknown_dim())
        } else {
            let sum = va.checked_add(vb).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Dimension size overflow from adding {va} and {vb}"
                ))
            })?;
            Ok(self.make_dim(sum))
        }
    }

    /// `a - b`.
    pub fn subtract(
        &mut self,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
    ) -> Result<DimensionHandle> {
        let b = b.into();
        let (va, vb) = (self.raw_value(a), self.const_value(b));
        if vb == 0 {
            Ok(a)
        } else if va < 0 || vb < 0 {
            Ok(self.unknown_dim())
        } else if va < vb {
            Err(Status::invalid_argument(format!(
                "Negative dimension size caused by subtracting {vb} from {va}"
            )))
        } else {
            Ok(self.make_dim(va - vb))
        }
    }

    /// `a * b`.
    pub fn multiply(
        &mut self,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
    ) -> Result<DimensionHandle> {
        let b = b.into();
        let (va, vb) = (self.raw_value(a), self.const_value(b));
        if va == 1 {
            Ok(self.make_dim(b))
        } else if vb == 1 || va == 0 {
            Ok(a)
        } else if vb == 0 {
            Ok(self.make_dim(b))
        } else if va < 0 || vb < 0 {
            Ok(self.unknown_dim())
        } else {
            let p = va.checked_mul(vb).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Negative dimension size caused by overflow when multiplying {va} and {vb}"
                ))
            })?;
            Ok(self.make_dim(p))
        }
    }

    /// `a / b`; with `evenly_divisible`, an error unless `b` divides `a`.
    pub fn divide(
        &mut self,
        a: DimensionHandle,
        b: impl Into<DimOrConst>,
        evenly_divisible: bool,
    ) -> Result<DimensionHandle> {
        let b = b.into();
        let (va, vb) = (self.raw_value(a), self.const_value(b));
        if vb == 1 {
            return Ok(a);
        }
        if va < 0 || vb < 0 && matches!(b, DimOrConst::Dim(_)) {
            return Ok(self.unknown_dim());
        }
        if vb <= 0 {
            return Err(Status::invalid_argument(format!(
                "Divisor must be positive but is {vb}"
            )));
        }
        if evenly_divisible && va % vb != 0 {
            return Err(Status::invalid_argument(format!(
                "Dimension size must be evenly divisible by {vb} but is {va}"
            )));
        }
        Ok(self.make_dim(va / vb))
    }

    /// `min(a, b)` (a zero wins even against an unknown).
    pub fn min(&mut self, a: DimensionHandle, b: impl Into<DimOrConst>) -> Result<DimensionHandle> {
        let b = b.into();
        let (va, vb) = (self.raw_value(a), self.const_value(b));
        if va == 0 {
            Ok(a)
        } else if vb == 0 {
            Ok(self.make_dim(b))
        } else if va < 0 || vb < 0 {
            Ok(self.unknown_dim())
        } else if va <= vb {
            Ok(a)
        } else {
            Ok(self.make_dim(b))
        }
    }

    /// `max(a, b)`.
    pub fn max(&mut self, a: DimensionHandle, b: impl Into<DimOrConst>) -> Result<DimensionHandle> {
        let b = b.into();
        let (va, vb) = (self.raw_value(a), self.const_value(b));
        if va < 0 || vb < 0 {
            Ok(self.unknown_dim())
        } else if va >= vb {
            Ok(a)
        } else {
            Ok(self.make_dim(b))
        }
    }

    // ---- shapes from tensors ----

    /// The shape held by the value of input `i`, a 1-D int32/int64 tensor
    /// (`-1` entries are unknown dims). When the value is not known, a shape
    /// of unknown dims whose rank is input `i`'s length, if that is known.
    pub fn make_shape_from_shape_tensor(&mut self, i: usize) -> Result<ShapeHandle> {
        let input = self.input(i);
        let input = self.with_rank(input, 1)?;
        if let Some(&Some(s)) = self.input_tensors_as_shapes.get(i) {
            if self.rank_known(s) {
                return Ok(s);
            }
        }
        let t = self.input_tensors.get(i).cloned().flatten();
        self.shape_from_tensor(t.as_ref(), input, false)
    }

    /// Like [`make_shape_from_shape_tensor`](Self::make_shape_from_shape_tensor),
    /// but a scalar `-1` (or an unknown scalar) means an unknown shape.
    pub fn make_shape_from_shape_tensor_treat_scalar_as_unknown_shape(
        &mut self,
        i: usize,
    ) -> Result<ShapeHandle> {
        let input = self.input(i);
        let input = self.with_rank_at_most(input, 1)?;
        if let Some(&Some(s)) = self.input_tensors_as_shapes.get(i) {
            if self.rank_known(s) {
                return Ok(s);
            }
        }
        let t = self.input_tensors.get(i).cloned().flatten();
        self.shape_from_tensor(t.as_ref(), input, true)
    }

    /// A shape from a shape tensor's value (`t`) or, if absent, from the
    /// shape of the shape tensor (`tensor_shape`).
    pub fn shape_from_tensor(
        &mut self,
        t: Option<&Tensor>,
        tensor_shape: ShapeHandle,
        scalar_as_unknown: bool,
    ) -> Result<ShapeHandle> {
        let tensor_shape = if scalar_as_unknown {
            tensor_shape
        } else {
            self.with_rank(tensor_shape, 1)?
        };
        let Some(t) = t else {
            if self.rank(tensor_shape) == Some(0) {
                return Ok(self.unknown_shape());
            }
            let Some(n) = self
                .dims(tensor_shape)
                .and_then(|d| d.first().copied())
                .and_then(|d| self.value(d))
            else {
                return Ok(self.unknown_shape());
            };
            return Ok(self.unknown_shape_of_rank(n as usize));
        };
        if t.rank() == 1 && t.num_elements() > MAX_RANK {
            return Err(Status::invalid_argument(format!(
                "The shape tensor has {} elements; a shape has at most {MAX_RANK} dimensions",
                t.num_elements()
            )));
        }
        let values: Vec<i64> = match t.dtype() {
            DataType::Int32 => t.flat::<i32>()?.iter().map(|&v| v as i64).collect(),
            DataType::Int64 => t.flat::<i64>()?.to_vec(),
            other => {
                return Err(Status::invalid_argument(format!(
                    "Input tensor must be int32 or int64, but was {other}"
                )))
            }
        };
        if t.rank() == 0 {
            if values[0] != -1 {
                return Err(Status::invalid_argument(format!(
                    "Input tensor must be rank 1, or if its rank 0 it must have value -1 (representing an unknown \
                     shape).  Saw value: {}",
                    values[0]
                )));
            }
            return Ok(self.unknown_shape());
        }
        if t.rank() != 1 {
            return Err(Status::invalid_argument(format!(
                "Input tensor must be rank 1, but was rank {}.",
                t.rank()
            )));
        }
        let mut dims = Vec::with_capacity(values.len());
        for v in values {
            if v < -1 {
                return Err(Status::invalid_argument(format!(
                    "Invalid value in tensor used for shape: {v}"
                )));
            }
            dims.push(self.make_dim(v));
        }
        Ok(self.new_shape(Some(dims)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::AttrMap;
    use crate::proto::OpDef;

    fn ctx(shapes: &[Option<Vec<i64>>]) -> InferenceContext {
        InferenceContext::new(&OpDef::default(), "n", &AttrMap::new(), shapes, 1)
    }

    /// The rank-cap error a context reports after a shape function made a
    /// shape of rank `rank`.
    fn rank_error(c: &InferenceContext, rank: usize) {
        let e = c.check_accesses().unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument, "{e}");
        assert!(
            e.message()
                .contains(&format!("a shape of rank {rank}; a shape has at most 254")),
            "{e}"
        );
    }

    #[test]
    fn every_shape_made_is_capped_at_254_dimensions() {
        assert_eq!(MAX_RANK, 254);
        // At the cap: fine.
        let mut c = ctx(&[]);
        let s = c.make_partial_shape(Some(&[1; MAX_RANK]));
        assert_eq!(c.rank(s), Some(MAX_RANK));
        c.check_accesses().unwrap();
        // Above it, each way a shape is made: an unknown shape, and the
        // run fails.
        let mut c = ctx(&[]);
        let s = c.make_partial_shape(Some(&[1; MAX_RANK + 1]));
        assert_eq!(c.rank(s), None);
        rank_error(&c, MAX_RANK + 1);
        let mut c = ctx(&[]);
        let d = c.make_dim(3);
        let s = c.make_shape_from_dims(vec![d; 100_000]);
        assert_eq!(c.rank(s), None);
        rank_error(&c, 100_000);
        let mut c = ctx(&[]);
        let s = c.make_shape(&[DimOrConst::Const(2); 300]);
        assert_eq!(c.rank(s), None);
        rank_error(&c, 300);
        let mut c = ctx(&[]);
        let s = c.unknown_shape_of_rank(100_000);
        assert_eq!(c.rank(s), None);
        rank_error(&c, 100_000);
        // Two shapes below the cap whose concatenation is above it.
        let mut c = ctx(&[Some(vec![1; 200]), Some(vec![1; 200])]);
        let (a, b) = (c.input(0), c.input(1));
        let s = c.concatenate(a, b).unwrap();
        assert_eq!(c.rank(s), None);
        rank_error(&c, 400);
        // An input shape above the cap.
        let c = ctx(&[Some(vec![1; MAX_RANK + 1])]);
        assert_eq!(c.rank(c.input(0)), None);
        rank_error(&c, MAX_RANK + 1);
    }

    #[test]
    fn handle_indices_and_checked_lookups() {
        let c = ctx(&[Some(vec![1, 2])]);
        let s = c.input(0);
        assert_eq!(ShapeHandle::from_index(s.index()), s);
        assert_eq!(c.checked_shape(s).unwrap(), s);
        let forged = ShapeHandle::from_index(1 << 40);
        let e = c.checked_shape(forged).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
        assert!(e
            .message()
            .contains("not a shape of this inference context"));
        let d = c.dims(s).unwrap()[1];
        assert_eq!(DimensionHandle::from_index(d.index()), d);
        assert_eq!(c.checked_dim(d).unwrap(), d);
        let e = c.checked_dim(DimensionHandle::from_index(999)).unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
    }

    #[test]
    fn rank_checks_and_messages() {
        let mut c = ctx(&[Some(vec![1, 2]), None]);
        let (a, u) = (c.input(0), c.input(1));
        assert_eq!(c.with_rank(a, 2).unwrap(), a);
        assert_eq!(
            c.with_rank(a, 1).unwrap_err().message(),
            "Shape must be rank 1 but is rank 2"
        );
        assert_eq!(
            c.with_rank_at_least(a, 3).unwrap_err().message(),
            "Shape must be at least rank 3 but is rank 2"
        );
        assert_eq!(
            c.with_rank_at_most(a, 1).unwrap_err().message(),
            "Shape must be at most rank 1 but is rank 2"
        );
        let r = c.with_rank(u, 3).unwrap();
        assert_eq!(c.debug_string(r), "[?,?,?]");
        assert_eq!(c.with_rank_at_least(u, 2).unwrap(), u);
        let d = c.dim(a, -1);
        assert_eq!(c.value(d), Some(2));
        assert_eq!(
            c.with_value(d, 3).unwrap_err().message(),
            "Dimension must be 3 but is 2"
        );
    }

    #[test]
    fn merge_keeps_identity() {
        let mut c = ctx(&[Some(vec![1, -1]), Some(vec![-1, 2]), Some(vec![1, 2]), None]);
        let (a, b, full, u) = (c.input(0), c.input(1), c.input(2), c.input(3));
        assert_eq!(c.merge(a, u).unwrap(), a);
        assert_eq!(c.merge(u, a).unwrap(), a);
        assert_eq!(c.merge(a, full).unwrap(), full);
        let m = c.merge(a, b).unwrap();
        assert_ne!(m, a);
        assert_ne!(m, b);
        assert_eq!(c.debug_string(m), "[1,2]");
        let d0 = c.dim(a, 0);
        assert_eq!(c.dims(m).unwrap()[0], d0);
        let mut c2 = ctx(&[Some(vec![1, 3]), Some(vec![1, 4]), Some(vec![1])]);
        let (x, y, z) = (c2.input(0), c2.input(1), c2.input(2));
        assert_eq!(
            c2.merge(x, y).unwrap_err().message(),
            "Dimension 1 in both shapes must be equal, but are 3 and 4. Shapes are [1,3] and [1,4]."
        );
        assert_eq!(
            c2.merge(x, z).unwrap_err().message(),
            "Shapes must be equal rank, but are 2 and 1"
        );
        let (dx, dy) = (c2.dim(x, 1), c2.dim(y, 1));
        assert_eq!(
            c2.merge_dim(dx, dy).unwrap_err().message(),
            "Dimensions must be equal, but are 3 and 4"
        );
    }

    #[test]
    fn subshape_concat_replace() {
        let mut c = ctx(&[Some(vec![1, 2, 3])]);
        let s = c.input(0);
        assert_eq!(c.subshape(s, 0, None).unwrap(), s);
        let t = c.subshape(s, 1, None).unwrap();
        assert_eq!(c.debug_string(t), "[2,3]");
        let t = c.subshape(s, -1, None).unwrap();
        assert_eq!(c.debug_string(t), "[3]");
        let t = c.subshape(s, 0, Some(-1)).unwrap();
        assert_eq!(c.debug_string(t), "[1,2]");
        assert!(c
            .subshape(s, -4, None)
            .unwrap_err()
            .message()
            .starts_with("Subshape start out of bounds: -4"));
        let cat = c.concatenate(s, t).unwrap();
        assert_eq!(c.debug_string(cat), "[1,2,3,1,2]");
        let d = c.make_dim(7);
        let r = c.replace_dim(s, -1, d).unwrap();
        assert_eq!(c.debug_string(r), "[1,2,7]");
        assert!(c.replace_dim(s, 3, d).is_err());
    }

    #[test]
    fn dim_arithmetic() {
        let mut c = ctx(&[Some(vec![6, -1])]);
        let s = c.input(0);
        let (six, unk) = (c.dim(s, 0), c.dim(s, 1));
        assert_eq!(c.add(six, 0).unwrap(), six);
        let d = c.add(six, 2).unwrap();
        assert_eq!(c.value(d), Some(8));
        let d = c.add(unk, 2).unwrap();
        assert_eq!(c.value(d), None);
        assert_eq!(
            c.subtract(six, 7).unwrap_err().message(),
            "Negative dimension size caused by subtracting 7 from 6"
        );
        assert_eq!(c.multiply(six, 1).unwrap(), six);
        let d = c.multiply(six, unk).unwrap();
        assert_eq!(c.value(d), None);
        let d = c.divide(six, 3, true).unwrap();
        assert_eq!(c.value(d), Some(2));
        assert_eq!(
            c.divide(six, 4, true).unwrap_err().message(),
            "Dimension size must be evenly divisible by 4 but is 6"
        );
        assert_eq!(
            c.divide(six, 0, false).unwrap_err().message(),
            "Divisor must be positive but is 0"
        );
        assert_eq!(c.min(six, 10).unwrap(), six);
        assert_eq!(c.max(six, 3).unwrap(), six);
        let z = c.make_dim(0);
        assert_eq!(c.min(unk, z).unwrap(), z);
    }

    #[test]
    fn shapes_from_shape_tensors() {
        let mut c = ctx(&[Some(vec![3])]);
        let s = c.make_shape_from_shape_tensor(0).unwrap();
        assert_eq!(c.debug_string(s), "[?,?,?]");
        c.set_input_tensor(0, Tensor::from_vec(&[3], vec![2i32, -1, 4]).unwrap());
        let s = c.make_shape_from_shape_tensor(0).unwrap();
        assert_eq!(c.debug_string(s), "[2,?,4]");
        c.set_input_tensor(0, Tensor::from_vec(&[1], vec![-2i64]).unwrap());
        assert_eq!(
            c.make_shape_from_shape_tensor(0).unwrap_err().message(),
            "Invalid value in tensor used for shape: -2"
        );
    }
}
