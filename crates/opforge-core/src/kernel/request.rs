//! Output requests: what a runtime asks of each output of a kernel call
//! (MXNet's `OpReqType`), what a kernel declares it handles, and the
//! per-op attributes the executor plans in-place requests with
//! ([`FInplaceOption`], [`FInplaceIdentity`]).
//!
//! One set of names everywhere: [`OutputRequest`]'s `Null`, `Write`,
//! `InPlace` and `Add` are MXNet's `kNullOp`, `kWriteTo`, `kWriteInplace`
//! and `kAddTo`, the C ABI's `OPFORGE_REQ_NULL`, `OPFORGE_REQ_WRITE`,
//! `OPFORGE_REQ_INPLACE` and `OPFORGE_REQ_ADD`, and the Rust plugin SDK's
//! `OutputRequest` variants.
//!
//! **Declaring support.** A kernel states what it handles with
//! [`OpKernel::supported_requests`](super::OpKernel::supported_requests)
//! (per kernel instance, so a kernel may support `Add` for some dtypes
//! only, and a plugin kernel answers from its library's flag). A kernel
//! that declares nothing is asked only for `Write`, and the runtime does
//! the rest itself ([`call_kernel_with`](super::call_kernel_with)): for
//! `Null` it drops the output the kernel wrote; for `Add` it adds the fresh
//! output into the accumulator ([`add_into`]); for `InPlace` the kernel
//! simply writes a new output. So every kernel keeps working.
//!
//! **What each request means to a kernel that declares it** (read with
//! [`OpKernelContext::output_request`](super::OpKernelContext::output_request)):
//!
//! - `Write`: set the output (allocate, forward or set it) and write it.
//! - `Null`: nobody reads the output: the kernel may leave it unset (and
//!   skip computing it); if it sets it anyway, the runtime drops it.
//! - `InPlace`: input [`inplace_input(o)`](super::OpKernelContext::inplace_input)
//!   may become this output: the runtime guarantees that no other tensor
//!   shares its buffer, so `forward_input_or_allocate_output` with it as a
//!   candidate forwards it whenever dtype and shape fit; the kernel then
//!   computes in place (reading element k before writing element k).
//! - `Add`: the output is already set, holding the accumulator
//!   ([`output_mut(o)`](super::OpKernelContext::output_mut), not shared);
//!   add the result into it and leave it set. Its shape is the result's
//!   (the runtime asks for `Add` only where the shapes were inferred
//!   equal); a kernel finding another shape returns `InvalidArgument`.

use crate::attrs::AttrMap;
use crate::op_attr::OpAttr;
use crate::tensor::Tensor;
use crate::{DataType, Result, Status};
use half::{bf16, f16};
use num_complex::Complex;

/// What the runtime asks of one output of a kernel call (MXNet's
/// `OpReqType`; the C ABI's `OPFORGE_REQ_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutputRequest {
    /// MXNet's `kNullOp`, `OPFORGE_REQ_NULL`: nobody reads the output.
    Null,
    /// MXNet's `kWriteTo`, `OPFORGE_REQ_WRITE`: set and write the output
    /// (the only request a kernel that declares nothing gets).
    #[default]
    Write,
    /// MXNet's `kWriteInplace`, `OPFORGE_REQ_INPLACE`: the output may take
    /// over the buffer of input
    /// [`inplace_input`](super::OpKernelContext::inplace_input).
    InPlace,
    /// MXNet's `kAddTo`, `OPFORGE_REQ_ADD`: the output holds the
    /// accumulator; add the result into it.
    Add,
}

impl OutputRequest {
    /// MXNet's name of the request in Python (`'null'`, `'write'`,
    /// `'inplace'`, `'add'`).
    pub const fn name(self) -> &'static str {
        match self {
            OutputRequest::Null => "null",
            OutputRequest::Write => "write",
            OutputRequest::InPlace => "inplace",
            OutputRequest::Add => "add",
        }
    }
}

/// The requests beyond `Write` a kernel handles (see the module's
/// documentation): a small set, combined with `|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestSupport(u8);

