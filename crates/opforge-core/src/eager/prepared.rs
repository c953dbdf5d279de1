//! Prepared calls: an op and its given attrs checked once
//! ([`EagerContext::prepare`]), then run many times
//! ([`EagerContext::run_prepared`]). A [`PreparedOp`] keeps the kernels
//! its calls resolved (attrs inferred and defaulted, kernel selected and
//! built), one per input-dtype signature, in a small inline cache, so a
//! repeated call does no op-name lookup, builds no attr map and selects no
//! kernel: it compares the input dtypes with at most
//! [`PREPARED_KERNELS`] entries and runs the kernel.
//!
//! The cache stays correct when the registry changes: an entry whose op
//! or kernel was unloaded (checked only when the registry's
//! [generation](crate::Registry::generation) moved) is never run again,
//! and the next call resolves the op by name again, finding the op a
//! reloaded library registered, or `NotFound`. A call with other dtypes
//! resolves them (through the context's shared kernel cache) and keeps
//! the result, pushing out the oldest entry when the cache is full.

use super::{flatten_args, Arg, CachedKernel, EagerContext, Grouping};
use crate::attrs::{check_known_attrs, AttrMap};
use crate::{Result, Status, Tensor};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

/// How many resolved kernels (input-dtype signatures) a [`PreparedOp`]
/// keeps at hand; calls with further signatures still run, resolved
/// through the context's shared cache.
pub const PREPARED_KERNELS: usize = 4;

/// A call of one op with fixed attrs, prepared by
/// [`EagerContext::prepare`] and run by [`EagerContext::run_prepared`]
/// on the context that prepared it. `Send + Sync`: threads may share one.
///
/// ```
/// use opforge_core::eager::EagerContext;
/// # use opforge_core::{register_op, register_kernel, OpDefBuilder, Tensor, Result};
/// # use opforge_core::attrs::AttrMap;
/// # use opforge_core::kernel::{KernelDefBuilder, OpKernel, OpKernelContext, CreateKernel, OpKernelConstruction};
/// # register_op!(OpDefBuilder::new("DocTwice").input("x: float").output("y: float"));
/// # struct Twice;
/// # impl OpKernel for Twice { fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
/// #     let v: Vec<f32> = ctx.input(0).flat::<f32>()?.iter().map(|x| 2.0 * x).collect();
/// #     let t = Tensor::from_vec(ctx.input(0).dims(), v)?; ctx.set_output(0, t) } }
/// # impl CreateKernel for Twice { fn create(_: &OpKernelConstruction<'_>) -> Result<Self> { Ok(Twice) } }
/// # register_kernel!(KernelDefBuilder::new("DocTwice"), Twice);
/// let ctx = EagerContext::new(1).unwrap();
/// let twice = ctx.prepare("DocTwice", AttrMap::new()).unwrap();
/// for i in 0..3 {
///     let y = ctx.run_prepared(&twice, vec![Tensor::scalar(i as f32)]).unwrap();
///     assert_eq!(y[0].scalar_value::<f32>().unwrap(), 2.0 * i as f32);
/// }
/// assert_eq!(twice.cached_kernels(), 1);
/// ```
pub struct PreparedOp {
    op: String,
    given: AttrMap,
    /// The id of the context that prepared it.
    context: u64,
    /// Most recently resolved first.
    kernels: Mutex<SmallVec<[Arc<CachedKernel>; PREPARED_KERNELS]>>,
}

impl std::fmt::Debug for PreparedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedOp")
            .field("op", &self.op)
            .field("attrs", &self.given)
            .field("cached_kernels", &self.cached_kernels())
            .finish()
    }
}

impl PreparedOp {
    /// The op's name.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// The attrs given when it was prepared (the others are inferred from
    /// the inputs or defaulted, per call).
    pub fn attrs(&self) -> &AttrMap {
        &self.given
    }

    /// How many resolved kernels it holds (at most [`PREPARED_KERNELS`]).
    pub fn cached_kernels(&self) -> usize {
        self.kernels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Drops the kernels it holds (and with them its hold on the op
    /// libraries they came from); the next calls resolve them again.
    pub fn clear(&self) {
        let held =
            std::mem::take(&mut *self.kernels.lock().unwrap_or_else(PoisonError::into_inner));
        drop(held);
    }
}

/// The result of a prepared call: the flat outputs, and what the call
/// resolved (every attr, the output grouping), e.g. to record the call on
/// a gradient tape.
pub struct PreparedOutputs {
    /// The flat output tensors.
    pub outputs: Vec<Tensor>,
    kernel: Arc<CachedKernel>,
}

impl std::fmt::Debug for PreparedOutputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedOutputs")
            .field("outputs", &self.outputs)
            .field("attrs", self.attrs())
            .finish()
    }
}

