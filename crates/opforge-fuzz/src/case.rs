//! Structured cases decoded from fuzz bytes: a node for shape inference
//! ([`ShapeCase`]) and an eager kernel call ([`KernelCase`]), with attr
//! values filled by type from the op's OpDef and small input tensors. Every
//! byte string decodes to a case of some registered op; `encode` writes the
//! bytes a case decodes from, so test data becomes seeds.

use crate::bytes::{Reader, Writer};
use opforge_core::attrs::{arg_ranges, AttrMap};
use opforge_core::eager::Arg;
use opforge_core::proto::attr_value::{ListValue, Value};
use opforge_core::proto::op_def::{ArgDef, AttrDef};
use opforge_core::proto::tensor_shape_proto::Dim;
use opforge_core::proto::{AttrValue, OpDef, TensorShapeProto};
use opforge_core::{DataType, Tensor};

/// The most elements a generated tensor has (more, and its last dim becomes
/// 0: huge dims come with an empty tensor).
pub const MAX_ELEMENTS: usize = 1024;
/// The most inputs (and outputs) a shape-inference case gives a node.
pub const MAX_ARGS: usize = 64;
/// The longest generated list (attr or list input).
pub const MAX_LIST: usize = 8;
/// The longest generated string.
pub const MAX_STRING: usize = 32;
/// Rank byte 255 means rank 255 (above TensorFlow's 254); others `% 8`.
const HOSTILE_RANK: u8 = 255;
/// Shape tag for an unknown rank.
const UNKNOWN_RANK: u8 = 254;

/// Strings shape functions and kernels often switch on.
const COMMON_STRINGS: &[&str] = &[
    "SAME", "VALID", "EXPLICIT", "NHWC", "NCHW", "NDHWC", "NCDHW", "", "x",
];

/// f16 bit patterns for interesting values (the `Reader::float` tags).
const HALF_BITS: &[u16] = &[
    0x0000, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x4000, 0x4200, 0x5640, 0x7e00, 0x7c00, 0xfc00, 0x7bff,
    0x0400, 0x0001, 0xfbff, 0x7c01,
];

fn dtype_table() -> &'static [DataType] {
    DataType::BASE_TYPES
}

fn dtype_index(dt: DataType) -> Option<usize> {
    dtype_table().iter().position(|&d| d == dt)
}

/// A dtype tag: 0 is `hint`, others pick from every base type.
fn read_dtype(r: &mut Reader, hint: DataType) -> DataType {
    match r.u8() {
        0 => hint,
        t => dtype_table()[usize::from(t - 1) % dtype_table().len()],
    }
}

fn write_dtype(w: &mut Writer, dt: DataType) {
    w.u8(dtype_index(dt).map_or(0, |i| i as u8 + 1));
}

