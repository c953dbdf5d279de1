//! [`InferenceContext`]: what a shape function sees and uses.

use crate::attrs::{get_attr, AttrMap, FromAttrValue};
use crate::dtype::DataType;
use crate::op_def::summarize_attr_value;
use crate::proto::{OpDef, TensorShapeProto};
use crate::{Result, Status, Tensor};

/// A shape: a handle into its context. Two handles are the same shape only
/// if they are equal (`a == b` is identity, not equal contents).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShapeHandle(usize);

/// A dimension: a handle into its context, compared by identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DimensionHandle(usize);

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
}

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
        };
        ctx.inputs = input_shapes
            .iter()
            .map(|s| ctx.make_partial_shape(s.as_deref()))
            .collect();
        ctx
    }

    /// Gives the value of constant input `i` (so shape functions can read
    /// e.g. `Reshape`'s target shape).
    pub fn set_input_tensor(&mut self, i: usize, t: Tensor) {
        self.input_tensors[i] = Some(t);
    }

    /// Gives what is known of the *value* of input `i` read as a shape
    /// (e.g. the output of a `Shape` op upstream).
    pub fn set_input_tensor_as_shape(&mut self, i: usize, s: ShapeHandle) {
        self.input_tensors_as_shapes[i] = Some(s);
    }

    /// Sets the op name the node summary of error messages shows (TensorFlow's
    /// bare test nodes have none).
    pub fn set_node_op(&mut self, op: &str) {
        self.node_op = op.to_string();
    }

    /// Gives the shapes and dtypes held by resource input `i`.
    pub fn set_input_handle_shapes_and_types(&mut self, i: usize, data: Vec<ShapeAndType>) {
        self.input_handle_data[i] = Some(data);
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
    pub fn input(&self, i: usize) -> ShapeHandle {
        self.inputs[i]
    }

    /// Replaces the shape of input `i` (shape functions that refine inputs).
    pub fn set_input(&mut self, i: usize, s: ShapeHandle) {
        self.inputs[i] = s;
    }

    /// Sets the shape of output `i`.
    pub fn set_output(&mut self, i: usize, s: ShapeHandle) {
        self.outputs[i] = Some(s);
    }

    /// The shape of output `i`, if set.
    pub fn output(&self, i: usize) -> Option<ShapeHandle> {
        self.outputs[i]
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
        self.output_handle_data[i] = Some(data);
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

    fn new_shape(&mut self, dims: Option<Vec<DimensionHandle>>) -> ShapeHandle {
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
        for d in &p.dim {
            if d.size < -1 {
                return Err(Status::invalid_argument(format!(
                    "Shape {} has dimensions with values below -1 (where -1 means unknown)",
                    proto_shape_string(p)
                )));
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
    pub fn unknown_shape_of_rank(&mut self, rank: usize) -> ShapeHandle {
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
        if let Some(s) = self.input_tensors_as_shapes[i] {
            if self.rank_known(s) {
                return Ok(s);
            }
        }
        let t = self.input_tensors[i].clone();
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
        if let Some(s) = self.input_tensors_as_shapes[i] {
            if self.rank_known(s) {
                return Ok(s);
            }
        }
        let t = self.input_tensors[i].clone();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(shapes: &[Option<Vec<i64>>]) -> InferenceContext {
        InferenceContext::new(&OpDef::default(), "n", &AttrMap::new(), shapes, 1)
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