impl PreparedOutputs {
    /// Every attr of the call: given, inferred from the inputs, or
    /// defaulted (as a graph node of the call would hold them).
    pub fn attrs(&self) -> &AttrMap {
        &self.kernel.sig.attrs
    }

    /// The flat output indices of each output argument.
    pub fn output_ranges(&self) -> &[Range<usize>] {
        &self.kernel.sig.output_ranges
    }
}

impl EagerContext {
    /// Prepares calls of op `op` with `attrs` (the attrs the inputs do not
    /// determine; those left out take their defaults). `NotFound` for an
    /// unregistered op, `InvalidArgument` for an attr the op does not have.
    /// Everything else (dtypes, attr values, the kernel) is checked per
    /// call, with the errors [`execute`](Self::execute) gives.
    pub fn prepare(&self, op: &str, attrs: AttrMap) -> Result<PreparedOp> {
        let data = self.registry.lookup(op)?;
        check_known_attrs(&data.op_def, &attrs)?;
        Ok(PreparedOp {
            op: op.to_string(),
            given: attrs,
            context: self.id,
            kernels: Mutex::new(SmallVec::new()),
        })
    }

    /// Runs prepared call `p` on flat `inputs` (list arguments as
    /// [`execute`](Self::execute) splits them); the outputs.
    pub fn run_prepared(&self, p: &PreparedOp, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        Ok(self.run_prepared_grouped(p, inputs, None)?.outputs)
    }

    /// [`run_prepared`](Self::run_prepared), also telling what the call
    /// resolved ([`PreparedOutputs::attrs`]).
    pub fn run_prepared_outputs(
        &self,
        p: &PreparedOp,
        inputs: Vec<Tensor>,
    ) -> Result<PreparedOutputs> {
        self.run_prepared_grouped(p, inputs, None)
    }

    /// Runs prepared call `p` on grouped arguments, one [`Arg`] per input
    /// argument (as [`execute_args`](Self::execute_args)).
    pub fn run_prepared_args(&self, p: &PreparedOp, args: Vec<Arg>) -> Result<PreparedOutputs> {
        let (flat, grouping) = flatten_args(args);
        self.run_prepared_grouped(p, flat, Some(grouping))
    }

    fn run_prepared_grouped(
        &self,
        p: &PreparedOp,
        inputs: Vec<Tensor>,
        grouping: Option<Grouping>,
    ) -> Result<PreparedOutputs> {
        if p.context != self.id {
            return Err(Status::invalid_argument(format!(
                "a prepared call of {} runs on the context that prepared it, not another one",
                p.op
            )));
        }
        let generation = self.registry.generation();
        let hit = {
            let kernels = p.kernels.lock().unwrap_or_else(PoisonError::into_inner);
            kernels
                .iter()
                .find(|c| c.matches_types(&inputs, &grouping) && c.is_current(generation))
                .cloned()
        };
        let kernel = match hit {
            Some(k) => k,
            None => self.resolve_prepared(p, &inputs, grouping)?,
        };
        // The kernel runs without the cache's lock: it may run ops itself,
        // and other threads may use `p` meanwhile.
        let outputs = self.call(&p.op, &kernel, inputs)?;
        Ok(PreparedOutputs { outputs, kernel })
    }