/// Reads a tensor: dtype, shape (element count capped) and values. `None`
/// where the dtype or shape cannot make a tensor (a clean error the caller
/// skips).
pub fn read_tensor(r: &mut Reader, hint: DataType) -> Option<Tensor> {
    let dtype = read_dtype(r, hint);
    let rank = match r.u8() {
        HOSTILE_RANK => 255,
        b => usize::from(b % 8),
    };
    let mut dims: Vec<i64> = (0..rank).map(|_| r.dim(false)).collect();
    let n = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?));
    if n.is_none_or(|n| n > MAX_ELEMENTS) {
        if let Some(last) = dims.last_mut() {
            *last = 0;
        }
    }
    let mut t = Tensor::zeros(dtype, &dims).ok()?;
    let n = t.num_elements();
    match dtype {
        DataType::String => {
            for s in t.strings_mut().ok()?.iter_mut() {
                let len = r.len(MAX_STRING);
                *s = r.bytes(len);
            }
        }
        DataType::Resource | DataType::Variant => {}
        DataType::Bool => {
            for b in t.bytes_mut().ok()? {
                *b = r.u8() & 1;
            }
        }
        _ => {
            let size = dtype.size();
            let (parts, part) = if dtype.is_complex() {
                (2, size / 2)
            } else {
                (1, size)
            };
            let floating = dtype.is_floating() || dtype.is_complex();
            let bytes = t.bytes_mut().ok()?;
            for k in 0..n * parts {
                let slot = &mut bytes[k * part..(k + 1) * part];
                let tag = r.u8();
                if tag == 0 {
                    slot.copy_from_slice(&r.bytes(part));
                } else if floating {
                    let i = usize::from(tag - 1);
                    let f = [
                        0.0,
                        -0.0,
                        1.0,
                        -1.0,
                        0.5,
                        2.0,
                        3.0,
                        100.0,
                        f64::NAN,
                        f64::INFINITY,
                        f64::NEG_INFINITY,
                        f32::MAX as f64,
                        f32::MIN_POSITIVE as f64,
                        1e-45,
                        -1e30,
                        f64::MAX,
                    ][i % 16];
                    match (dtype, part) {
                        (DataType::Half, _) => {
                            slot.copy_from_slice(&HALF_BITS[i % 16].to_le_bytes())
                        }
                        (DataType::BFloat16, _) => slot
                            .copy_from_slice(&(((f as f32).to_bits() >> 16) as u16).to_le_bytes()),
                        (_, 4) => slot.copy_from_slice(&(f as f32).to_le_bytes()),
                        (_, 8) => slot.copy_from_slice(&f.to_le_bytes()),
                        _ => {}
                    }
                } else {
                    // Small integers and the interesting ones, truncated.
                    let v: i64 = if tag < 32 {
                        i64::from(tag) - 8
                    } else {
                        [
                            i64::MAX,
                            i64::MIN,
                            i64::from(i32::MAX),
                            i64::from(i32::MIN),
                            255,
                            256,
                            1 << 31,
                            1 << 40,
                        ][usize::from(tag) % 8]
                    };
                    slot.copy_from_slice(&v.to_le_bytes()[..part]);
                }
            }
        }
    }
    Some(t)
}

/// Writes what [`read_tensor`] reads back as `t` (strings longer than
/// [`MAX_STRING`] are cut).
pub fn write_tensor(w: &mut Writer, t: &Tensor) {
    write_dtype(w, t.dtype());
    w.u8(t.rank().min(7) as u8);
    for &d in t.dims().iter().take(7) {
        w.dim(d);
    }
    let dtype = t.dtype();
    match dtype {
        DataType::String => {
            for s in t.strings().unwrap_or_default() {
                let s = &s[..s.len().min(MAX_STRING)];
                w.len(s.len());
                w.bytes(s);
            }
        }
        DataType::Resource | DataType::Variant => {}
        DataType::Bool => {
            for &b in t.bytes().unwrap_or_default() {
                w.u8(b);
            }
        }
        _ => {
            let part = if dtype.is_complex() {
                dtype.size() / 2
            } else {
                dtype.size()
            };
            if part == 0 {
                return;
            }
            for chunk in t.bytes().unwrap_or_default().chunks(part) {
                w.u8(0);
                w.bytes(chunk);
            }
        }
    }
}

/// A shape: unknown rank (where allowed), or up to rank 7 (255 rarely).
fn read_shape(r: &mut Reader, unknown_ok: bool) -> Option<Vec<i64>> {
    let rank = match r.u8() {
        UNKNOWN_RANK if unknown_ok => return None,
        HOSTILE_RANK => 255,
        b => usize::from(b % 8),
    };
    Some((0..rank).map(|_| r.dim(unknown_ok)).collect())
}

fn write_shape(w: &mut Writer, s: Option<&[i64]>) {
    match s {
        None => w.u8(UNKNOWN_RANK),
        Some(dims) => {
            w.u8(dims.len().min(7) as u8);
            for &d in dims.iter().take(7) {
                w.dim(d);
            }
        }
    }
}

