//! [`TensorShape`]: the dimensions of a tensor whose shape is fully known.

use crate::proto::{tensor_shape_proto::Dim, TensorShapeProto};
use crate::{Result, Status};
use smallvec::SmallVec;
use std::fmt;

/// The `TensorShapeProto` of a known rank with these dims (`-1`: an
/// unknown dim; not checked).
pub fn dims_proto(dims: &[i64]) -> TensorShapeProto {
    TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    }
}

/// The fully known shape of a tensor: its dimension sizes, outermost first.
/// Up to four dimensions are stored inline, without a heap allocation.
///
/// ```
/// use opforge_core::TensorShape;
/// let s = TensorShape::new(&[2, 3]).unwrap();
/// assert_eq!((s.rank(), s.num_elements(), s.to_string()), (2, 6, "[2,3]".to_string()));
/// assert!(TensorShape::new(&[2, -1]).is_err());
/// ```
#[derive(Eq, Default)]
pub struct TensorShape {
    dims: SmallVec<[i64; 4]>,
}

impl PartialEq for TensorShape {
    #[inline]
    fn eq(&self, other: &TensorShape) -> bool {
        // Element by element: shapes are short, and a slice comparison
        // calls `memcmp`, which costs more than the loop (kernels compare
        // shapes on every call).
        self.dims.len() == other.dims.len()
            && self.dims.iter().zip(&other.dims).all(|(a, b)| a == b)
    }
}

impl std::hash::Hash for TensorShape {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Consistent with `eq`: the dims.
        self.dims.as_slice().hash(state);
    }
}

impl Clone for TensorShape {
    #[inline]
    fn clone(&self) -> TensorShape {
        // A copy of the dims (SmallVec's own `clone` goes element by element).
        TensorShape {
            dims: SmallVec::from_slice(&self.dims),
        }
    }
}

impl TensorShape {
    /// The most dimensions a shape may have: TensorFlow's
    /// `TensorShape::MaxDimensions()`, 254. Every shape is made by
    /// [`new`](Self::new), which refuses more.
    pub const MAX_DIMENSIONS: usize = 254;

    /// A shape with these dimensions: at most
    /// [`MAX_DIMENSIONS`](Self::MAX_DIMENSIONS) of them, each >= 0, and the
    /// number of elements must fit in an `i64`.
    pub fn new(dims: &[i64]) -> Result<TensorShape> {
        Self::check_rank(dims.len() as u64)?;
        let mut n: i64 = 1;
        for (i, &d) in dims.iter().enumerate() {
            if d < 0 {
                return Err(Status::invalid_argument(format!(
                    "Dimension {i} of shape {} is negative: {d}",
                    fmt_dims(dims)
                )));
            }
            n = n.checked_mul(d).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Shape {} has too many elements to address",
                    fmt_dims(dims)
                ))
            })?;
        }
        Ok(TensorShape {
            dims: SmallVec::from_slice(dims),
        })
    }

    /// TensorFlow's error ("Too many dimensions in tensor", InvalidArgument)
    /// if a shape of rank `rank` cannot be made: for code that checks a
    /// rank before it reads that many dims (from a plugin, a file).
    pub fn check_rank(rank: u64) -> Result<()> {
        if rank > Self::MAX_DIMENSIONS as u64 {
            return Err(Status::invalid_argument(format!(
                "Too many dimensions in tensor: a shape of rank {rank} was asked for; a tensor \
                 has at most {} dimensions (TensorFlow's TensorShape::MaxDimensions())",
                Self::MAX_DIMENSIONS
            )));
        }
        Ok(())
    }

    /// A shape from `usize` dimensions (which are valid by construction,
    /// barring overflow, which is an error).
    pub fn from_usize(dims: &[usize]) -> Result<TensorShape> {
        let dims: Vec<i64> = dims
            .iter()
            .map(|&d| i64::try_from(d).map_err(|_| Status::invalid_argument("dimension too large")))
            .collect::<Result<_>>()?;
        TensorShape::new(&dims)
    }

    /// The shape of a scalar: rank 0, one element.
    pub fn scalar() -> TensorShape {
        TensorShape::default()
    }

    /// A vector of `n` elements.
    pub fn vector(n: usize) -> TensorShape {
        TensorShape {
            dims: SmallVec::from_slice(&[n as i64]),
        }
    }

    /// The dimension sizes.
    #[inline]
    pub fn dims(&self) -> &[i64] {
        &self.dims
    }

    /// The number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The size of dimension `i` (panics if `i >= rank`; use `dims().get(i)` to check).
    pub fn dim(&self, i: usize) -> i64 {
        self.dims[i]
    }

    /// The size of dimension `i` as `usize`.
    pub fn dim_usize(&self, i: usize) -> usize {
        self.dims[i] as usize
    }

    /// The number of elements (1 for a scalar).
    #[inline]
    pub fn num_elements(&self) -> usize {
        self.dims.iter().product::<i64>() as usize
    }

    /// Appends a dimension.
    pub fn push(&mut self, d: i64) -> Result<()> {
        let mut dims = self.dims.clone();
        dims.push(d);
        *self = TensorShape::new(&dims)?;
        Ok(())
    }

    /// The `TensorShapeProto` of this shape.
    pub fn to_proto(&self) -> TensorShapeProto {
        dims_proto(&self.dims)
    }

    /// The shape of a `TensorShapeProto`, which must be fully known.
    pub fn from_proto(proto: &TensorShapeProto) -> Result<TensorShape> {
        if proto.unknown_rank {
            return Err(Status::invalid_argument(
                "A tensor's shape must have a known rank",
            ));
        }
        let dims: Vec<i64> = proto.dim.iter().map(|d| d.size).collect();
        if dims.iter().any(|&d| d < 0) {
            return Err(Status::invalid_argument(format!(
                "A tensor's shape must be fully known, not {}",
                fmt_dims(&dims).replace("-1", "?")
            )));
        }
        TensorShape::new(&dims)
    }
}