    /// The kernel of a call `p`'s cache does not hold (other dtypes, or
    /// its entry was unloaded): from the shared cache, or built by name;
    /// kept in `p` (dropping its unloaded entries, and its oldest one when
    /// full).
    #[cold]
    fn resolve_prepared(
        &self,
        p: &PreparedOp,
        inputs: &[Tensor],
        grouping: Option<Grouping>,
    ) -> Result<Arc<CachedKernel>> {
        let op = p.op.as_str();
        // Unloaded entries go first, whatever the resolution gives: a
        // prepared op must not keep an unloaded library's kernel alive.
        let generation = self.registry.generation();
        let gone: SmallVec<[Arc<CachedKernel>; PREPARED_KERNELS]> = {
            let mut kernels = p.kernels.lock().unwrap_or_else(PoisonError::into_inner);
            let mut gone = SmallVec::new();
            let mut i = 0;
            while i < kernels.len() {
                if kernels[i].is_current(generation) {
                    i += 1;
                } else {
                    gone.push(kernels.remove(i));
                }
            }
            gone
        };
        // Dropped without the lock held.
        drop(gone);
        let kernel = match self.cached(op, inputs, &grouping, &p.given) {
            Some(c) => c,
            None => self
                .build(op, inputs, grouping.clone(), &p.given)
                .map_err(|e| e.append(format!(" [Op:{op}]")))?,
        };
        let mut kernels = p.kernels.lock().unwrap_or_else(PoisonError::into_inner);
        // Another thread that missed at the same time may have put a
        // kernel for these inputs in first: use it, keep one entry.
        if let Some(first) = kernels
            .iter()
            .find(|c| c.matches_types(inputs, &grouping) && c.is_current(generation))
        {
            return Ok(first.clone());
        }
        let mut oldest = None;
        if !kernels.iter().any(|c| Arc::ptr_eq(c, &kernel)) {
            if kernels.len() == PREPARED_KERNELS {
                oldest = kernels.pop();
            }
            kernels.insert(0, kernel.clone());
        }
        drop(kernels);
        drop(oldest);
        Ok(kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::IntoAttrValue;
    use crate::device::CpuDevice;
    use crate::kernel::{KernelDefBuilder, KernelRegistration, OpKernel, OpKernelContext};
    use crate::registry::Registry;
    use crate::{Code, DataType, OpDefBuilder};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// `z = x + y + offset` for float and int32 (the offset tells which
    /// registration built the kernel).
    struct AddOffset(f64);
    impl OpKernel for AddOffset {
        fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
            let t = match ctx.input(0).dtype() {
                DataType::Float => {
                    let x = ctx.input(0).flat::<f32>()?;
                    let y = ctx.input(1).flat::<f32>()?;
                    let v: Vec<f32> = x
                        .iter()
                        .zip(y)
                        .map(|(a, b)| a + b + self.0 as f32)
                        .collect();
                    Tensor::from_vec(ctx.input(0).dims(), v)?
                }
                _ => {
                    let x = ctx.input(0).flat::<i32>()?;
                    let y = ctx.input(1).flat::<i32>()?;
                    let v: Vec<i32> = x
                        .iter()
                        .zip(y)
                        .map(|(a, b)| a + b + self.0 as i32)
                        .collect();
                    Tensor::from_vec(ctx.input(0).dims(), v)?
                }
            };
            ctx.set_output(0, t)
        }
    }

    fn add_op(name: &str) -> OpDefBuilder {
        OpDefBuilder::new(name)
            .attr("T: {float, int32}")
            .attr("scale: int = 1")
            .input("x: T")
            .input("y: T")
            .output("z: T")
    }

    /// A kernel registration counting the kernels it builds.
    fn add_kernel(name: &str, offset: f64, built: &'static AtomicUsize) -> KernelRegistration {
        KernelRegistration::with_factory(KernelDefBuilder::new(name), move |_| {
            built.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(AddOffset(offset)) as Box<dyn OpKernel>)
        })
    }

    fn context(r: &Arc<Registry>) -> EagerContext {
        EagerContext::with_registry(Arc::new(CpuDevice::new(1).unwrap()), r.clone())
    }

    fn f(v: f32) -> Tensor {
        Tensor::scalar(v)
    }

