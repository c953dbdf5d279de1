//! [`GradientContext`]: what a gradient function sees of one call, the
//! one form of gradient function in opforge (Rust code, op libraries'
//! callbacks and declarative gradients, and Python gradients all run
//! through it).

use super::{Ops, Sym, SymArg};
use crate::attrs::{AttrMap, FromAttrValue};
use crate::registry::Registry;
use crate::{DataType, Result, Status, Tensor};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::ops::Range;

/// The handle [`GradientContext::input`] and [`GradientContext::output`]
/// return for an index out of range: scope 0 is never handed out
/// ([`Sym::new_scope`] starts at 1), so every [`Ops`] refuses it.
const NO_VALUE: Sym = Sym {
    scope: 0,
    index: u32::MAX,
};

/// One call of a gradient function: the forward op (its name, attrs, flat
/// inputs and outputs), the gradients flowing into its outputs, and the
/// gradients of its inputs the function sets. It implements [`Ops`], so
/// the gradient is built from registered ops with the
/// [`OpsExt`](super::OpsExt) helpers (`ctx.mul(a, b)`, `ctx.op1(..)`,
/// `ctx.constant(..)`), and gradients of gradients work whenever those ops
/// are differentiable.
///
/// A gradient function reads [`grad`](Self::grad) (one-output ops) or
/// [`output_grad`](Self::output_grad), and calls
/// [`set_input_grad`](Self::set_input_grad) for each input a gradient
/// flows to; inputs left unset get none (integer indices, shapes).
///
/// ```
/// use opforge_core::autodiff::{GradientContext, Ops, OpsExt};
/// fn square_grad(ctx: &mut GradientContext<'_>) -> opforge_core::Result<()> {
///     let (g, x) = (ctx.grad()?, ctx.input(0));
///     let two = ctx.scalar(ctx.dtype(x), 2.0)?;
///     let two_x = ctx.mul(two, x)?;
///     let dx = ctx.mul(g, two_x)?;
///     ctx.set_input_grad(0, dx)
/// }
/// ```
pub struct GradientContext<'a> {
    ops: &'a mut dyn Ops,
    op: &'a str,
    attrs: &'a AttrMap,
    inputs: &'a [Sym],
    outputs: &'a [Sym],
    output_grads: &'a [Option<Sym>],
    input_grads: SmallVec<[Option<Sym>; 4]>,
    /// The first misuse seen by a method that cannot return an error
    /// ([`input`](Self::input) or [`output`](Self::output) out of range):
    /// reported by the next call and by [`into_input_grads`](Self::into_input_grads).
    misuse: RefCell<Option<Status>>,
}

