//! Conversion between [`Tensor`] and `TensorProto`: packed `tensor_content`
//! or the typed `*_val` fields, with TensorFlow's rule that a shorter
//! `*_val` list is filled out with its last value (and an empty one with zeros).

#[cfg(target_endian = "big")]
compile_error!(
    "opforge's tensor encoding assumes a little-endian host, as TensorFlow's tensor_content does"
);

use super::{Storage, Tensor, TensorShape};
use crate::dtype::DataType;
use crate::proto::TensorProto;
use crate::resource_handle::ResourceHandle;
use crate::{Result, Status};

/// Expands a `*_val` list to `n` values: empty means all default, shorter is
/// padded with the last value, longer is an error.
fn expand<T: Clone + Default>(
    vals: &[T],
    n: usize,
    dtype: DataType,
    per_element: usize,
) -> Result<Vec<T>> {
    let want = n.checked_mul(per_element).ok_or_else(|| {
        Status::invalid_argument(format!(
            "TensorProto of dtype {dtype} has too many elements"
        ))
    })?;
    if vals.len() > want {
        return Err(Status::invalid_argument(format!(
            "TensorProto of dtype {dtype} has {} values, more than its {n} elements",
            vals.len() / per_element.max(1)
        )));
    }
    if vals.len() % per_element != 0 {
        return Err(Status::invalid_argument(format!(
            "TensorProto of dtype {dtype} has an odd number of real/imaginary parts"
        )));
    }
    // The shape, not the values, sizes the result: check it against the
    // allocation limit and reserve without aborting.
    super::limit::check(want.saturating_mul(std::mem::size_of::<T>()), || {
        format!("the {n} elements of a {dtype} TensorProto")
    })?;
    let mut out = Vec::new();
    out.try_reserve_exact(want).map_err(|_| {
        Status::resource_exhausted(format!(
            "OOM when allocating the {n} elements of a {dtype} TensorProto"
        ))
    })?;
    out.extend_from_slice(vals);
    if vals.is_empty() {
        out.resize(want, T::default());
    } else {
        let last = vals[vals.len() - per_element..].to_vec();
        while out.len() < want {
            out.extend_from_slice(&last);
        }
    }
    Ok(out)
}

fn bytes_of<T: Copy, U>(vals: Vec<T>, convert: impl Fn(T) -> U) -> Vec<u8> {
    let converted: Vec<U> = vals.into_iter().map(convert).collect();
    let len = std::mem::size_of_val(converted.as_slice());
    // SAFETY: U is a primitive numeric type (all callers), so its memory is
    // `len` initialized bytes without padding.
    unsafe { std::slice::from_raw_parts(converted.as_ptr().cast::<u8>(), len) }.to_vec()
}