fn shape_proto(s: Option<Vec<i64>>) -> TensorShapeProto {
    match s {
        None => TensorShapeProto {
            unknown_rank: true,
            ..Default::default()
        },
        Some(dims) => TensorShapeProto {
            dim: dims
                .into_iter()
                .map(|size| Dim {
                    size,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    }
}

fn shape_from_proto(p: &TensorShapeProto) -> Option<Vec<i64>> {
    (!p.unknown_rank).then(|| p.dim.iter().map(|d| d.size).collect())
}

/// The allowed values of an attr (`allowed_values.list`), if any.
fn allowed(def: &AttrDef) -> Option<&ListValue> {
    match def.allowed_values.as_ref()?.value.as_ref()? {
        Value::List(l) => Some(l),
        _ => None,
    }
}

fn read_type(r: &mut Reader, def: &AttrDef) -> i32 {
    let tag = r.u8();
    let allowed = allowed(def)
        .map(|l| l.r#type.as_slice())
        .unwrap_or_default();
    if tag % 2 == 0 && !allowed.is_empty() {
        allowed[usize::from(tag / 2) % allowed.len()]
    } else {
        dtype_table()[usize::from(tag / 2) % dtype_table().len()] as i32
    }
}

fn write_type(w: &mut Writer, def: &AttrDef, t: i32) {
    let allowed = allowed(def)
        .map(|l| l.r#type.as_slice())
        .unwrap_or_default();
    if let Some(i) = allowed.iter().position(|&a| a == t).filter(|&i| i < 128) {
        w.u8((2 * i) as u8);
    } else {
        let i = DataType::from_i32(t).and_then(dtype_index).unwrap_or(0);
        w.u8((2 * i + 1) as u8);
    }
}

fn read_string(r: &mut Reader, def: &AttrDef) -> Vec<u8> {
    let tag = r.u8();
    if tag % 4 == 0 {
        let allowed = allowed(def).map(|l| l.s.as_slice()).unwrap_or_default();
        if allowed.is_empty() {
            COMMON_STRINGS[usize::from(tag / 4) % COMMON_STRINGS.len()]
                .as_bytes()
                .to_vec()
        } else {
            allowed[usize::from(tag / 4) % allowed.len()].clone()
        }
    } else {
        let len = r.len(MAX_STRING);
        r.bytes(len)
    }
}

fn write_string(w: &mut Writer, s: &[u8]) {
    let s = &s[..s.len().min(MAX_STRING)];
    w.u8(1);
    w.len(s.len());
    w.bytes(s);
}

fn read_tensor_proto(r: &mut Reader) -> Option<AttrValue> {
    let t = read_tensor(r, DataType::Float)?;
    let p = t.to_proto().ok()?;
    Some(AttrValue {
        value: Some(Value::Tensor(Box::new(p))),
    })
}

/// Reads a value of the attr's type (`None` for `func` attrs and tensors
/// that cannot be made).
pub fn read_attr(r: &mut Reader, def: &AttrDef) -> Option<AttrValue> {
    let ty = def.r#type.as_str();
    let value = match ty {
        "type" => Value::Type(read_type(r, def)),
        "int" => Value::I(r.int()),
        "float" => Value::F(r.float() as f32),
        "bool" => Value::B(r.u8() & 1 == 1),
        "string" => Value::S(read_string(r, def)),
        "shape" => Value::Shape(shape_proto(read_shape(r, true))),
        "tensor" => return read_tensor_proto(r),
        _ => {
            let elem = ty.strip_prefix("list(")?.strip_suffix(')')?;
            let n = r.len(MAX_LIST);
            let mut l = ListValue::default();
            for _ in 0..n {
                match elem {
                    "type" => l.r#type.push(read_type(r, def)),
                    "int" => l.i.push(r.int()),
                    "float" => l.f.push(r.float() as f32),
                    "bool" => l.b.push(r.u8() & 1 == 1),
                    "string" => l.s.push(read_string(r, def)),
                    "shape" => l.shape.push(shape_proto(read_shape(r, true))),
                    "tensor" => {
                        if let Some(Value::Tensor(t)) = read_tensor_proto(r).and_then(|v| v.value) {
                            l.tensor.push(*t);
                        }
                    }
                    _ => return None,
                }
            }
            Value::List(Box::new(l))
        }
    };
    Some(AttrValue { value: Some(value) })
}

/// Writes `v` as [`read_attr`] reads it back for `def`; false if it
/// cannot (a `func`, or a value of another type).
pub fn write_attr(w: &mut Writer, def: &AttrDef, v: &AttrValue) -> bool {
    match (def.r#type.as_str(), v.value.as_ref()) {
        ("type", Some(Value::Type(t))) => write_type(w, def, *t),
        ("int", Some(Value::I(i))) => w.int(*i),
        ("float", Some(Value::F(f))) => w.float(f64::from(*f)),
        ("bool", Some(Value::B(b))) => w.u8(u8::from(*b)),
        ("string", Some(Value::S(s))) => write_string(w, s),
        ("shape", Some(Value::Shape(s))) => write_shape(w, shape_from_proto(s).as_deref()),
        ("tensor", Some(Value::Tensor(p))) => match Tensor::from_proto(p) {
            Ok(t) => write_tensor(w, &t),
            Err(_) => return false,
        },
        (ty, Some(Value::List(l))) if ty.starts_with("list(") => {
            let elem = &ty[5..ty.len() - 1];
            let n = match elem {
                "type" => l.r#type.len(),
                "int" => l.i.len(),
                "float" => l.f.len(),
                "bool" => l.b.len(),
                "string" => l.s.len(),
                "shape" => l.shape.len(),
                "tensor" => l.tensor.len(),
                _ => return false,
            };
            if n > MAX_LIST {
                return false;
            }
            w.len(n);
            for k in 0..n {
                match elem {
                    "type" => write_type(w, def, l.r#type[k]),
                    "int" => w.int(l.i[k]),
                    "float" => w.float(f64::from(l.f[k])),
                    "bool" => w.u8(u8::from(l.b[k])),
                    "string" => write_string(w, &l.s[k]),
                    "shape" => write_shape(w, shape_from_proto(&l.shape[k]).as_deref()),
                    _ => match Tensor::from_proto(&l.tensor[k]) {
                        Ok(t) => write_tensor(w, &t),
                        Err(_) => return false,
                    },
                }
            }
        }
        // An empty list attr may come as a value with no list.
        (ty, None) if ty.starts_with("list(") => w.len(0),
        _ => return false,
    }
    true
}

/// Attr mode bytes: what a case does with each attr of the OpDef.
const ATTR_DEFAULT: u8 = 0;
const ATTR_GIVEN: u8 = 1;
const ATTR_ABSENT: u8 = 2;

/// Reads one mode byte and value per attr of `op`. In a shape case
/// (`with_defaults`) mode 0 takes the attr's default; in a kernel call it
/// leaves the attr to inference and defaults. Mode 2 leaves it out.
fn read_attrs(r: &mut Reader, op: &OpDef, with_defaults: bool) -> AttrMap {
    let mut attrs = AttrMap::new();
    for def in &op.attr {
        match r.u8() % 3 {
            ATTR_GIVEN => {
                if let Some(v) = read_attr(r, def) {
                    attrs.insert(def.name.clone(), v);
                }
            }
            ATTR_DEFAULT if with_defaults => {
                if let Some(d) = &def.default_value {
                    attrs.insert(def.name.clone(), d.clone());
                }
            }
            _ => {}
        }
    }
    attrs
}

fn write_attrs(w: &mut Writer, op: &OpDef, attrs: &AttrMap) {
    for def in &op.attr {
        match attrs.get(&def.name) {
            Some(v) => {
                let mut value = Writer::new();
                if write_attr(&mut value, def, v) {
                    w.u8(ATTR_GIVEN);
                    w.bytes(&value.out);
                } else {
                    w.u8(ATTR_DEFAULT);
                }
            }
            None => w.u8(ATTR_ABSENT),
        }
    }
}

fn op_index(ops: &[String], op: &str) -> Option<u16> {
    ops.binary_search_by(|o| o.as_str().cmp(op))
        .ok()
        .and_then(|i| u16::try_from(i).ok())
}

/// Flat argument count of `args` under `attrs` (capped at [`MAX_ARGS`]).
fn flat_count(op: &OpDef, args: &[ArgDef], attrs: &AttrMap) -> usize {
    arg_ranges(op, args, attrs)
        .map(|r| r.last().map_or(0, |l| l.end))
        .unwrap_or(args.len())
        .min(MAX_ARGS)
}

/// A node for shape inference: op, attrs, input shapes (`None` = unknown
/// rank, `-1` = unknown dim) and constant input values.
#[derive(Clone, Debug)]
pub struct ShapeCase {
    /// The op (registered, with a shape function).
    pub op: OpDef,
    /// The node's attrs.
    pub attrs: AttrMap,
    /// The input shapes.
    pub shapes: Vec<Option<Vec<i64>>>,
    /// Constant input values by input index.
    pub tensors: Vec<(usize, Tensor)>,
    /// The node's number of flat outputs.
    pub num_outputs: usize,
}

impl ShapeCase {
    /// A one-line description: op, attrs, input shapes and constant inputs.
    pub fn describe(&self) -> String {
        let shapes: Vec<String> = self
            .shapes
            .iter()
            .map(|s| s.as_ref().map_or("?".to_string(), |d| format!("{d:?}")))
            .collect();
        let tensors: Vec<String> = self
            .tensors
            .iter()
            .map(|(i, t)| format!("in{i}={}", t.summarize(8)))
            .collect();
        format!(
            "{} {} shapes [{}] consts [{}]",
            self.op.name,
            opforge_core::attrs::summarize_attrs(&self.attrs),
            shapes.join("; "),
            tensors.join(", ")
        )
    }

    /// Decodes a case for one of `ops` (sorted names; `op_def` looks one up).
    pub fn decode(
        data: &[u8],
        ops: &[String],
        op_def: impl Fn(&str) -> Option<OpDef>,
    ) -> Option<ShapeCase> {
        if ops.is_empty() {
            return None;
        }
        let mut r = Reader::new(data);
        let op = op_def(&ops[usize::from(r.u16()) % ops.len()])?;
        let attrs = read_attrs(&mut r, &op, true);
        let n = flat_count(&op, &op.input_arg, &attrs);
        let n = match r.u8() {
            k @ 1..=3 => n.saturating_sub(usize::from(k)),
            4 => n + 1,
            _ => n,
        };
        let mut shapes = Vec::with_capacity(n);
        let mut tensors = Vec::new();
        for i in 0..n {
            let shape = read_shape(&mut r, true);
            // A constant input's shape is its value's (as a `Const` node's
            // output is in a graph).
            match (r.u8() % 2 == 1)
                .then(|| read_tensor(&mut r, DataType::Int32))
                .flatten()
            {
                Some(t) => {
                    shapes.push(Some(t.dims().to_vec()));
                    tensors.push((i, t));
                }
                None => shapes.push(shape),
            }
        }
        let num_outputs = flat_count(&op, &op.output_arg, &attrs);
        Some(ShapeCase {
            op,
            attrs,
            shapes,
            tensors,
            num_outputs,
        })
    }

    /// The bytes that decode to this case (attrs equal to the op's default
    /// are written as "default"); `None` if the op is not in `ops`.
    pub fn encode(&self, ops: &[String]) -> Option<Vec<u8>> {
        let mut w = Writer::new();
        w.u16(op_index(ops, &self.op.name)?);
        write_attrs(&mut w, &self.op, &self.attrs);
        w.u8(0);
        for (i, s) in self.shapes.iter().enumerate() {
            write_shape(&mut w, s.as_deref());
            match self.tensors.iter().find(|(k, _)| *k == i) {
                Some((_, t)) => {
                    w.u8(1);
                    write_tensor(&mut w, t);
                }
                None => w.u8(0),
            }
        }
        Some(w.out)
    }
}

/// An eager call: op, the attrs given, and input arguments.
#[derive(Clone, Debug)]
pub struct KernelCase {
    /// The op (registered, with a CPU kernel).
    pub op: OpDef,
    /// The attrs given (the rest are inferred or defaulted by the runtime).
    pub attrs: AttrMap,
    /// One argument per input argument of the op.
    pub args: Vec<Arg>,
}

fn is_list(a: &ArgDef) -> bool {
    !a.number_attr.is_empty() || !a.type_list_attr.is_empty()
}

fn hint(a: &ArgDef, attrs: &AttrMap) -> DataType {
    if let Some(dt) = DataType::from_i32(a.r#type).filter(|_| a.r#type != 0) {
        return dt.base();
    }
    match attrs.get(&a.type_attr).and_then(|v| v.value.as_ref()) {
        Some(Value::Type(t)) => DataType::from_i32(*t).map_or(DataType::Float, DataType::base),
        _ => DataType::Float,
    }
}

impl KernelCase {
    /// A one-line description: op, attrs and input tensors.
    pub fn describe(&self) -> String {
        let show = |t: &Tensor| format!("{}{:?}={}", t.dtype(), t.dims(), t.summarize(6));
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match a {
                Arg::One(t) => show(t),
                Arg::List(l) => format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(", ")),
            })
            .collect();
        format!(
            "{}({}) {}",
            self.op.name,
            args.join(", "),
            opforge_core::attrs::summarize_attrs(&self.attrs)
        )
    }

    /// Decodes a call of one of `ops` (sorted names).
    pub fn decode(
        data: &[u8],
        ops: &[String],
        op_def: impl Fn(&str) -> Option<OpDef>,
    ) -> Option<KernelCase> {
        if ops.is_empty() {
            return None;
        }
        let mut r = Reader::new(data);
        let op = op_def(&ops[usize::from(r.u16()) % ops.len()])?;
        let attrs = read_attrs(&mut r, &op, false);
        let mut args = Vec::with_capacity(op.input_arg.len());
        for a in &op.input_arg {
            let h = hint(a, &attrs);
            if is_list(a) {
                let n = r.len(MAX_LIST);
                let l = (0..n)
                    .map(|_| read_tensor(&mut r, h))
                    .collect::<Option<Vec<_>>>()?;
                args.push(Arg::List(l));
            } else {
                args.push(Arg::One(read_tensor(&mut r, h)?));
            }
        }
        Some(KernelCase { op, attrs, args })
    }

    /// The bytes that decode to this call; `None` if the op is not in `ops`
    /// or the arguments do not match its input arguments.
    pub fn encode(&self, ops: &[String]) -> Option<Vec<u8>> {
        let mut w = Writer::new();
        w.u16(op_index(ops, &self.op.name)?);
        write_attrs(&mut w, &self.op, &self.attrs);
        if self.args.len() != self.op.input_arg.len() {
            return None;
        }
        for (a, arg) in self.op.input_arg.iter().zip(&self.args) {
            match (is_list(a), arg) {
                (true, Arg::List(l)) if l.len() <= MAX_LIST => {
                    w.len(l.len());
                    l.iter().for_each(|t| write_tensor(&mut w, t));
                }
                (false, Arg::One(t)) => write_tensor(&mut w, t),
                _ => return None,
            }
        }
        Some(w.out)
    }
}