impl RequestSupport {
    /// Only `Write` (the default of every kernel).
    pub const WRITE_ONLY: RequestSupport = RequestSupport(0);
    /// `Null`: the kernel may skip an output nobody reads.
    pub const NULL: RequestSupport = RequestSupport(1);
    /// `InPlace`: the kernel forwards the input it is offered and computes
    /// in place.
    pub const INPLACE: RequestSupport = RequestSupport(2);
    /// `Add`: the kernel adds its result into the accumulator it is given.
    pub const ADD: RequestSupport = RequestSupport(4);
    /// Every request.
    pub const ALL: RequestSupport = RequestSupport(7);

    /// Whether the kernel handles `r` (`Write` always).
    #[inline]
    pub const fn handles(self, r: OutputRequest) -> bool {
        match r {
            OutputRequest::Write => true,
            OutputRequest::Null => self.0 & Self::NULL.0 != 0,
            OutputRequest::InPlace => self.0 & Self::INPLACE.0 != 0,
            OutputRequest::Add => self.0 & Self::ADD.0 != 0,
        }
    }

    /// Both sets.
    pub const fn union(self, other: RequestSupport) -> RequestSupport {
        RequestSupport(self.0 | other.0)
    }
}

impl std::ops::BitOr for RequestSupport {
    type Output = RequestSupport;
    fn bitor(self, rhs: RequestSupport) -> RequestSupport {
        self.union(rhs)
    }
}

/// What a runtime asks of one output in
/// [`call_kernel_with`](super::call_kernel_with): the request and what it
/// binds.
#[derive(Debug, Default)]
pub enum OutputBinding {
    /// Set and write the output.
    #[default]
    Write,
    /// Nobody reads the output: it is not handed back.
    Null,
    /// The output may take over flat input `input`'s buffer.
    InPlace {
        /// The flat input.
        input: usize,
    },
    /// Add the result into this tensor, which becomes the output.
    Add(Tensor),
}

/// MXNet's `FInplaceOption`: the (flat input, flat output) pairs of a node
/// (given its attrs) that may share a buffer, because the kernel reads
/// each input element before it writes the output element in its place.
/// The session's executor asks for `InPlace` on such a pair when the input
/// has no other reader (see [`SessionOptions`](crate::graph::SessionOptions)).
///
/// ```
/// use opforge_core::kernel::FInplaceOption;
/// use opforge_core::OpDefBuilder;
/// use std::sync::Arc;
/// let op = OpDefBuilder::new("Twice")
///     .input("x: float")
///     .output("y: float")
///     .set_attr::<FInplaceOption>(Arc::new(|_| vec![(0, 0)]));
/// # let _ = op;
/// ```
pub struct FInplaceOption;

impl OpAttr for FInplaceOption {
    type Value = dyn Fn(&AttrMap) -> Vec<(usize, usize)> + Send + Sync;
    const NAME: &'static str = "FInplaceOption";
}

/// MXNet's `FInplaceIdentity`: one bool per [`FInplaceOption`] pair of the
/// node, true where the output equals the input exactly (`Identity`,
/// `Reshape`: the kernel writes nothing). The executor's in-place check
/// ([`SessionOptions::check_inplace`](crate::graph::SessionOptions::check_inplace))
/// does not count a buffer shared through an identity pair as aliasing.
pub struct FInplaceIdentity;

impl OpAttr for FInplaceIdentity {
    type Value = dyn Fn(&AttrMap) -> Vec<bool> + Send + Sync;
    const NAME: &'static str = "FInplaceIdentity";
}

/// Adds `t` into `acc` element by element (the runtime's `Add` for kernels
/// that write a fresh output): the two must have one dtype and shape, and
/// `acc` must not share its buffer (copy it first). Integers wrap, as
/// `AddN` does; `half` and `bfloat16` add in `f32`.
pub fn add_into(acc: &mut Tensor, t: &Tensor) -> Result<()> {
    if acc.dtype() != t.dtype() || acc.shape() != t.shape() {
        return Err(Status::invalid_argument(format!(
            "cannot add a {} tensor of shape {} into an accumulator of {} and shape {}",
            t.dtype(),
            t.shape(),
            acc.dtype(),
            acc.shape()
        )));
    }
    let dt = acc.dtype();
    crate::dispatch!(dt, T => add_elements::<T>(acc, t),
    [Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
     Half, BFloat16, Complex64, Complex128],
    Err(Status::unimplemented(format!(
        "the runtime cannot add {dt} tensors (an output requested with Add)"
    ))))
}