impl Tensor {
    /// Reads a tensor from a `TensorProto`.
    ///
    /// ```
    /// use opforge_core::{proto, Tensor};
    /// let p: proto::TensorProto = proto::from_text(
    ///     "dtype: DT_INT32 tensor_shape { dim { size: 4 } } int_val: 1 int_val: 2").unwrap();
    /// let t = Tensor::from_proto(&p).unwrap();
    /// assert_eq!(t.flat::<i32>().unwrap(), &[1, 2, 2, 2]);
    /// ```
    pub fn from_proto(p: &TensorProto) -> Result<Tensor> {
        let dtype = DataType::from_i32(p.dtype).ok_or_else(|| {
            Status::invalid_argument(format!("TensorProto has an invalid dtype enum {}", p.dtype))
        })?;
        let shape = match &p.tensor_shape {
            Some(s) => TensorShape::from_proto(s)?,
            None => TensorShape::scalar(),
        };
        let n = shape.num_elements();
        match dtype {
            DataType::String => {
                if !p.tensor_content.is_empty() {
                    return Err(Status::invalid_argument(
                        "A string TensorProto must use string_val, not tensor_content",
                    ));
                }
                let vals = expand(&p.string_val, n, dtype, 1)?;
                return Tensor::from_strings(shape.dims(), vals);
            }
            DataType::Resource => {
                // A default handle names no resource: TensorFlow refuses a
                // resource tensor that has elements but no handles.
                if n > 0 && p.resource_handle_val.is_empty() {
                    return Err(Status::invalid_argument(format!(
                        "A DT_RESOURCE TensorProto of shape {shape} has no resource handles; \
                         give one resource_handle_val per element"
                    )));
                }
                let handles: Vec<ResourceHandle> = p
                    .resource_handle_val
                    .iter()
                    .map(ResourceHandle::from_proto)
                    .collect();
                return Tensor::from_resource_handles(shape.dims(), expand(&handles, n, dtype, 1)?);
            }
            _ => {}
        }
        let mut t = Tensor::zeros_with_shape(dtype, shape)?;
        let want = n * dtype.size();
        let bytes: Vec<u8> = if !p.tensor_content.is_empty() {
            if p.tensor_content.len() != want {
                return Err(Status::invalid_argument(format!(
                    "TensorProto's tensor_content has {} bytes; a {dtype} tensor of shape {} needs {want}",
                    p.tensor_content.len(),
                    t.shape()
                )));
            }
            p.tensor_content.clone()
        } else {
            use DataType::*;
            match dtype {
                Float => bytes_of(expand(&p.float_val, n, dtype, 1)?, |v| v),
                Double => bytes_of(expand(&p.double_val, n, dtype, 1)?, |v| v),
                Int32 | QInt32 => bytes_of(expand(&p.int_val, n, dtype, 1)?, |v| v),
                Int16 | QInt16 => bytes_of(expand(&p.int_val, n, dtype, 1)?, |v| v as i16),
                UInt16 | QUInt16 => bytes_of(expand(&p.int_val, n, dtype, 1)?, |v| v as u16),
                Int8 | QInt8 | Int4 | Int2 => {
                    bytes_of(expand(&p.int_val, n, dtype, 1)?, |v| v as i8)
                }
                UInt8 | QUInt8 | UInt4 | UInt2 => {
                    bytes_of(expand(&p.int_val, n, dtype, 1)?, |v| v as u8)
                }
                Int64 => bytes_of(expand(&p.int64_val, n, dtype, 1)?, |v| v),
                UInt32 => bytes_of(expand(&p.uint32_val, n, dtype, 1)?, |v| v),
                UInt64 => bytes_of(expand(&p.uint64_val, n, dtype, 1)?, |v| v),
                Bool => bytes_of(expand(&p.bool_val, n, dtype, 1)?, u8::from),
                Half | BFloat16 => bytes_of(expand(&p.half_val, n, dtype, 1)?, |v| v as u16),
                Complex64 => bytes_of(expand(&p.scomplex_val, n, dtype, 2)?, |v| v),
                Complex128 => bytes_of(expand(&p.dcomplex_val, n, dtype, 2)?, |v| v),
                Float8E5M2 | Float8E4M3FN | Float8E4M3FNUZ | Float8E4M3B11FNUZ | Float8E5M2FNUZ
                | Float4E2M1FN => expand(&p.float8_val, n, dtype, 1)?,
                other => {
                    return Err(Status::unimplemented(format!(
                        "TensorProto of dtype {other}"
                    )))
                }
            }
        };
        if dtype == DataType::Bool && bytes.iter().any(|&b| b > 1) {
            return Err(Status::invalid_argument(
                "A bool TensorProto holds bytes other than 0 and 1",
            ));
        }
        if let Storage::Dense { buf, offset } = &mut *t.storage {
            let buf = std::sync::Arc::get_mut(buf)
                .ok_or_else(|| Status::internal("fresh tensor is shared"))?;
            buf.as_mut_slice()[*offset..*offset + want].copy_from_slice(&bytes);
        }
        Ok(t)
    }