fn fmt_dims(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

impl fmt::Display for TensorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_dims(&self.dims))
    }
}

impl fmt::Debug for TensorShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl TryFrom<&[i64]> for TensorShape {
    type Error = Status;
    fn try_from(dims: &[i64]) -> Result<TensorShape> {
        TensorShape::new(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!(TensorShape::scalar().num_elements(), 1);
        assert_eq!(TensorShape::new(&[0, 5]).unwrap().num_elements(), 0);
        assert!(TensorShape::new(&[i64::MAX, 2]).is_err());
        let s = TensorShape::new(&[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(TensorShape::from_proto(&s.to_proto()).unwrap(), s);
        let unknown = TensorShapeProto {
            unknown_rank: true,
            ..Default::default()
        };
        assert!(TensorShape::from_proto(&unknown).is_err());
        let mut s = TensorShape::vector(2);
        s.push(3).unwrap();
        assert_eq!(s.to_string(), "[2,3]");
    }

    #[test]
    fn ranks_are_capped_as_tensorflow_caps_them() {
        let max = TensorShape::MAX_DIMENSIONS;
        assert_eq!(max, 254, "TensorFlow's TensorShape::MaxDimensions()");
        assert_eq!(TensorShape::new(&vec![1; max]).unwrap().rank(), max);
        TensorShape::check_rank(max as u64).unwrap();
        assert!(TensorShape::check_rank(u64::MAX).is_err());
        for rank in [max + 1, 100_000] {
            let e = TensorShape::new(&vec![1; rank]).unwrap_err();
            assert_eq!(e.code(), crate::Code::InvalidArgument);
            assert!(
                e.message().starts_with("Too many dimensions in tensor"),
                "{e}"
            );
            assert!(e.message().contains(&format!("rank {rank}")), "{e}");
        }
        // Every other way of making a shape goes through `new`.
        let mut s = TensorShape::new(&vec![1; max]).unwrap();
        assert!(s.push(1).is_err());
        assert!(TensorShape::from_usize(&vec![1; max + 1]).is_err());
        let proto = TensorShape::new(&[1]).unwrap().to_proto();
        let mut big = proto.clone();
        big.dim = vec![proto.dim[0].clone(); max + 1];
        assert!(TensorShape::from_proto(&big).is_err());
        assert!(crate::Tensor::zeros(crate::DataType::Float, &vec![1; max + 1]).is_err());
    }
}
