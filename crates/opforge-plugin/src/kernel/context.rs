//! [`OpKernelContext`]: one run of a kernel, over the host's kernel table
//! and the views of the 1.1 entry.

use super::*;

/// One run of a kernel (opforge-core's `OpKernelContext`): inputs, outputs,
/// temporaries, attrs and the host's thread pool.
pub struct OpKernelContext<'a> {
    pub(super) raw: *mut OpforgeKernelCtx,
    pub(super) status: *mut OpforgeStatus,
    pub(super) host: &'a Host,
    pub(super) def: &'a KernelDef,
    pub(super) missing: Missing,
    /// The views the host made (1.1 entry), or none (1.0 entry).
    pub(super) premade: Premade<'a>,
    /// Bit `i`: the premade view of input `i` is dead (the input was
    /// forwarded or moved to an output that has been used since).
    pub(super) in_dead: Cell<u64>,
    /// Bit `o`: output `o` was set before compute started (a declared
    /// output: by the host, or by the SDK on a 1.0 host).
    pub(super) preset: Cell<u64>,
    /// Bit `o`: the kernel set output `o` again since (its premade view
    /// and forwarding are gone).
    pub(super) out_reset: Cell<u64>,
    /// Bit `o`: a `forward_input_or_allocate_output` of the preset output
    /// `o` was answered with it (a second one asks the host).
    pub(super) out_claimed: Cell<u64>,
    /// The views of the first inputs and outputs this compute asked the
    /// host for, kept (dropped when the argument changes: an output set
    /// again, an input forwarded or moved).
    pub(super) in_views: ViewStore<'a>,
    pub(super) out_views: ViewStore<'a>,
    /// The views of later arguments and of temporaries, boxed (each box
    /// stays put), freed with the context.
    // The boxes are what keeps each view's address when the Vec grows.
    #[allow(clippy::vec_box)]
    pub(super) spill: RefCell<Vec<Box<OpforgeTensor>>>,
    /// `num_inputs`, once asked (`usize::MAX`: not yet).
    pub(super) n_inputs: Cell<usize>,
    /// Where `inputs_and_output` puts the input views it returns.
    pub(super) input_buf: &'a InputBuf,
}

impl OpKernelContext<'_> {
    /// Keeps a view the host returned for argument `i` (`store`'s slot, or
    /// a spill box) and returns where it is.
    fn keep(
        &self,
        store: &ViewStore<'_>,
        i: usize,
        view: &OpforgeTensor,
    ) -> NonNull<OpforgeTensor> {
        store.put(i, view).unwrap_or_else(|| self.spill(view))
    }

    /// A boxed copy of `view`, freed with the context.
    fn spill(&self, view: &OpforgeTensor) -> NonNull<OpforgeTensor> {
        let b = Box::new(*view);
        let p = NonNull::from(&*b);
        // The box's contents stay put when the Vec grows.
        self.spill.borrow_mut().push(b);
        p
    }
}

impl<'a> OpKernelContext<'a> {
    fn note(&self, name: &str) {
        note_missing(&self.missing, self.host, name);
    }