    #[test]
    fn a_repeated_call_builds_its_kernel_once_and_matches_execute() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let r = Arc::new(Registry::new());
        r.register_op(add_op("PAdd")).unwrap();
        r.register_kernel(add_kernel("PAdd", 0.0, &BUILT)).unwrap();
        let c = context(&r);
        let p = c.prepare("PAdd", AttrMap::new()).unwrap();
        assert_eq!(p.op(), "PAdd");
        assert_eq!(p.cached_kernels(), 0);
        for i in 0..10 {
            let out = c.run_prepared(&p, vec![f(i as f32), f(1.0)]).unwrap();
            assert_eq!(out[0].scalar_value::<f32>().unwrap(), i as f32 + 1.0);
        }
        assert_eq!(BUILT.load(Ordering::SeqCst), 1);
        assert_eq!(p.cached_kernels(), 1);
        // The same call through execute finds the same (shared) kernel.
        let e = c
            .execute("PAdd", vec![f(2.0), f(3.0)], &AttrMap::new())
            .unwrap();
        assert_eq!(e[0].scalar_value::<f32>().unwrap(), 5.0);
        assert_eq!(BUILT.load(Ordering::SeqCst), 1);
        // What the call resolved: the inferred T and the defaulted scale.
        let o = c.run_prepared_outputs(&p, vec![f(1.0), f(1.0)]).unwrap();
        let mut want = AttrMap::new();
        want.insert("T".into(), DataType::Float.into_attr_value());
        want.insert("scale".into(), 1i64.into_attr_value());
        assert_eq!(o.attrs(), &want);
        assert_eq!(o.output_ranges().len(), 1);
        assert_eq!(o.output_ranges()[0], 0..1);
        p.clear();
        assert_eq!(p.cached_kernels(), 0);
    }

    #[test]
    fn other_dtypes_resolve_again_and_the_cache_stays_small() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let r = Arc::new(Registry::new());
        r.register_op(add_op("PAddT")).unwrap();
        r.register_kernel(add_kernel("PAddT", 0.0, &BUILT)).unwrap();
        let c = context(&r);
        let p = c.prepare("PAddT", AttrMap::new()).unwrap();
        for _ in 0..3 {
            let a = c.run_prepared(&p, vec![f(1.0), f(2.0)]).unwrap();
            assert_eq!(a[0].scalar_value::<f32>().unwrap(), 3.0);
            let b = c
                .run_prepared(&p, vec![Tensor::scalar(1i32), Tensor::scalar(2i32)])
                .unwrap();
            assert_eq!(b[0].scalar_value::<i32>().unwrap(), 3);
        }
        assert_eq!(BUILT.load(Ordering::SeqCst), 2);
        assert_eq!(p.cached_kernels(), 2);
        // Mixed dtypes: execute's error, and nothing cached.
        let e = c
            .run_prepared(&p, vec![f(1.0), Tensor::scalar(2i32)])
            .unwrap_err();
        let want = c
            .execute("PAddT", vec![f(1.0), Tensor::scalar(2i32)], &AttrMap::new())
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.message(), want.message());
        assert!(e.message().ends_with("[Op:PAddT]"), "{e}");
        assert_eq!(p.cached_kernels(), 2);
        // Too many inputs: execute's error too.
        let e = c.run_prepared(&p, vec![f(1.0)]).unwrap_err();
        let want = c
            .execute("PAddT", vec![f(1.0)], &AttrMap::new())
            .unwrap_err();
        assert_eq!(e.message(), want.message());
        assert_eq!(p.cached_kernels(), 2);
    }

    #[test]
    fn more_signatures_than_entries_still_run() {
        let r = Arc::new(Registry::new());
        r.register_op(
            OpDefBuilder::new("PSum")
                .attr("N: int >= 1")
                .input("x: N * float")
                .output("y: float"),
        )
        .unwrap();
        struct Sum;
        impl OpKernel for Sum {
            fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
                let mut s = 0f32;
                for i in 0..ctx.num_inputs() {
                    s += ctx.input(i).scalar_value::<f32>()?;
                }
                ctx.set_output(0, Tensor::scalar(s))
            }
        }
        r.register_kernel(KernelRegistration::with_factory(
            KernelDefBuilder::new("PSum"),
            |_| Ok(Box::new(Sum) as Box<dyn OpKernel>),
        ))
        .unwrap();
        let c = context(&r);
        let p = c.prepare("PSum", AttrMap::new()).unwrap();
        for round in 0..2 {
            for n in 1..=PREPARED_KERNELS + 3 {
                let inputs: Vec<Tensor> = (0..n).map(|i| f(i as f32)).collect();
                let out = if round == 0 {
                    c.run_prepared(&p, inputs).unwrap()
                } else {
                    c.run_prepared_args(&p, vec![Arg::List(inputs)])
                        .unwrap()
                        .outputs
                };
                let want = (0..n).sum::<usize>() as f32;
                assert_eq!(out[0].scalar_value::<f32>().unwrap(), want);
                assert!(p.cached_kernels() <= PREPARED_KERNELS);
            }
        }
        assert_eq!(p.cached_kernels(), PREPARED_KERNELS);
    }

    #[test]
    fn given_attrs_are_used_and_checked() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let r = Arc::new(Registry::new());
        r.register_op(add_op("PAddA")).unwrap();
        r.register_kernel(add_kernel("PAddA", 0.0, &BUILT)).unwrap();
        let c = context(&r);
        let mut attrs = AttrMap::new();
        attrs.insert("scale".into(), 3i64.into_attr_value());
        let p = c.prepare("PAddA", attrs.clone()).unwrap();
        assert_eq!(p.attrs(), &attrs);
        let o = c.run_prepared_outputs(&p, vec![f(1.0), f(1.0)]).unwrap();
        assert_eq!(o.attrs().get("scale"), Some(&3i64.into_attr_value()));
        // A wrong attr type: execute's error, per call.
        let mut bad = AttrMap::new();
        bad.insert("T".into(), DataType::Double.into_attr_value());
        let p = c.prepare("PAddA", bad.clone()).unwrap();
        let e = c.run_prepared(&p, vec![f(1.0), f(1.0)]).unwrap_err();
        let want = c.execute("PAddA", vec![f(1.0), f(1.0)], &bad).unwrap_err();
        assert_eq!(e.message(), want.message());
        // Unknown ops and attrs fail when prepared.
        let e = c.prepare("Nope", AttrMap::new()).unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
        let mut unknown = AttrMap::new();
        unknown.insert("nope".into(), 1i64.into_attr_value());
        let e = c.prepare("PAddA", unknown).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains("has no attr named 'nope'"), "{e}");
    }

    #[test]
    fn a_prepared_call_runs_only_on_its_context() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let r = Arc::new(Registry::new());
        r.register_op(add_op("PAddC")).unwrap();
        r.register_kernel(add_kernel("PAddC", 0.0, &BUILT)).unwrap();
        let (a, b) = (context(&r), context(&r));
        let p = a.prepare("PAddC", AttrMap::new()).unwrap();
        let e = b.run_prepared(&p, vec![f(1.0), f(1.0)]).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(a.run_prepared(&p, vec![f(1.0), f(1.0)]).is_ok());
    }

    #[test]
    fn unloading_and_reloading_the_op_is_seen() {
        static OLD: AtomicUsize = AtomicUsize::new(0);
        static NEW: AtomicUsize = AtomicUsize::new(0);
        let r = Arc::new(Registry::new());
        let lib = r.add_owner("/tmp/libprepared.so");
        let reg = r.registrar(lib, "/tmp/libprepared.so");
        reg.op(add_op("PLib")).unwrap();
        reg.kernel(add_kernel("PLib", 0.0, &OLD)).unwrap();
        let c = context(&r);
        let p = c.prepare("PLib", AttrMap::new()).unwrap();
        let out = c.run_prepared(&p, vec![f(1.0), f(1.0)]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), 2.0);
        // Unloaded: the held kernel never runs again.
        r.unload(lib);
        let e = c.run_prepared(&p, vec![f(1.0), f(1.0)]).unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{e}");
        assert!(e.message().ends_with("[Op:PLib]"), "{e}");
        assert_eq!(p.cached_kernels(), 0, "the dead entry is dropped");
        // Loaded again (another build of the library): the new kernel runs.
        let lib2 = r.add_owner("/tmp/libprepared.so");
        let reg = r.registrar(lib2, "/tmp/libprepared.so");
        reg.op(add_op("PLib")).unwrap();
        reg.kernel(add_kernel("PLib", 10.0, &NEW)).unwrap();
        let out = c.run_prepared(&p, vec![f(1.0), f(1.0)]).unwrap();
        assert_eq!(out[0].scalar_value::<f32>().unwrap(), 12.0);
        assert_eq!(
            (OLD.load(Ordering::SeqCst), NEW.load(Ordering::SeqCst)),
            (1, 1)
        );
        assert_eq!(p.cached_kernels(), 1);
    }

    #[test]
    fn threads_share_a_prepared_call() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let r = Arc::new(Registry::new());
        r.register_op(add_op("PAddTh")).unwrap();
        r.register_kernel(add_kernel("PAddTh", 0.0, &BUILT))
            .unwrap();
        let c = Arc::new(context(&r));
        let p = Arc::new(c.prepare("PAddTh", AttrMap::new()).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (c, p) = (c.clone(), p.clone());
                std::thread::spawn(move || {
                    for i in 0..200 {
                        if (t + i) % 2 == 0 {
                            let v = (t * 1000 + i) as f32;
                            let y = c.run_prepared(&p, vec![f(v), f(1.0)]).unwrap();
                            assert_eq!(y[0].scalar_value::<f32>().unwrap(), v + 1.0);
                        } else {
                            let v = t * 1000 + i;
                            let y = c
                                .run_prepared(&p, vec![Tensor::scalar(v), Tensor::scalar(2i32)])
                                .unwrap();
                            assert_eq!(y[0].scalar_value::<i32>().unwrap(), v + 2);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(p.cached_kernels(), 2);
    }
}