impl<'a> GradientContext<'a> {
    /// The context for differentiating op `op` (a registered op of
    /// `ops.registry()`) with node attrs `attrs`, flat `inputs` and
    /// `outputs`, given the gradients of its outputs (`None` where none
    /// flows; one per output). [`backprop`](super::backprop) makes one per
    /// call; an adapter that runs a gradient function on its own makes one
    /// and reads the result with [`into_input_grads`](Self::into_input_grads).
    pub fn new(
        ops: &'a mut dyn Ops,
        op: &'a str,
        attrs: &'a AttrMap,
        inputs: &'a [Sym],
        outputs: &'a [Sym],
        output_grads: &'a [Option<Sym>],
    ) -> GradientContext<'a> {
        GradientContext {
            ops,
            op,
            attrs,
            inputs,
            outputs,
            output_grads,
            input_grads: smallvec::smallvec![None; inputs.len()],
            misuse: RefCell::new(None),
        }
    }

    /// The forward op's name.
    pub fn op_name(&self) -> &'a str {
        self.op
    }

    /// Attr `name` of the forward node as a `T` (`InvalidArgument` naming
    /// the op when it is missing or of another type).
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        crate::attrs::get_attr(self.op, self.attrs, name)
    }

    /// Every attr of the forward node (given, inferred and defaulted).
    pub fn attrs(&self) -> &'a AttrMap {
        self.attrs
    }

    /// The forward op's number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The forward op's flat input `i`. Out of range, a handle every call
    /// refuses; the gradient then fails with `InvalidArgument` naming the
    /// index and the count.
    pub fn input(&self, i: usize) -> Sym {
        self.value(self.inputs, i, "input")
    }

    /// The forward op's flat inputs.
    pub fn inputs(&self) -> &'a [Sym] {
        self.inputs
    }

    /// The forward op's number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The forward op's flat output `i` (out of range: as [`input`](Self::input)).
    pub fn output(&self, i: usize) -> Sym {
        self.value(self.outputs, i, "output")
    }

    /// The forward op's flat outputs.
    pub fn outputs(&self) -> &'a [Sym] {
        self.outputs
    }

    fn value(&self, values: &[Sym], i: usize, kind: &str) -> Sym {
        if let Some(&s) = values.get(i) {
            return s;
        }
        self.note_misuse(Status::invalid_argument(format!(
            "{kind}({i}) is out of range: op '{}' has {} {kind}s here (flat indices; \
             {kind}_range(name) gives the indices of an argument)",
            self.op,
            values.len()
        )));
        NO_VALUE
    }

    fn note_misuse(&self, status: Status) {
        self.misuse.borrow_mut().get_or_insert(status);
    }

    fn check_misuse(&self) -> Result<()> {
        match &*self.misuse.borrow() {
            Some(status) => Err(status.clone()),
            None => Ok(()),
        }
    }

    /// The flat range of the forward op's input argument `name` (a list
    /// argument's from its `number_attr` or `type_list_attr`).
    pub fn input_range(&self, name: &str) -> Result<Range<usize>> {
        self.arg_range(name, false)
    }

    /// The flat range of the forward op's output argument `name`.
    pub fn output_range(&self, name: &str) -> Result<Range<usize>> {
        self.arg_range(name, true)
    }

    fn arg_range(&self, name: &str, output: bool) -> Result<Range<usize>> {
        let data = self.ops.registry().lookup(self.op)?;
        let def = &data.op_def;
        let (args, kind) = if output {
            (&def.output_arg, "output")
        } else {
            (&def.input_arg, "input")
        };
        let Some(k) = args.iter().position(|a| a.name == name) else {
            let names: Vec<&str> = args.iter().map(|a| a.name.as_str()).collect();
            return Err(Status::invalid_argument(format!(
                "op '{}' has no {kind} argument named '{name}' (its {kind}s: {}); use one of \
                 those names",
                self.op,
                names.join(", ")
            )));
        };
        let ranges = crate::attrs::arg_ranges(def, args, self.attrs).map_err(|e| {
            e.prepend(format!(
                "the range of {kind} argument '{name}' of op '{}': ",
                self.op
            ))
        })?;
        Ok(ranges[k].clone())
    }

    /// The gradient flowing into flat output `i` (`None` when none flows,
    /// or `i` is out of range).
    pub fn output_grad(&self, i: usize) -> Option<Sym> {
        self.output_grads.get(i).copied().flatten()
    }

    /// The gradient of the only output of a one-output op. Backprop calls a
    /// gradient function only when some output has a gradient, so for such
    /// an op it is always there. An op with another number of outputs gets
    /// `InvalidArgument`: read each with [`output_grad`](Self::output_grad).
    pub fn grad(&self) -> Result<Sym> {
        if self.outputs.len() != 1 {
            return Err(Status::invalid_argument(format!(
                "grad() is the gradient of a one-output op, and op '{}' has {} outputs: \
                 read each with output_grad(i)",
                self.op,
                self.outputs.len()
            )));
        }
        self.output_grad(0).ok_or_else(|| {
            Status::internal(format!(
                "no gradient flows into the output of op '{}' (backprop calls a gradient \
                 function only when one does)",
                self.op
            ))
        })
    }

    /// Sets the gradient of flat input `i`. Setting an input's gradient
    /// again adds to it (the contributions are summed with `AddN`, as
    /// backprop sums those of a value used twice). `InvalidArgument`
    /// naming the op and its number of inputs when `i` is out of range.
    pub fn set_input_grad(&mut self, i: usize, grad: Sym) -> Result<()> {
        self.check_misuse()?;
        let n = self.input_grads.len();
        let Some(slot) = self.input_grads.get(i).copied() else {
            return Err(Status::invalid_argument(format!(
                "set_input_grad({i}) is out of range: op '{}' has {n} inputs (flat indices \
                 0..{n}; input_range(name) gives the indices of an argument)",
                self.op
            )));
        };
        let total = match slot {
            None => grad,
            Some(earlier) => self.add_contributions(earlier, grad)?,
        };
        self.input_grads[i] = Some(total);
        Ok(())
    }

    fn add_contributions(&mut self, a: Sym, b: Sym) -> Result<Sym> {
        let mut outs = self
            .ops
            .call("AddN", &[SymArg::List(vec![a, b])], &AttrMap::new())?;
        outs.pop()
            .ok_or_else(|| Status::internal("AddN has no output"))
    }

    /// The gradients the function set, one per flat input (`None` where
    /// none was set); the first misuse of an index instead, if any.
    pub fn into_input_grads(self) -> Result<Vec<Option<Sym>>> {
        self.check_misuse()?;
        Ok(self.input_grads.into_vec())
    }
}