    /// The op's name.
    pub fn op_name(&self) -> String {
        query!(self, kernel.op_name, String::new(), |f| {
            // SAFETY: the compute's ctx (R7); the string is copied at once.
            String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned()
        })
    }
    /// The node's name.
    pub fn node_name(&self) -> String {
        query!(self, kernel.node_name, String::new(), |f| {
            // SAFETY: as `op_name`.
            String::from_utf8_lossy(unsafe { f(self.raw).as_bytes() }).into_owned()
        })
    }
    /// The number of flat inputs.
    #[inline]
    pub fn num_inputs(&self) -> usize {
        let n = self.n_inputs.get();
        if n != usize::MAX {
            return n;
        }
        // SAFETY: the compute's ctx (R7).
        let n = query!(self, kernel.num_inputs, 0, |f| unsafe { f(self.raw) });
        if self.host.kernel.num_inputs.is_some() && n != usize::MAX {
            self.n_inputs.set(n);
        }
        n
    }
    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        if self.premade.is_some() {
            return self.premade.num_outputs;
        }
        // SAFETY: the compute's ctx (R7).
        query!(self, kernel.num_outputs, 0, |f| unsafe { f(self.raw) })
    }
    /// The dtype of input `i`.
    pub fn input_dtype(&self, i: usize) -> DataType {
        // SAFETY: the compute's ctx (R7); bad indices answered by the host.
        DataType(query!(self, kernel.input_dtype, 0, |f| unsafe {
            f(self.raw, i)
        }))
    }
    /// The dtype output `i` must have.
    pub fn output_type(&self, i: usize) -> DataType {
        // SAFETY: as `input_dtype`.
        DataType(query!(self, kernel.output_dtype, 0, |f| unsafe {
            f(self.raw, i)
        }))
    }
    arg_ranges!(kernel, "the ");

    /// A read-only view of input `i`.
    #[inline]
    pub fn input(&self, i: usize) -> Result<Tensor<'_>> {
        match self.premade_input(i).or_else(|| self.in_views.get(i)) {
            Some(view) => Ok(Tensor::from_ptr(view)),
            None => self.input_asked(i),
        }
    }

    /// [`input`](Self::input) asked of the host (the 1.0 entry, or an
    /// input without a premade view).
    #[inline(never)]
    fn input_asked(&self, i: usize) -> Result<Tensor<'_>> {
        let f = slot!(self.host, kernel.input)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `view` is an
        // out-struct with its struct_size set.
        let code = unsafe { f(self.raw, i, &mut view, self.status) };
        self.host.check(code, self.status)?;
        Ok(Tensor::from_ptr(self.keep(&self.in_views, i, &view)))
    }

    /// The premade view of input `i` (1.1 entry), unless dead or one the
    /// host could not lend.
    #[inline]
    fn premade_input(&self, i: usize) -> Option<NonNull<OpforgeTensor>> {
        if self.in_dead.get() & bit(i) != 0 || i >= 64 {
            return None;
        }
        self.premade.input(i)
    }

    /// The premade view of output `o` (1.1 entry), unless the kernel set
    /// the output again, or the host did not set it.
    #[inline]
    fn premade_output(&self, o: usize) -> Option<NonNull<OpforgeTensor>> {
        if self.out_reset.get() & bit(o) != 0 || o >= 64 {
            return None;
        }
        self.premade.output(o)
    }

    /// Forgets the view kept of input `i` (forwarded or moved: R7).
    fn drop_input_view(&self, i: usize) {
        self.in_views.forget(i);
        self.in_dead.set(self.in_dead.get() | bit(i));
    }

    /// The input whose buffer the declared output `o` took over before
    /// compute started ([`output_like_forwarding`]), while output `o` is
    /// still that tensor (the kernel did not set it again). Always `None`
    /// on a 1.0 host, which the SDK never asks to forward.
    ///
    /// [`output_like_forwarding`]: crate::KernelDefBuilder::output_like_forwarding
    #[inline]
    pub fn forwarded_from(&self, o: usize) -> Option<usize> {
        if self.out_reset.get() & bit(o) != 0 || o >= 64 {
            return None;
        }
        self.premade.forwarded_from(o)
    }

    /// Output `o` is about to be used: the input it took over, if any, is
    /// its memory now (its view dies, R7).
    #[inline]
    fn touch_output(&self, o: usize) {
        if let Some(j) = self.forwarded_from(o) {
            if self.in_dead.get() & bit(j) == 0 {
                self.drop_input_view(j);
            }
        }
    }

    /// Output `o` is about to be set again: its input (if forwarded) is
    /// dead, and its premade and kept views are gone.
    fn reset_output(&self, o: usize) {
        self.touch_output(o);
        self.out_reset.set(self.out_reset.get() | bit(o));
        self.out_views.forget(o);
    }

    /// A repeated `forward_input_or_allocate_output` of a preset output
    /// `o` of `dims`, answered with the output as set, once (the first
    /// call of a kernel written before `output_like`, or of one that calls
    /// it anyway). `None`: ask the host.
    fn claim_preset(&self, candidates: &[usize], o: usize, dims: &[i64]) -> Option<Option<usize>> {
        let b = bit(o);
        if b == 0 || (self.preset.get() & !self.out_reset.get() & !self.out_claimed.get()) & b == 0
        {
            return None;
        }
        let view = self.premade_output(o).or_else(|| self.out_views.get(o))?;
        if dims_of(view_ref(view)) != dims {
            return None;
        }
        let from = self.forwarded_from(o);
        if from.is_some_and(|j| !candidates.contains(&j)) {
            return None;
        }
        self.out_claimed.set(self.out_claimed.get() | b);
        if let Some(j) = from {
            self.drop_input_view(j);
        }
        Some(from)
    }

    /// The 1.0 entry's stand-in for what a 1.1 host does before
    /// compute_views: allocates every declared output (never forwarding,
    /// so every input stays readable) and keeps its view.
    pub(crate) fn preset_declared_outputs(&mut self) -> Result<()> {
        for l in self.def.def.output_likes() {
            let dims = self.input(l.input)?.dims();
            let view = self.allocate_output_raw(l.output, dims)?;
            self.out_views.forget(l.output);
            self.keep(&self.out_views, l.output, &view);
            self.preset.set(self.preset.get() | bit(l.output));
        }
        Ok(())
    }

    /// The views of the inputs of argument `name` (a list input).
    pub fn input_list(&self, name: &str) -> Result<Vec<Tensor<'_>>> {
        self.input_range(name)?.map(|i| self.input(i)).collect()
    }

    /// Allocates output `i` with `dims` (contents unspecified) and returns
    /// its writable view.
    pub fn allocate_output(&mut self, i: usize, dims: &[i64]) -> Result<TensorMut<'_>> {
        self.reset_output(i);
        let view = self.allocate_output_raw(i, dims)?;
        Ok(TensorMut::from_ptr(self.keep(&self.out_views, i, &view)))
    }

    /// The host's allocate_output.
    fn allocate_output_raw(&self, i: usize, dims: &[i64]) -> Result<OpforgeTensor> {
        let f = slot!(self.host, kernel.allocate_output)?;
        let rank = rank_of(dims)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `dims` is read during
        // the call; `view` is an out-struct.
        let code = unsafe { f(self.raw, i, dims.as_ptr(), rank, &mut view, self.status) };
        self.host.check(code, self.status)?;
        Ok(view)
    }

    /// Reuses the buffer of the first of the `candidates` inputs that can
    /// become output `i` of `dims` (compute in place then), else allocates;
    /// returns the forwarded input's index. Read the output through
    /// [`output_mut`](Self::output_mut) afterwards; a forwarded input's view
    /// is gone.
    ///
    /// An output declared with
    /// [`output_like`](crate::KernelDefBuilder::output_like) is set when
    /// compute starts: the first such call for it with the same dims (and,
    /// if it took over an input, that input among the candidates) answers
    /// with the output as set, without a host call.
    pub fn forward_input_or_allocate_output(
        &mut self,
        candidates: &[usize],
        i: usize,
        dims: &[i64],
    ) -> Result<Option<usize>> {
        if let Some(from) = self.claim_preset(candidates, i, dims) {
            return Ok(from);
        }
        let f = slot!(self.host, kernel.forward_input_or_allocate_output)?;
        let rank = rank_of(dims)?;
        let mut view = new_view();
        let mut from: i64 = OPFORGE_NOT_FORWARDED;
        self.reset_output(i);
        // SAFETY: the compute's ctx and status (R7); the arrays are read
        // during the call; the out-pointers are locals.
        let code = unsafe {
            f(
                self.raw,
                candidates.as_ptr(),
                candidates.len(),
                i,
                dims.as_ptr(),
                rank,
                &mut from,
                &mut view,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        let from = usize::try_from(from).ok();
        if let Some(c) = from {
            self.drop_input_view(c);
        }
        self.keep(&self.out_views, i, &view);
        Ok(from)
    }

    /// [`forward_input_or_allocate_output`](Self::forward_input_or_allocate_output)
    /// with the dims of input `like` (the elementwise case, as
    /// opforge-core's `forward_input_or_allocate_output_like`), without
    /// the caller copying them.
    pub fn forward_input_or_allocate_output_like(
        &mut self,
        candidates: &[usize],
        i: usize,
        like: usize,
    ) -> Result<Option<usize>> {
        let view = self.input(like)?.view;
        // The host reads the dims before it forwards anything (the view's
        // dims are host memory valid until then).
        self.forward_input_or_allocate_output(candidates, i, dims_of(view_ref(view)))
    }

    /// The writable view of output `i`, once it is set.
    #[inline]
    pub fn output_mut(&mut self, i: usize) -> Result<TensorMut<'_>> {
        Ok(TensorMut::from_ptr(self.output_view(i)?))
    }

    /// Where output `i`'s view is: premade, kept or asked of the host.
    #[inline]
    fn output_view(&self, i: usize) -> Result<NonNull<OpforgeTensor>> {
        self.touch_output(i);
        match self.premade_output(i).or_else(|| self.out_views.get(i)) {
            Some(view) => Ok(view),
            None => self.output_asked(i),
        }
    }

    /// [`output_view`](Self::output_view) asked of the host.
    #[inline(never)]
    fn output_asked(&self, i: usize) -> Result<NonNull<OpforgeTensor>> {
        let f = slot!(self.host, kernel.output)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `view` is an out-struct.
        let code = unsafe { f(self.raw, i, &mut view, self.status) };
        self.host.check(code, self.status)?;
        Ok(self.keep(&self.out_views, i, &view))
    }

    /// The views of every input together with output `i`'s (which must be
    /// set, and not be a forwarded input): read the inputs while writing
    /// the output.
    #[inline(always)]
    pub fn inputs_and_output(&mut self, i: usize) -> Result<(InputViews<'_>, TensorMut<'_>)> {
        let out = self.output_view(i)?;
        let out_data = view_ref(out).data;
        let n = self.num_inputs();
        let check = |j: usize, t: &Tensor<'_>| {
            let v = t.v();
            if !v.data.is_null() && v.data == out_data && v.byte_len > 0 {
                return Err(shares_memory(j, i));
            }
            Ok(())
        };
        let ins = if n > CACHED_VIEWS {
            let mut v = Vec::with_capacity(n);
            for j in 0..n {
                let t = self.input(j)?;
                check(j, &t)?;
                v.push(Tensor::from_ptr(t.view));
            }
            InputViews(Views::Heap(v))
        } else {
            // A Tensor of any lifetime has the same layout; the slice made
            // below has the lifetime of this `&mut self` borrow.
            let buf = self.input_buf.get().cast::<Tensor<'_>>();
            for j in 0..n {
                let t = self.input(j)?;
                check(j, &t)?;
                // SAFETY: `j < n <= CACHED_VIEWS`: within the buffer, which
                // only this method writes, under `&mut self`, while no slice
                // of an earlier call is alive (it borrowed `self`).
                unsafe { buf.add(j).write(Tensor::from_ptr(t.view)) };
            }
            // SAFETY: the first `n` (<= CACHED_VIEWS) elements were just
            // written; the slice borrows `self` for the lifetime of the
            // result.
            let views = unsafe { core::slice::from_raw_parts(buf.cast_const(), n) };
            InputViews(Views::Inline(views))
        };
        Ok((ins, TensorMut::from_ptr(out)))
    }

    /// Output `output` is input `input`, shared (no copy).
    pub fn set_output_from_input(&mut self, output: usize, input: usize) -> Result<()> {
        let f = slot!(self.host, kernel.set_output_from_input)?;
        self.reset_output(output);
        self.drop_input_view(input);
        // SAFETY: the compute's ctx and status (R7).
        let code = unsafe { f(self.raw, output, input, self.status) };
        self.host.check(code, self.status)
    }

    /// A scratch tensor, freed when the compute returns.
    pub fn allocate_temp(&self, dtype: DataType, dims: &[i64]) -> Result<TensorMut<'a>> {
        let f = slot!(self.host, kernel.allocate_temp)?;
        let rank = rank_of(dims)?;
        let mut view = new_view();
        // SAFETY: the compute's ctx and status (R7); `view` is an
        // out-struct. The temporary is fresh memory no other view reaches,
        // living until the compute returns (the `'a` of this context).
        let code = unsafe {
            f(
                self.raw,
                dtype.0,
                dims.as_ptr(),
                rank,
                &mut view,
                self.status,
            )
        };
        self.host.check(code, self.status)?;
        // The view is boxed in the context, which the SDK drops only after
        // the kernel's compute returned: as long as the temporary itself
        // (a `TensorMut<'a>` cannot leave the compute).
        Ok(TensorMut::from_ptr(self.spill(&view)))
    }

    /// Attr `name` of the node (prefer reading attrs once, in `create`).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        let f = slot!(self.host, kernel.attr)?;
        attr::read_attr(self.host, name, self.status, |n, v| {
            // SAFETY: the compute's ctx and status (R7); `v` an out-struct.
            unsafe { f(self.raw, n, v, self.status) }
        })
    }

    /// The threads `parallel_for` runs on (1: no parallelism).
    pub fn num_threads(&self) -> usize {
        // SAFETY: the compute's ctx (R7).
        query!(self, kernel.num_threads, 1, |f| unsafe { f(self.raw) }) as usize
    }

    /// The host's thread pool for this compute: take it before borrowing
    /// an output, to write the output from shards
    /// ([`ThreadPool::parallel_chunks_mut`]).
    pub fn thread_pool(&self) -> ThreadPool<'a> {
        ThreadPool {
            raw: self.raw,
            status: self.status,
            host: self.host,
            def: self.def,
        }
    }

    /// TensorFlow's `Shard` ([`ThreadPool::parallel_for`]).
    pub fn parallel_for<F>(&self, total: usize, cost_per_unit: u64, work: F) -> Result<()>
    where
        F: Fn(usize, usize) + Sync,
    {
        self.thread_pool().parallel_for(total, cost_per_unit, work)
    }

    /// What the host asks of output `i` (always [`OutputRequest::Write`]
    /// unless the kernel is registered with
    /// [`output_requests`](crate::KernelDefBuilder::output_requests)).
    pub fn output_request(&self, i: usize) -> OutputRequest {
        // SAFETY: the compute's ctx (R7).
        match query!(self, kernel.output_request, OPFORGE_REQ_WRITE, |f| unsafe {
            f(self.raw, i)
        }) {
            OPFORGE_REQ_NULL => OutputRequest::Null,
            OPFORGE_REQ_WRITE => OutputRequest::Write,
            OPFORGE_REQ_INPLACE => OutputRequest::InPlace,
            OPFORGE_REQ_ADD => OutputRequest::Add,
            other => OutputRequest::Other(other),
        }
    }

    /// Output `i` of `dims` wraps `data`, the plugin's own memory (no
    /// copy); the host drops the `Vec` (through the SDK) when the last
    /// tensor using it is gone.
    pub fn set_output_from_vec<T: Element>(
        &mut self,
        i: usize,
        dims: &[i64],
        data: Vec<T>,
    ) -> Result<()> {
        let f = slot!(self.host, kernel.set_output_foreign)?;
        self.reset_output(i);
        let n: i64 = dims.iter().product();
        if dims.iter().any(|&d| d < 0) || n != data.len() as i64 {
            return Err(Status::invalid_argument(format!(
                "set_output_from_vec: {} values for dims {:?}",
                data.len(),
                dims
            )));
        }
        let rank = rank_of(dims)?;
        let bytes = core::mem::size_of_val(data.as_slice()) as u64;
        let boxed = Box::new(data);
        let ptr = boxed.as_ptr() as *mut c_void;
        let user = Box::into_raw(boxed);
        let mut t = OpforgeForeignTensor::new();
        t.dtype = T::DTYPE.0;
        t.rank = rank;
        t.dims = dims.as_ptr();
        t.data = ptr;
        t.byte_len = bytes;
        t.release = Some(release_vec::<T>);
        t.release_user = user.cast();
        // SAFETY: the compute's ctx and status (R7); `t` describes the
        // Vec's elements, which stay put (the Vec is boxed and not touched)
        // until the release callback frees them.
        let code = unsafe { f(self.raw, i, &t, self.status) };
        if code != opforge_abi::OPFORGE_OK {
            // On failure the plugin still owns the memory (header).
            // SAFETY: `user` came from `Box::into_raw` above and the host
            // did not take it.
            drop(unsafe { Box::from_raw(user) });
        }
        self.host.check(code, self.status)
    }

    /// Sets the `DT_STRING` output `i` of `dims` to `elements` (copied).
    pub fn set_output_strings(&mut self, i: usize, dims: &[i64], elements: &[&[u8]]) -> Result<()> {
        let f = slot!(self.host, kernel.set_output_strings)?;
        self.reset_output(i);
        let rank = rank_of(dims)?;
        let strs: Vec<OpforgeStr> = elements.iter().map(|e| OpforgeStr::from_bytes(e)).collect();
        // SAFETY: the compute's ctx and status (R7); the arrays are read
        // (copied) during the call.
        let code = unsafe { f(self.raw, i, dims.as_ptr(), rank, strs.as_ptr(), self.status) };
        self.host.check(code, self.status)
    }
}

