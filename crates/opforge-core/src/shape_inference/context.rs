//! [`InferenceContext`]: what a shape function sees and uses. This file
//! holds the handles, the context's arena of shapes and dims, its inputs,
//! outputs and attrs, and reading and making shapes; `context/ops.rs` holds
//! the operations on shapes (checks that refine, merges, dim arithmetic,
//! shapes from shape tensors).

use crate::attrs::{get_attr, AttrMap, FromAttrValue};
use crate::dtype::DataType;
use crate::op_def::summarize_attr_value;
use crate::proto::{OpDef, TensorShapeProto};
use crate::{Result, Status, Tensor};

mod ops;

/// A shape: a handle into its context. Two handles are the same shape only
/// if they are equal (`a == b` is identity, not equal contents).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeHandle(usize);

/// A dimension: a handle into its context, compared by identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DimensionHandle(usize);

impl ShapeHandle {
    /// The handle's position in its context's arena (for bridges that pass
    /// handles across an FFI boundary as integers).
    pub fn index(self) -> usize {
        self.0
    }

    /// A handle from [`index`](Self::index). It may not name a shape of any
    /// context: check it with [`InferenceContext::checked_shape`] before use.
    pub fn from_index(index: usize) -> ShapeHandle {
        ShapeHandle(index)
    }
}

impl DimensionHandle {
    /// The handle's position in its context's arena (see [`ShapeHandle::index`]).
    pub fn index(self) -> usize {
        self.0
    }

    /// A handle from [`index`](Self::index); check it with
    /// [`InferenceContext::checked_dim`] before use.
    pub fn from_index(index: usize) -> DimensionHandle {
        DimensionHandle(index)
    }
}

/// A dimension or a constant size, for the dim arithmetic helpers
/// (`ctx.add(d, 1)`, `ctx.multiply(d, other_dim)`); `-1` is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimOrConst {
    /// An existing dimension.
    Dim(DimensionHandle),
    /// A constant size (`-1` for unknown).
    Const(i64),
}

impl From<DimensionHandle> for DimOrConst {
    fn from(d: DimensionHandle) -> Self {
        DimOrConst::Dim(d)
    }
}

impl From<i64> for DimOrConst {
    fn from(v: i64) -> Self {
        DimOrConst::Const(v)
    }
}

/// The shape and dtype of a value a resource (or variant) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeAndType {
    /// The held value's shape.
    pub shape: ShapeHandle,
    /// The held value's dtype.
    pub dtype: DataType,
}

/// The value of an unknown dimension.
pub const UNKNOWN_DIM: i64 = -1;

/// The state of one shape-function call: the node, its input shapes (and
/// constant input values, where known), and the outputs being set.
pub struct InferenceContext {
    op_def: OpDef,
    node_name: String,
    node_op: String,
    attrs: AttrMap,
    inputs: Vec<ShapeHandle>,
    input_tensors: Vec<Option<Tensor>>,
    input_tensors_as_shapes: Vec<Option<ShapeHandle>>,
    outputs: Vec<Option<ShapeHandle>>,
    input_handle_data: Vec<Option<Vec<ShapeAndType>>>,
    output_handle_data: Vec<Option<Vec<ShapeAndType>>>,
    shapes: Vec<Option<Vec<DimensionHandle>>>,
    dims: Vec<i64>,
    /// What [`input`](Self::input) answers for an input the node does not
    /// have: an unknown shape (the read is recorded in `bad_access`).
    missing_input: ShapeHandle,
    /// The first read or write of an input or output the node does not
    /// have, reported by [`check_accesses`](Self::check_accesses).
    bad_access: std::cell::Cell<Option<(Access, usize)>>,
}

/// What a shape function reached for outside the node's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Input,
    Output,
    Rank,
}

/// The highest rank a shape may have: TensorFlow's `TensorShape` maximum,
/// 254 dimensions ([`TensorShape::MAX_DIMENSIONS`](crate::TensorShape::MAX_DIMENSIONS),
/// which every tensor keeps too).
pub const MAX_RANK: usize = crate::TensorShape::MAX_DIMENSIONS;