fn add_elements<T: Accumulate>(acc: &mut Tensor, t: &Tensor) -> Result<()> {
    let src = t.flat::<T>()?;
    for (a, &b) in acc.flat_mut::<T>()?.iter_mut().zip(src) {
        *a = a.accumulate(b);
    }
    Ok(())
}

/// `a + b` as `AddN` computes it.
trait Accumulate: crate::Element {
    fn accumulate(self, other: Self) -> Self;
}

macro_rules! accumulate {
    (wrapping: $($t:ty),*) => {$(
        impl Accumulate for $t {
            #[inline]
            fn accumulate(self, other: Self) -> Self { self.wrapping_add(other) }
        }
    )*};
    (plain: $($t:ty),*) => {$(
        impl Accumulate for $t {
            #[inline]
            fn accumulate(self, other: Self) -> Self { self + other }
        }
    )*};
    (in_f32: $($t:ty),*) => {$(
        impl Accumulate for $t {
            #[inline]
            fn accumulate(self, other: Self) -> Self {
                <$t>::from_f32(self.to_f32() + other.to_f32())
            }
        }
    )*};
}
accumulate!(wrapping: i8, i16, i32, i64, u8, u16, u32, u64);
accumulate!(plain: f32, f64, Complex<f32>, Complex<f64>);
accumulate!(in_f32: f16, bf16);