    /// The tensor as a `TensorProto`, dense data packed in `tensor_content`
    /// (TensorFlow's `AsProtoTensorContent`).
    pub fn to_proto(&self) -> Result<TensorProto> {
        let mut p = self.proto_header();
        self.fill_proto_non_numeric(&mut p)?;
        Ok(p)
    }

    /// Strings and resource handles in their `*_val` fields, anything else
    /// packed in `tensor_content`.
    fn fill_proto_non_numeric(&self, p: &mut TensorProto) -> Result<()> {
        match self.dtype {
            DataType::String => p.string_val = self.strings()?.to_vec(),
            DataType::Resource => {
                p.resource_handle_val = self
                    .resource_handles()?
                    .iter()
                    .map(ResourceHandle::to_proto)
                    .collect()
            }
            _ => p.tensor_content = self.bytes()?.to_vec(),
        }
        Ok(())
    }

    /// The tensor as a `TensorProto` using the typed `*_val` fields
    /// (TensorFlow's `AsProtoField`), readable in text format.
    pub fn to_proto_field(&self) -> Result<TensorProto> {
        use DataType::*;
        let mut p = self.proto_header();
        match self.dtype {
            Float => p.float_val = self.flat::<f32>()?.to_vec(),
            Double => p.double_val = self.flat::<f64>()?.to_vec(),
            Int32 => p.int_val = self.flat::<i32>()?.to_vec(),
            Int16 => p.int_val = self.flat::<i16>()?.iter().map(|&v| v as i32).collect(),
            Int8 => p.int_val = self.flat::<i8>()?.iter().map(|&v| v as i32).collect(),
            UInt8 => p.int_val = self.flat::<u8>()?.iter().map(|&v| v as i32).collect(),
            UInt16 => p.int_val = self.flat::<u16>()?.iter().map(|&v| v as i32).collect(),
            Int64 => p.int64_val = self.flat::<i64>()?.to_vec(),
            UInt32 => p.uint32_val = self.flat::<u32>()?.to_vec(),
            UInt64 => p.uint64_val = self.flat::<u64>()?.to_vec(),
            Bool => p.bool_val = self.flat::<bool>()?.to_vec(),
            Half => {
                p.half_val = self
                    .flat::<half::f16>()?
                    .iter()
                    .map(|v| v.to_bits() as i32)
                    .collect()
            }
            BFloat16 => {
                p.half_val = self
                    .flat::<half::bf16>()?
                    .iter()
                    .map(|v| v.to_bits() as i32)
                    .collect()
            }
            Complex64 => {
                p.scomplex_val = self
                    .flat::<num_complex::Complex<f32>>()?
                    .iter()
                    .flat_map(|c| [c.re, c.im])
                    .collect()
            }
            Complex128 => {
                p.dcomplex_val = self
                    .flat::<num_complex::Complex<f64>>()?
                    .iter()
                    .flat_map(|c| [c.re, c.im])
                    .collect()
            }
            _ => self.fill_proto_non_numeric(&mut p)?,
        }
        Ok(p)
    }