impl InferenceContext {
    /// A context for a node of `op_def` with `attrs`, whose inputs have
    /// `input_shapes` (`None` for an unknown rank, `-1` for unknown dims).
    /// `num_outputs` is the node's number of flat outputs.
    pub fn new(
        op_def: &OpDef,
        node_name: &str,
        attrs: &AttrMap,
        input_shapes: &[Option<Vec<i64>>],
        num_outputs: usize,
    ) -> InferenceContext {
        let mut ctx = InferenceContext {
            op_def: op_def.clone(),
            node_name: node_name.to_string(),
            node_op: op_def.name.clone(),
            attrs: attrs.clone(),
            inputs: Vec::new(),
            input_tensors: vec![None; input_shapes.len()],
            input_tensors_as_shapes: vec![None; input_shapes.len()],
            outputs: vec![None; num_outputs],
            input_handle_data: vec![None; input_shapes.len()],
            output_handle_data: vec![None; num_outputs],
            shapes: Vec::new(),
            dims: Vec::new(),
            missing_input: ShapeHandle(0),
            bad_access: std::cell::Cell::new(None),
        };
        ctx.missing_input = ctx.make_partial_shape(None);
        ctx.inputs = input_shapes
            .iter()
            .map(|s| ctx.make_partial_shape(s.as_deref()))
            .collect();
        ctx
    }

    /// Gives the value of constant input `i` (so shape functions can read
    /// e.g. `Reshape`'s target shape).
    pub fn set_input_tensor(&mut self, i: usize, t: Tensor) {
        match self.input_tensors.get_mut(i) {
            Some(slot) => *slot = Some(t),
            None => self.record(Access::Input, i),
        }
    }

    /// Gives what is known of the *value* of input `i` read as a shape
    /// (e.g. the output of a `Shape` op upstream).
    pub fn set_input_tensor_as_shape(&mut self, i: usize, s: ShapeHandle) {
        match self.input_tensors_as_shapes.get_mut(i) {
            Some(slot) => *slot = Some(s),
            None => self.record(Access::Input, i),
        }
    }

    /// Sets the op name the node summary of error messages shows (TensorFlow's
    /// bare test nodes have none).
    pub fn set_node_op(&mut self, op: &str) {
        self.node_op = op.to_string();
    }

    /// Gives the shapes and dtypes held by resource input `i`.
    pub fn set_input_handle_shapes_and_types(&mut self, i: usize, data: Vec<ShapeAndType>) {
        match self.input_handle_data.get_mut(i) {
            Some(slot) => *slot = Some(data),
            None => self.record(Access::Input, i),
        }
    }

    // ---- inputs, outputs, attrs ----