impl Ops for GradientContext<'_> {
    fn call(&mut self, op: &str, inputs: &[SymArg], attrs: &AttrMap) -> Result<Vec<Sym>> {
        self.check_misuse()?;
        self.ops.call(op, inputs, attrs)
    }

    fn dtype(&self, s: Sym) -> DataType {
        self.ops.dtype(s)
    }

    fn shape(&self, s: Sym) -> Option<Vec<i64>> {
        self.ops.shape(s)
    }

    fn constant(&mut self, t: Tensor) -> Result<Sym> {
        self.ops.constant(t)
    }

    fn registry(&self) -> &Registry {
        self.ops.registry()
    }

    fn value_of(&self, s: Sym) -> Option<&Tensor> {
        self.ops.value_of(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{backprop, Gradient, GradientFn, OpsExt, Record, AUTODIFF_OPS};
    use super::*;
    use crate::attrs::IntoAttrValue;
    use crate::op_def::OpDefBuilder;
    use crate::Code;
    use std::sync::Arc;

    /// An `Ops` that runs nothing: every call makes one fresh float value
    /// and is logged, so tests see what a gradient function called.
    struct Fake {
        scope: u32,
        len: u32,
        registry: Registry,
        calls: Vec<(String, Vec<SymArg>)>,
    }

    impl Fake {
        fn new() -> Fake {
            let registry = Registry::new();
            for op in AUTODIFF_OPS {
                registry
                    .register_op(OpDefBuilder::new(*op).input("x: float").output("y: float"))
                    .unwrap();
            }
            registry
                .register_op(
                    OpDefBuilder::new("GradTestConcat")
                        .attr("N: int >= 1")
                        .attr("T: type")
                        .input("values: N * T")
                        .input("axis: int32")
                        .output("output: T"),
                )
                .unwrap();
            registry
                .register_op(
                    OpDefBuilder::new("GradTestTwo")
                        .attr("Tin: list(type)")
                        .input("xs: Tin")
                        .input("y: float")
                        .output("a: float")
                        .output("b: float"),
                )
                .unwrap();
            Fake {
                scope: Sym::new_scope(),
                len: 0,
                registry,
                calls: Vec::new(),
            }
        }

        fn fresh(&mut self) -> Sym {
            self.len += 1;
            Sym::new(self.scope, self.len - 1)
        }

        fn syms(&mut self, n: usize) -> Vec<Sym> {
            (0..n).map(|_| self.fresh()).collect()
        }
    }

    impl Ops for Fake {
        fn call(&mut self, op: &str, inputs: &[SymArg], _: &AttrMap) -> Result<Vec<Sym>> {
            for arg in inputs {
                let list = match arg {
                    SymArg::One(s) => std::slice::from_ref(s),
                    SymArg::List(l) => l.as_slice(),
                };
                for s in list {
                    s.check(self.scope, self.len as usize, "fake")?;
                }
            }
            self.calls.push((op.to_string(), inputs.to_vec()));
            Ok(vec![self.fresh()])
        }
        fn dtype(&self, s: Sym) -> DataType {
            match s.check(self.scope, self.len as usize, "fake") {
                Ok(_) => DataType::Float,
                Err(_) => DataType::Invalid,
            }
        }
        fn shape(&self, _: Sym) -> Option<Vec<i64>> {
            None
        }
        fn constant(&mut self, _: Tensor) -> Result<Sym> {
            Ok(self.fresh())
        }
        fn registry(&self) -> &Registry {
            &self.registry
        }
    }

    fn concat_attrs(n: i64) -> AttrMap {
        let mut attrs = AttrMap::new();
        attrs.insert("N".into(), n.into_attr_value());
        attrs.insert("T".into(), DataType::Float.into_attr_value());
        attrs
    }

    /// One forward call: fresh inputs and outputs, a fresh gradient
    /// flowing into the last output.
    struct Call {
        op: &'static str,
        attrs: AttrMap,
        ins: Vec<Sym>,
        outs: Vec<Sym>,
        grads: Vec<Option<Sym>>,
    }

    impl Call {
        fn new(
            fake: &mut Fake,
            op: &'static str,
            attrs: AttrMap,
            n_in: usize,
            n_out: usize,
        ) -> Call {
            let (ins, outs) = (fake.syms(n_in), fake.syms(n_out));
            let mut grads = vec![None; n_out];
            grads[n_out - 1] = Some(fake.fresh());
            Call {
                op,
                attrs,
                ins,
                outs,
                grads,
            }
        }

        fn g(&self) -> Sym {
            self.grads.iter().flatten().copied().next().unwrap()
        }

        fn context<'a>(&'a self, fake: &'a mut Fake) -> GradientContext<'a> {
            GradientContext::new(
                fake,
                self.op,
                &self.attrs,
                &self.ins,
                &self.outs,
                &self.grads,
            )
        }
    }

    #[test]
    fn ranges_of_list_arguments() {
        let mut fake = Fake::new();
        let c = Call::new(&mut fake, "GradTestConcat", concat_attrs(3), 4, 1);
        let ctx = c.context(&mut fake);
        assert_eq!(ctx.input_range("values").unwrap(), 0..3);
        assert_eq!(ctx.input_range("axis").unwrap(), 3..4);
        assert_eq!(ctx.output_range("output").unwrap(), 0..1);
        assert_eq!(ctx.get_attr::<i64>("N").unwrap(), 3);
        assert_eq!((ctx.num_inputs(), ctx.num_outputs()), (4, 1));
        assert_eq!((ctx.input(3), ctx.output(0)), (c.ins[3], c.outs[0]));
        let err = ctx.input_range("value").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        let msg = err.message();
        assert!(
            msg.contains("op 'GradTestConcat' has no input argument named 'value'")
                && msg.contains("values, axis"),
            "{msg}"
        );
        let err = ctx.output_range("values").unwrap_err();
        assert!(
            err.message().contains("no output argument named 'values'"),
            "{err}"
        );

        // A node without its list's length attr: the argument and op named.
        let mut attrs = concat_attrs(1);
        attrs.remove("N");
        let c = Call::new(&mut fake, "GradTestConcat", attrs, 4, 1);
        let err = c.context(&mut fake).input_range("axis").unwrap_err();
        let msg = err.message();
        assert!(
            msg.starts_with("the range of input argument 'axis' of op 'GradTestConcat': ")
                && msg.contains("'N'"),
            "{msg}"
        );
    }

    #[test]
    fn ranges_of_type_lists_and_several_outputs() {
        let mut fake = Fake::new();
        let mut attrs = AttrMap::new();
        let tin = vec![DataType::Float, DataType::Int32];
        attrs.insert("Tin".into(), tin.into_attr_value());
        let c = Call::new(&mut fake, "GradTestTwo", attrs, 3, 2);
        let ctx = c.context(&mut fake);
        assert_eq!(ctx.input_range("xs").unwrap(), 0..2);
        assert_eq!(ctx.input_range("y").unwrap(), 2..3);
        assert_eq!(ctx.output_range("b").unwrap(), 1..2);
        assert_eq!(ctx.output_grad(0), None);
        assert_eq!(ctx.output_grad(1), Some(c.g()));
        assert_eq!(ctx.output_grad(2), None);
        let err = ctx.grad().unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        let msg = err.message();
        assert!(
            msg.contains("op 'GradTestTwo' has 2 outputs") && msg.contains("output_grad(i)"),
            "{msg}"
        );
    }

    #[test]
    fn grad_of_a_one_output_op() {
        let mut fake = Fake::new();
        let mut c = Call::new(&mut fake, "GradTestConcat", concat_attrs(1), 2, 1);
        assert_eq!(c.context(&mut fake).grad().unwrap(), c.g());
        // Not reachable from backprop (it calls only when a gradient
        // flows), but an adapter may: Internal, not a panic.
        c.grads = vec![None];
        let err = c.context(&mut fake).grad().unwrap_err();
        assert_eq!(err.code(), Code::Internal);
    }

    #[test]
    fn set_input_grad_range_and_sums() {
        let mut fake = Fake::new();
        let c = Call::new(&mut fake, "GradTestConcat", concat_attrs(2), 3, 1);
        let (g, h) = (c.g(), fake.fresh());
        let mut ctx = c.context(&mut fake);
        let err = ctx.set_input_grad(3, g).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        let msg = err.message();
        assert!(
            msg.contains("set_input_grad(3)") && msg.contains("op 'GradTestConcat' has 3 inputs"),
            "{msg}"
        );
        ctx.set_input_grad(0, g).unwrap();
        ctx.set_input_grad(1, g).unwrap();
        ctx.set_input_grad(1, h).unwrap();
        let grads = ctx.into_input_grads().unwrap();
        assert_eq!(fake.calls.len(), 1);
        assert_eq!(fake.calls[0].0, "AddN");
        assert_eq!(fake.calls[0].1, [SymArg::List(vec![g, h])]);
        let sum = Sym::new(fake.scope, fake.len - 1);
        assert_eq!(grads, [Some(g), Some(sum), None]);
    }

    #[test]
    fn an_index_out_of_range_fails_the_gradient() {
        let mut fake = Fake::new();
        let c = Call::new(&mut fake, "GradTestConcat", concat_attrs(1), 2, 1);
        let mut ctx = c.context(&mut fake);
        let bad = ctx.input(2);
        assert_eq!(ctx.dtype(bad), DataType::Invalid);
        let err = ctx.op1("Neg", &[bad], &[]).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        let msg = err.message();
        assert!(
            msg.contains("input(2) is out of range: op 'GradTestConcat' has 2 inputs"),
            "{msg}"
        );
        // A function that goes on and returns Ok still fails.
        let _ = ctx.output(1);
        let err = ctx.into_input_grads().unwrap_err();
        assert!(err.message().contains("input(2) is out of range"), "{err}");
        assert!(fake.calls.is_empty());
    }

    /// Backprop through one `GradTestConcat` whose gradient is `f`.
    fn grad_of(f: GradientFn) -> (Fake, Result<Vec<Option<Sym>>>) {
        let mut fake = Fake::new();
        fake.registry
            .set_attr::<Gradient>("GradTestConcat", Arc::new(f))
            .unwrap();
        let (ins, out, seed) = (fake.syms(2), fake.fresh(), fake.fresh());
        let records = [Record {
            op: "GradTestConcat".into(),
            attrs: concat_attrs(1),
            inputs: ins.iter().copied().collect(),
            outputs: [out].into_iter().collect(),
        }];
        let result = backprop(&mut fake, &records, &[out], &[Some(seed)], &ins);
        (fake, result)
    }

    #[test]
    fn backprop_runs_the_context_form() {
        let (fake, grads) = grad_of(GradientFn::from_fn(|ctx| {
            let minus = ctx.op1("Neg", &[ctx.grad()?], &[])?;
            ctx.set_input_grad(0, minus)
        }));
        let grads = grads.unwrap();
        let neg = Sym::new(fake.scope, fake.len - 1);
        assert_eq!(grads, [Some(neg), None]);
        assert_eq!(fake.calls.len(), 1);
    }

    #[test]
    fn errors_inside_a_gradient_are_prefixed() {
        let err = grad_of(GradientFn::from_fn(|_| {
            Err(Status::invalid_argument("a bad input"))
        }))
        .1
        .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(
            err.message(),
            "In the gradient of GradTestConcat: a bad input"
        );
        let err = grad_of(GradientFn::from_fn(|ctx| {
            ctx.set_input_grad(7, ctx.input(0))
        }))
        .1
        .unwrap_err();
        let msg = err.message();
        assert!(
            msg.starts_with("In the gradient of GradTestConcat: set_input_grad(7) is out of range"),
            "{msg}"
        );
        let err = grad_of(GradientFn::from_fn(|ctx| {
            let _ = ctx.output(3);
            Ok(())
        }))
        .1
        .unwrap_err();
        let msg = err.message();
        assert!(
            msg.starts_with("In the gradient of GradTestConcat: output(3) is out of range"),
            "{msg}"
        );
    }
}