#[cold]
#[inline(never)]
pub(super) fn shares_memory(input: usize, output: usize) -> Status {
    Status::failed_precondition(format!(
        "input {input} shares its memory with output {output}: use output_mut"
    ))
}

/// What the host asks of an output (MXNet's `OpReqType`; the names are
/// opforge-core's `OutputRequest`'s). A 1.1 host asks a kernel registered
/// with [`output_requests`](crate::KernelDefBuilder::output_requests) for
/// each of them; every other kernel gets `Write`, and the host drops or
/// adds its output itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputRequest {
    /// MXNet's `kNullOp` (`OPFORGE_REQ_NULL`): not needed, leave it unset
    /// (a declared output is not set either).
    Null,
    /// MXNet's `kWriteTo` (`OPFORGE_REQ_WRITE`): set and write it (the
    /// only request of 1.0 hosts).
    Write,
    /// MXNet's `kWriteInplace` (`OPFORGE_REQ_INPLACE`): already bound to
    /// an input's memory (that input's view is gone, `forwarded_from`
    /// names it): write the result there.
    InPlace,
    /// MXNet's `kAddTo` (`OPFORGE_REQ_ADD`): already bound and holding
    /// values (`output_mut`): add the result into it.
    Add,
    /// A request of a newer ABI minor (its integer).
    Other(u32),
}

pub(super) unsafe extern "C" fn release_vec<T: Element>(_data: *mut c_void, user: *mut c_void) {
    // SAFETY: `user` is the `Box<Vec<T>>` of `set_output_from_vec`, released
    // exactly once by the host (header), so we own it again.
    let boxed = unsafe { Box::from_raw(user.cast::<Vec<T>>()) };
    // Dropping a Vec of `Element`s cannot panic, but nothing may unwind
    // into the host.
    let _ = crate::panic::catch(move || drop(boxed));
}