/// Whether flat input `t` may become an output of `dtype` on a device
/// whose memory is `location` (what an `InPlace` request needs).
pub(crate) fn can_take_over(
    t: &Tensor,
    dtype: DataType,
    location: crate::tensor::Location,
) -> bool {
    t.dtype() == dtype.base() && t.is_uniquely_owned() && t.location() == location
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn support_sets() {
        let s = RequestSupport::NULL | RequestSupport::ADD;
        assert!(s.handles(OutputRequest::Write));
        assert!(s.handles(OutputRequest::Null));
        assert!(s.handles(OutputRequest::Add));
        assert!(!s.handles(OutputRequest::InPlace));
        assert!(!RequestSupport::WRITE_ONLY.handles(OutputRequest::Null));
        assert!(RequestSupport::ALL.handles(OutputRequest::InPlace));
        assert_eq!(OutputRequest::default(), OutputRequest::Write);
        assert_eq!(OutputRequest::InPlace.name(), "inplace");
    }

    #[test]
    fn add_into_adds_like_add_n() {
        let mut acc = Tensor::from_vec(&[3], vec![1.5f32, -2.0, 0.25]).unwrap();
        let t = Tensor::from_vec(&[3], vec![0.5f32, 2.0, 1.0]).unwrap();
        add_into(&mut acc, &t).unwrap();
        assert_eq!(acc.flat::<f32>().unwrap(), &[2.0, 0.0, 1.25]);
        let mut acc = Tensor::from_vec(&[2], vec![i32::MAX, 3]).unwrap();
        add_into(&mut acc, &Tensor::from_vec(&[2], vec![1i32, 4]).unwrap()).unwrap();
        assert_eq!(acc.flat::<i32>().unwrap(), &[i32::MIN, 7]);
        let h = |v: f32| f16::from_f32(v);
        let mut acc = Tensor::from_vec(&[1], vec![h(1.5)]).unwrap();
        add_into(&mut acc, &Tensor::from_vec(&[1], vec![h(0.25)]).unwrap()).unwrap();
        assert_eq!(acc.flat::<f16>().unwrap(), &[h(1.75)]);
    }

    #[test]
    fn add_into_refuses_mismatches() {
        let mut acc = Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap();
        let e = add_into(&mut acc, &Tensor::from_vec(&[3], vec![1.0f32; 3]).unwrap()).unwrap_err();
        assert!(e.message().contains("shape [3]"), "{e}");
        let e = add_into(&mut acc, &Tensor::from_vec(&[2], vec![1i32; 2]).unwrap()).unwrap_err();
        assert!(e.message().contains("int32"), "{e}");
        let mut b = Tensor::from_vec(&[1], vec![true]).unwrap();
        let e = add_into(&mut b, &Tensor::from_vec(&[1], vec![false]).unwrap()).unwrap_err();
        assert!(e.message().contains("cannot add bool"), "{e}");
        // A shared accumulator is refused, not written.
        let mut shared = Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap();
        let other = shared.clone();
        assert!(add_into(&mut shared, &other).is_err());
        assert_eq!(other.flat::<f32>().unwrap(), &[1.0, 2.0]);
    }

    /// `y = x + x` with one output, recording the request it saw and the
    /// input it was offered; `support` is what it declares.
    struct Twice {
        support: RequestSupport,
        seen: std::sync::Mutex<Vec<(OutputRequest, Option<usize>)>>,
    }

    impl crate::kernel::OpKernel for Twice {
        fn compute(&self, ctx: &mut crate::kernel::OpKernelContext<'_>) -> Result<()> {
            let req = ctx.output_request(0);
            self.seen.lock().unwrap().push((req, ctx.inplace_input(0)));
            match req {
                OutputRequest::Null => Ok(()),
                OutputRequest::Add => {
                    let (ins, out) = ctx.inputs_and_output(0)?;
                    let x = ins[0].flat::<f32>()?;
                    for (o, &x) in out.flat_mut::<f32>()?.iter_mut().zip(x) {
                        *o += x + x;
                    }
                    Ok(())
                }
                _ => {
                    let candidates: &[usize] = match ctx.inplace_input(0) {
                        Some(i) => &[i][..],
                        None => &[],
                    };
                    let shape = ctx.input(0).shape().clone();
                    match ctx.forward_input_or_allocate_output(candidates, 0, &shape)? {
                        Some(_) => {
                            for v in ctx.output_mut(0)?.flat_mut::<f32>()? {
                                *v += *v;
                            }
                        }
                        None => {
                            let (ins, out) = ctx.inputs_and_output(0)?;
                            let x = ins[0].flat::<f32>()?;
                            for (o, &x) in out.flat_mut::<f32>()?.iter_mut().zip(x) {
                                *o = x + x;
                            }
                        }
                    }
                    Ok(())
                }
            }
        }

        fn supported_requests(&self) -> RequestSupport {
            self.support
        }
    }

    fn sig() -> crate::kernel::KernelSignature {
        use crate::proto::op_def::ArgDef;
        let op = crate::proto::OpDef {
            name: "Twice".into(),
            input_arg: vec![ArgDef {
                name: "x".into(),
                r#type: DataType::Float as i32,
                ..Default::default()
            }],
            output_arg: vec![ArgDef {
                name: "y".into(),
                r#type: DataType::Float as i32,
                ..Default::default()
            }],
            ..Default::default()
        };
        crate::kernel::KernelSignature {
            op_def: std::sync::Arc::new(op),
            node_name: "twice".into(),
            attrs: Default::default(),
            input_types: vec![DataType::Float].into(),
            output_types: vec![DataType::Float].into(),
            input_ranges: std::iter::once(0..1).collect(),
            output_ranges: std::iter::once(0..1).collect(),
        }
    }

    /// Runs `k` on `x` with `binding`: the outputs handed back.
    fn run(k: &Twice, x: Tensor, binding: OutputBinding) -> Result<Vec<Tensor>> {
        let dev = crate::device::CpuDevice::new(1)?;
        let rm = crate::resource::ResourceMgr::new();
        let mut inputs = crate::kernel::TensorVec::new();
        inputs.push(x);
        let mut bindings = [binding];
        let mut out = Vec::new();
        crate::kernel::call_kernel_with(
            k,
            &sig(),
            &mut inputs,
            &dev,
            &rm,
            &mut bindings,
            |_, _, t| out.push(t),
        )?;
        Ok(out)
    }

    fn twice(support: RequestSupport) -> Twice {
        Twice {
            support,
            seen: Default::default(),
        }
    }

    fn vec1(v: &[f32]) -> Tensor {
        Tensor::from_vec(&[v.len() as i64], v.to_vec()).unwrap()
    }

    #[test]
    fn a_kernel_declaring_nothing_is_asked_to_write_and_the_runtime_does_the_rest() {
        let k = twice(RequestSupport::WRITE_ONLY);
        // Null: written, then dropped.
        assert!(run(&k, vec1(&[1.0]), OutputBinding::Null)
            .unwrap()
            .is_empty());
        // Add: the fresh output added into the accumulator by the runtime.
        let acc = vec1(&[10.0, 20.0]);
        let got = run(&k, vec1(&[1.0, 2.0]), OutputBinding::Add(acc)).unwrap();
        assert_eq!(got[0].flat::<f32>().unwrap(), &[12.0, 24.0]);
        // InPlace: a plain write.
        let x = vec1(&[3.0]);
        let got = run(&k, x, OutputBinding::InPlace { input: 0 }).unwrap();
        assert_eq!(got[0].flat::<f32>().unwrap(), &[6.0]);
        let seen = k.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![(OutputRequest::Write, None); 3],
            "every request it saw was Write"
        );
    }

    #[test]
    fn a_kernel_declaring_every_request_gets_them() {
        let k = twice(RequestSupport::ALL);
        assert!(run(&k, vec1(&[1.0]), OutputBinding::Null)
            .unwrap()
            .is_empty());
        let acc = vec1(&[10.0, 20.0]);
        let acc_ptr = acc.host_data().unwrap().0;
        let got = run(&k, vec1(&[1.0, 2.0]), OutputBinding::Add(acc)).unwrap();
        assert_eq!(got[0].flat::<f32>().unwrap(), &[12.0, 24.0]);
        assert_eq!(
            got[0].host_data().unwrap().0,
            acc_ptr,
            "added in the accumulator"
        );
        let x = vec1(&[3.0, 4.0]);
        let x_ptr = x.host_data().unwrap().0;
        let got = run(&k, x, OutputBinding::InPlace { input: 0 }).unwrap();
        assert_eq!(got[0].flat::<f32>().unwrap(), &[6.0, 8.0]);
        assert_eq!(
            got[0].host_data().unwrap().0,
            x_ptr,
            "written in the input's buffer"
        );
        // A shared accumulator is copied before the kernel adds into it.
        let acc = vec1(&[1.0]);
        let keep = acc.clone();
        let got = run(&k, vec1(&[1.0]), OutputBinding::Add(acc)).unwrap();
        assert_eq!(got[0].flat::<f32>().unwrap(), &[3.0]);
        assert_eq!(keep.flat::<f32>().unwrap(), &[1.0]);
        let seen = k.seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (OutputRequest::Null, None),
                (OutputRequest::Add, None),
                (OutputRequest::InPlace, Some(0)),
                (OutputRequest::Add, None),
            ]
        );
    }

    #[test]
    fn in_place_is_not_offered_for_a_shared_input() {
        let k = twice(RequestSupport::ALL);
        let x = vec1(&[3.0]);
        let other_reader = x.clone();
        let got = run(&k, x, OutputBinding::InPlace { input: 0 }).unwrap();
        assert_eq!(got[0].flat::<f32>().unwrap(), &[6.0]);
        assert_eq!(other_reader.flat::<f32>().unwrap(), &[3.0]);
        assert_eq!(k.seen.lock().unwrap()[0], (OutputRequest::Write, None));
    }

    #[test]
    fn an_unset_output_is_an_error_unless_it_was_null() {
        struct Nothing;
        impl crate::kernel::OpKernel for Nothing {
            fn compute(&self, _: &mut crate::kernel::OpKernelContext<'_>) -> Result<()> {
                Ok(())
            }
        }
        let dev = crate::device::CpuDevice::new(1).unwrap();
        let rm = crate::resource::ResourceMgr::new();
        let mut inputs = crate::kernel::TensorVec::new();
        inputs.push(vec1(&[1.0]));
        let mut b = [OutputBinding::Write];
        let e = crate::kernel::call_kernel_with(
            &Nothing,
            &sig(),
            &mut inputs,
            &dev,
            &rm,
            &mut b,
            |_, _, _| {},
        )
        .unwrap_err();
        assert!(e.message().contains("did not set output 0"), "{e}");
    }
}