    /// The op's definition.
    pub fn op_def(&self) -> &OpDef {
        &self.op_def
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The number of flat inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The number of flat outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The shape of input `i`.
    ///
    /// A node without input `i` (fewer shapes given than the op has
    /// inputs) gets an unknown shape here, and the run of the shape function
    /// fails with InvalidArgument (see [`check_accesses`](Self::check_accesses)).
    pub fn input(&self, i: usize) -> ShapeHandle {
        match self.inputs.get(i) {
            Some(&s) => s,
            None => {
                self.record(Access::Input, i);
                self.missing_input
            }
        }
    }

    /// Replaces the shape of input `i` (shape functions that refine inputs).
    pub fn set_input(&mut self, i: usize, s: ShapeHandle) {
        match self.inputs.get_mut(i) {
            Some(slot) => *slot = s,
            None => self.record(Access::Input, i),
        }
    }

    /// Sets the shape of output `i`.
    pub fn set_output(&mut self, i: usize, s: ShapeHandle) {
        match self.outputs.get_mut(i) {
            Some(slot) => *slot = Some(s),
            None => self.record(Access::Output, i),
        }
    }

    /// The shape of output `i`, if set.
    pub fn output(&self, i: usize) -> Option<ShapeHandle> {
        self.outputs.get(i).copied().flatten()
    }

    /// Notes the first access to an input or output the node does not have.
    fn record(&self, what: Access, i: usize) {
        if self.bad_access.get().is_none() {
            self.bad_access.set(Some((what, i)));
        }
    }

    /// InvalidArgument if the shape function reached for an input or output
    /// the node does not have (the runtimes call this after every shape
    /// function, so too few input shapes is an error, never a crash).
    pub fn check_accesses(&self) -> Result<()> {
        let Some((what, i)) = self.bad_access.get() else {
            return Ok(());
        };
        let (kind, have) = match what {
            Access::Input => ("input", self.inputs.len()),
            Access::Output => ("output", self.outputs.len()),
            Access::Rank => {
                return Err(Status::invalid_argument(format!(
                    "The shape function of {} asked for a shape of rank {i}; a shape has at \
                     most {MAX_RANK} dimensions",
                    self.op_def.name
                )))
            }
        };
        Err(Status::invalid_argument(format!(
            "The shape function of {} read {kind} {i}, but the node has only {have} {kind}s; \
             give one shape per {kind} of the op",
            self.op_def.name
        )))
    }

    /// The value of constant input `i`, if known.
    pub fn input_tensor(&self, i: usize) -> Option<&Tensor> {
        self.input_tensors.get(i).and_then(Option::as_ref)
    }

    /// Attr `name` as a `T`.
    pub fn get_attr<T: FromAttrValue>(&self, name: &str) -> Result<T> {
        match self.attrs.get(name) {
            Some(v) => {
                // TensorFlow's message for an attr of another type.
                crate::op_def::attr_value_has_type(v, T::ATTR_TYPE)?;
                get_attr(&self.op_def.name, &self.attrs, name)
            }
            None => Err(Status::not_found(format!(
                "No attr named '{name}' in NodeDef:\n\t [[{{{{node {}}}}}]]",
                self.node_name
            ))),
        }
    }

    /// Whether attr `name` is set.
    pub fn has_attr(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }

    /// The node's attrs.
    pub fn attrs(&self) -> &AttrMap {
        &self.attrs
    }

    /// The shapes and dtypes held by resource input `i`, if known.
    pub fn input_handle_shapes_and_types(&self, i: usize) -> Option<&[ShapeAndType]> {
        self.input_handle_data.get(i).and_then(|d| d.as_deref())
    }

    /// Sets the shapes and dtypes held by resource output `i`.
    pub fn set_output_handle_shapes_and_types(&mut self, i: usize, data: Vec<ShapeAndType>) {
        match self.output_handle_data.get_mut(i) {
            Some(slot) => *slot = Some(data),
            None => self.record(Access::Output, i),
        }
    }

    /// The shapes and dtypes held by resource output `i`, if set.
    pub fn output_handle_shapes_and_types(&self, i: usize) -> Option<&[ShapeAndType]> {
        self.output_handle_data.get(i).and_then(|d| d.as_deref())
    }

    // ---- making shapes and dims ----

    fn new_dim(&mut self, value: i64) -> DimensionHandle {
        self.dims.push(value);
        DimensionHandle(self.dims.len() - 1)
    }

    /// Every shape of the context is made here. A known rank above
    /// [`MAX_RANK`] (a hostile count, a concatenation of long shapes) makes
    /// an unknown shape instead, and the run of the shape function fails
    /// with InvalidArgument ([`check_accesses`](Self::check_accesses)).
    fn new_shape(&mut self, dims: Option<Vec<DimensionHandle>>) -> ShapeHandle {
        let dims = match dims {
            Some(d) if d.len() > MAX_RANK => {
                self.record(Access::Rank, d.len());
                None
            }
            dims => dims,
        };
        self.shapes.push(dims);
        ShapeHandle(self.shapes.len() - 1)
    }

    /// A new dimension of `value` (`-1` = unknown); a `DimOrConst::Dim` is returned as it is.
    pub fn make_dim(&mut self, d: impl Into<DimOrConst>) -> DimensionHandle {
        match d.into() {
            DimOrConst::Dim(h) => h,
            DimOrConst::Const(v) => self.new_dim(if v < 0 { UNKNOWN_DIM } else { v }),
        }
    }

    /// A new dimension of unknown size.
    pub fn unknown_dim(&mut self) -> DimensionHandle {
        self.new_dim(UNKNOWN_DIM)
    }

    /// A new shape of these dims.
    pub fn make_shape(&mut self, dims: &[DimOrConst]) -> ShapeHandle {
        let dims: Vec<DimensionHandle> = dims.iter().map(|&d| self.make_dim(d)).collect();
        self.new_shape(Some(dims))
    }

    /// A new shape of existing dims.
    pub fn make_shape_from_dims(&mut self, dims: Vec<DimensionHandle>) -> ShapeHandle {
        self.new_shape(Some(dims))
    }

    /// A new shape from sizes (`None` = unknown rank, `-1` = unknown dim).
    pub fn make_partial_shape(&mut self, dims: Option<&[i64]>) -> ShapeHandle {
        match dims {
            None => self.unknown_shape(),
            Some(d) => {
                let dims: Vec<DimOrConst> = d.iter().map(|&v| DimOrConst::Const(v)).collect();
                self.make_shape(&dims)
            }
        }
    }

    /// A new shape from a `TensorShapeProto`.
    pub fn make_shape_from_proto(&mut self, p: &TensorShapeProto) -> Result<ShapeHandle> {
        if p.unknown_rank {
            if !p.dim.is_empty() {
                return Err(Status::invalid_argument(
                    "An unknown rank shape has dimensions",
                ));
            }
            return Ok(self.unknown_shape());
        }
        if p.dim.len() > MAX_RANK {
            return Err(Status::invalid_argument(format!(
                "Shape {} has too many dimensions",
                proto_shape_string(p)
            )));
        }
        // As TensorFlow's PartialTensorShape::IsValidShape: the element
        // count of the dims before the first unknown one must fit int64.
        let mut count: Option<i64> = Some(1);
        for d in &p.dim {
            if d.size < -1 {
                return Err(Status::invalid_argument(format!(
                    "Shape {} has dimensions with values below -1 (where -1 means unknown)",
                    proto_shape_string(p)
                )));
            }
            if d.size == -1 {
                count = None;
            } else if let Some(c) = count {
                count = Some(c.checked_mul(d.size).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "Shape {} is too large (more than 2**63 - 1 entries)",
                        proto_shape_string(p)
                    ))
                })?);
            }
        }
        let dims: Vec<i64> = p.dim.iter().map(|d| d.size).collect();
        Ok(self.make_partial_shape(Some(&dims)))
    }

    /// A new shape of unknown rank.
    pub fn unknown_shape(&mut self) -> ShapeHandle {
        self.new_shape(None)
    }

    /// A new shape of rank `rank` with unknown dims.
    ///
    /// A rank above [`MAX_RANK`] (from hostile input: a shape tensor's
    /// length, a count) gives an unknown shape instead, and the run of the
    /// shape function fails with InvalidArgument
    /// ([`check_accesses`](Self::check_accesses)).
    pub fn unknown_shape_of_rank(&mut self, rank: usize) -> ShapeHandle {
        if rank > MAX_RANK {
            self.record(Access::Rank, rank);
            return self.unknown_shape();
        }
        let dims: Vec<DimensionHandle> = (0..rank).map(|_| self.unknown_dim()).collect();
        self.new_shape(Some(dims))
    }

    /// A new scalar shape.
    pub fn scalar(&mut self) -> ShapeHandle {
        self.new_shape(Some(Vec::new()))
    }

    /// A new vector shape.
    pub fn vector(&mut self, d: impl Into<DimOrConst>) -> ShapeHandle {
        self.make_shape(&[d.into()])
    }

    /// A new matrix shape.
    pub fn matrix(
        &mut self,
        rows: impl Into<DimOrConst>,
        cols: impl Into<DimOrConst>,
    ) -> ShapeHandle {
        self.make_shape(&[rows.into(), cols.into()])
    }

    // ---- reading shapes and dims ----

    /// `s` if it names a shape of this context, else `InvalidArgument`
    /// (a handle made by [`ShapeHandle::from_index`] from an untrusted
    /// integer).
    pub fn checked_shape(&self, s: ShapeHandle) -> Result<ShapeHandle> {
        if s.0 < self.shapes.len() {
            Ok(s)
        } else {
            Err(Status::invalid_argument(format!(
                "{}: shape handle {} is not a shape of this inference context (it holds {}); \
                 pass only handles this context returned during this call",
                self.node_name,
                s.0,
                self.shapes.len()
            )))
        }
    }

    /// `d` if it names a dimension of this context, else `InvalidArgument`.
    pub fn checked_dim(&self, d: DimensionHandle) -> Result<DimensionHandle> {
        if d.0 < self.dims.len() {
            Ok(d)
        } else {
            Err(Status::invalid_argument(format!(
                "{}: dimension handle {} is not a dimension of this inference context (it \
                 holds {}); pass only handles this context returned during this call",
                self.node_name,
                d.0,
                self.dims.len()
            )))
        }
    }

    /// The rank, if known.
    pub fn rank(&self, s: ShapeHandle) -> Option<usize> {
        self.shapes[s.0].as_ref().map(Vec::len)
    }

    /// Whether the rank is known.
    pub fn rank_known(&self, s: ShapeHandle) -> bool {
        self.shapes[s.0].is_some()
    }

    /// The dims of a shape of known rank.
    pub fn dims(&self, s: ShapeHandle) -> Option<&[DimensionHandle]> {
        self.shapes[s.0].as_deref()
    }

    /// Dim `idx` of `s` (negative counts from the end). On a shape of
    /// unknown rank, a new unknown dim. Panics if `idx` is out of range for
    /// a known rank (check the rank first, as TensorFlow requires).
    pub fn dim(&mut self, s: ShapeHandle, idx: i64) -> DimensionHandle {
        match &self.shapes[s.0] {
            None => self.unknown_dim(),
            Some(dims) => {
                let i = if idx < 0 {
                    dims.len() as i64 + idx
                } else {
                    idx
                };
                dims[i as usize]
            }
        }
    }

    /// The size of a dim, if known.
    pub fn value(&self, d: DimensionHandle) -> Option<i64> {
        let v = self.dims[d.0];
        (v >= 0).then_some(v)
    }

    /// The size of a dim, `-1` if unknown (TensorFlow's `Value`).
    pub fn raw_value(&self, d: DimensionHandle) -> i64 {
        self.dims[d.0]
    }

    fn const_value(&self, d: DimOrConst) -> i64 {
        match d {
            DimOrConst::Dim(h) => self.dims[h.0],
            DimOrConst::Const(v) => v,
        }
    }

    /// Whether every dim of `s` is known (and the rank is).
    pub fn fully_defined(&self, s: ShapeHandle) -> bool {
        self.shapes[s.0]
            .as_ref()
            .is_some_and(|d| d.iter().all(|h| self.dims[h.0] >= 0))
    }

    /// The number of elements of a fully defined shape.
    pub fn num_elements(&self, s: ShapeHandle) -> Option<i64> {
        let dims = self.shapes[s.0].as_ref()?;
        dims.iter().try_fold(1i64, |acc, h| {
            let v = self.dims[h.0];
            if v < 0 {
                None
            } else {
                acc.checked_mul(v)
            }
        })
    }

    /// The number of elements of `s` as a new dim (TensorFlow's
    /// `NumElements`): known when every dim is, or as soon as one is 0.
    pub fn num_elements_dim(&mut self, s: ShapeHandle) -> DimensionHandle {
        let Some(values) = self.shape_values(s) else {
            return self.unknown_dim();
        };
        if values.contains(&0) {
            return self.make_dim(0);
        }
        match self.num_elements(s) {
            Some(n) => self.make_dim(n),
            None => self.unknown_dim(),
        }
    }

    /// TensorFlow's `DebugString`: `?`, `[]`, `[1,?,3]`.
    pub fn debug_string(&self, s: ShapeHandle) -> String {
        match &self.shapes[s.0] {
            None => "?".into(),
            Some(dims) => {
                let parts: Vec<String> = dims.iter().map(|&d| self.dim_string(d)).collect();
                format!("[{}]", parts.join(","))
            }
        }
    }

    /// `?` or the size.
    pub fn dim_string(&self, d: DimensionHandle) -> String {
        match self.value(d) {
            Some(v) => v.to_string(),
            None => "?".into(),
        }
    }

    /// The sizes of a shape (`None` for an unknown rank, `-1` for unknown dims).
    pub fn shape_values(&self, s: ShapeHandle) -> Option<Vec<i64>> {
        self.shapes[s.0]
            .as_ref()
            .map(|dims| dims.iter().map(|d| self.dims[d.0]).collect())
    }

    /// The shape as a `TensorShapeProto`.
    pub fn shape_proto(&self, s: ShapeHandle) -> TensorShapeProto {
        match self.shape_values(s) {
            None => TensorShapeProto {
                unknown_rank: true,
                ..Default::default()
            },
            Some(v) => TensorShapeProto {
                dim: v
                    .into_iter()
                    .map(|size| crate::proto::tensor_shape_proto::Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
                unknown_rank: false,
            },
        }
    }

    // ---- error context ----

    /// `{{node NAME}} = OP[attrs](inputs)`, as TensorFlow's `SummarizeNodeDef`.
    pub fn summarize_node(&self, input_names: &[String]) -> String {
        let attrs: Vec<String> = self
            .attrs
            .iter()
            .map(|(k, v)| format!("{k}={}", summarize_attr_value(v)))
            .collect();
        format!(
            "{{{{node {}}}}} = {}[{}]({})",
            self.node_name,
            self.node_op,
            attrs.join(", "),
            input_names.join(", ")
        )
    }

    /// Appends TensorFlow's context to a shape function's error:
    /// ` for '{{node ...}} = ...' with input shapes: [1,2], ?.`
    pub fn annotate_error(&self, e: Status, input_names: &[String]) -> Status {
        let shapes: Vec<String> = self.inputs.iter().map(|&s| self.debug_string(s)).collect();
        e.append(format!(
            " for '{}' with input shapes: {}.",
            self.summarize_node(input_names),
            shapes.join(", ")
        ))
    }
}

impl std::fmt::Debug for InferenceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ins: Vec<String> = self.inputs.iter().map(|&s| self.debug_string(s)).collect();
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|o| o.map_or_else(|| "<unset>".to_string(), |s| self.debug_string(s)))
            .collect();
        write!(
            f,
            "InferenceContext({} {}: inputs {ins:?}, outputs {outs:?})",
            self.op_def.name, self.node_name
        )
    }
}

fn proto_shape_string(p: &TensorShapeProto) -> String {
    let parts: Vec<String> = p.dim.iter().map(|d| d.size.to_string()).collect();
    format!("[{}]", parts.join(","))
}