    fn proto_header(&self) -> TensorProto {
        TensorProto {
            dtype: self.dtype as i32,
            tensor_shape: Some(self.shape.to_proto()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;

    fn parse(text: &str) -> Result<Tensor> {
        Tensor::from_proto(&proto::from_text::<TensorProto>(text).unwrap())
    }

    #[test]
    fn hostile_protos_are_errors() {
        // A resource tensor with elements but no handles.
        let e = parse("dtype: DT_RESOURCE tensor_shape { dim { size: 3 } }").unwrap_err();
        assert_eq!(e.code(), crate::Code::InvalidArgument);
        assert!(e.message().contains("has no resource handles"), "{e}");
        assert!(parse("dtype: DT_RESOURCE tensor_shape { dim { size: 0 } }").is_ok());
        // A string tensor whose shape asks for more than memory: one value
        // repeated 2^40 times.
        let e =
            parse("dtype: DT_STRING tensor_shape { dim { size: 1099511627776 } } string_val: 'a'")
                .unwrap_err();
        assert_eq!(e.code(), crate::Code::ResourceExhausted, "{e}");
    }

    #[test]
    fn val_fields_fill_with_the_last_value_or_zero() {
        let t = parse("dtype: DT_FLOAT tensor_shape { dim { size: 3 } } float_val: 1.5").unwrap();
        assert_eq!(t.flat::<f32>().unwrap(), &[1.5, 1.5, 1.5]);
        let t = parse("dtype: DT_INT64 tensor_shape { dim { size: 2 } }").unwrap();
        assert_eq!(t.flat::<i64>().unwrap(), &[0, 0]);
        let t = parse(
            "dtype: DT_COMPLEX64 tensor_shape { dim { size: 2 } } scomplex_val: 1 scomplex_val: 2",
        )
        .unwrap();
        assert_eq!(
            t.flat::<num_complex::Complex<f32>>().unwrap()[1],
            num_complex::Complex::new(1.0, 2.0)
        );
        let t =
            parse("dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: 'ab'").unwrap();
        assert_eq!(t.strings().unwrap(), &[b"ab".to_vec(), b"ab".to_vec()]);
        let t = parse("dtype: DT_BOOL bool_val: true").unwrap();
        assert!(t.scalar_value::<bool>().unwrap());
        let t = parse("dtype: DT_HALF half_val: 15360").unwrap();
        assert_eq!(
            t.scalar_value::<half::f16>().unwrap(),
            half::f16::from_f32(1.0)
        );
        let t = parse("dtype: DT_UINT8 tensor_shape { dim { size: 2 } } int_val: 255 int_val: 7")
            .unwrap();
        assert_eq!(t.flat::<u8>().unwrap(), &[255, 7]);
    }

    #[test]
    fn bad_protos_are_errors() {
        assert!(parse(
            "dtype: DT_FLOAT tensor_shape { dim { size: 1 } } float_val: 1 float_val: 2"
        )
        .is_err());
        assert!(
            parse("dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: '\\001'")
                .is_err()
        );
        assert!(parse("dtype: DT_BOOL tensor_content: '\\002'").is_err());
        assert!(parse("dtype: DT_FLOAT tensor_shape { dim { size: -1 } }").is_err());
        assert!(parse("dtype: DT_FLOAT_REF").is_err());
        assert!(parse("dtype: DT_STRING tensor_content: 'x'").is_err());
        assert!(parse("dtype: 99").is_err());
    }

    #[test]
    fn round_trips_through_both_encodings() {
        let tensors = vec![
            Tensor::from_vec(&[2, 2], vec![1.0f32, -2.0, 3.5, 0.0]).unwrap(),
            Tensor::from_vec(&[3], vec![1i8, -2, 3]).unwrap(),
            Tensor::from_vec(&[2], vec![u64::MAX, 0]).unwrap(),
            Tensor::from_vec(&[2], vec![true, false]).unwrap(),
            Tensor::from_vec(&[1], vec![half::bf16::from_f32(2.5)]).unwrap(),
            Tensor::from_vec(&[1], vec![num_complex::Complex::new(1.0f64, -1.0)]).unwrap(),
            Tensor::from_strings(&[2], vec![b"".to_vec(), b"\xff".to_vec()]).unwrap(),
            Tensor::zeros(DataType::Int16, &[0, 4]).unwrap(),
        ];
        for t in tensors {
            assert_eq!(
                Tensor::from_proto(&t.to_proto().unwrap()).unwrap(),
                t,
                "{t:?}"
            );
            assert_eq!(
                Tensor::from_proto(&t.to_proto_field().unwrap()).unwrap(),
                t,
                "{t:?}"
            );
        }
    }
}
