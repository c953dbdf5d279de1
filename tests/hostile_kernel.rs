//! Hostile input to kernels: every CPU kernel of every registered op, for
//! every dtype it is registered for, given empty tensors whose other
//! dimensions are huge (their partial products overflow 64 bits although
//! the tensor holds nothing), answers a value or a clean error; none
//! panics. `scripts/hostile-cli` found this class one op at a time
//! (Gather, BatchMatMulV2, the broadcast plan, QuantizeAndDequantizeV2
//! with an axis); this sweep covers it for every kernel at once.

use opforge::registry::Registry;
use opforge_core::attrs::AttrMap;
use opforge_core::proto::attr_value::Value;
use opforge_core::proto::{op_def::ArgDef, AttrValue, OpDef};
use opforge_core::tensor::limit;
use opforge_core::{Code, DataType, Tensor};
use opforge_testing::hostile::plausible_attrs;
use opforge_testing::util::ctx;

const H: i64 = 1 << 40;
const M: i64 = i64::MAX;

/// Shapes with no elements whose dims after the zero multiply past 2^64
/// (a shape checks its products up to the first zero only, as TensorFlow's).
const EMPTY_HUGE: &[&[i64]] = &[
    &[0, H, H, 3],
    &[3, 0, H, 2, H],
    &[M, 0],
    &[0, 1, 4, 5, M, 1],
    &[2, 0, M, M],
    &[1, 2, 0, M, 1, M, 2],
];

/// A tensor of `dtype` and `dims` holding ones (zeros for the types that
/// have no one: strings, resources, variants).
fn ones(dtype: DataType, dims: &[i64]) -> Tensor {
    let zeros = Tensor::zeros(dtype, dims).expect("a small tensor");
    ctx()
        .op("Cast")
        .input(Tensor::scalar(1i32))
        .attr("DstT", dtype)
        .run1()
        .and_then(|one| {
            ctx()
                .op("BroadcastTo")
                .input(one)
                .input(Tensor::from_vec(&[dims.len() as i64], dims.to_vec()).unwrap())
                .run1()
        })
        .unwrap_or(zeros)
}

/// What the inputs other than the hostile one hold.
#[derive(Clone, Copy)]
enum Rest {
    Zeros,
    Ones,
    /// For integer inputs, the axes of the hostile shape's last and
    /// third-to-last dims (reduction axes, split dims over the huge dims
    /// after the zero); ones otherwise.
    HugeAxes,
}

/// `[rank - 1, rank - 3]` of `dims` as a vector of `dtype` (ones when
/// `dtype` is not an integer type).
fn huge_axes(dtype: DataType, dims: &[i64]) -> Tensor {
    let r = dims.len() as i64;
    let axes = Tensor::from_vec(&[2], vec![r - 1, r - 3]).unwrap();
    if dtype == DataType::Int64 {
        return axes;
    }
    ctx()
        .op("Cast")
        .input(axes)
        .attr("DstT", dtype)
        .run1()
        .ok()
        .filter(|_| matches!(dtype, DataType::Int32 | DataType::Int16 | DataType::Int8))
        .unwrap_or_else(|| ones(dtype, &[2]))
}

/// How many tensors and of which dtypes `arg` takes under `attrs`.
fn arg_dtypes(arg: &ArgDef, attrs: &AttrMap) -> Vec<DataType> {
    let ty = |name: &str| match attrs.get(name).and_then(|a| a.value.as_ref()) {
        Some(Value::Type(t)) => DataType::try_from(*t).unwrap_or(DataType::Float),
        _ => DataType::Float,
    };
    let one = if arg.type_attr.is_empty() {
        DataType::try_from(arg.r#type).unwrap_or(DataType::Float)
    } else {
        ty(&arg.type_attr)
    };
    if !arg.number_attr.is_empty() {
        let n = match attrs.get(&arg.number_attr).and_then(|a| a.value.as_ref()) {
            Some(Value::I(n)) => *n as usize,
            _ => 2,
        };
        return vec![one; n];
    }
    if !arg.type_list_attr.is_empty() {
        return match attrs
            .get(&arg.type_list_attr)
            .and_then(|a| a.value.as_ref())
        {
            Some(Value::List(l)) => l
                .r#type
                .iter()
                .map(|&t| DataType::try_from(t).unwrap_or(DataType::Float))
                .collect(),
            _ => vec![one; 2],
        };
    }
    vec![one]
}

/// Runs `op` on every mix of one hostile input and small other inputs (and
/// on all inputs hostile); the panics, as "op dtype: inputs" lines.
fn sweep(op: &OpDef, attrs: &AttrMap, panics: &mut Vec<String>) -> usize {
    let dtypes: Vec<DataType> = op
        .input_arg
        .iter()
        .flat_map(|a| arg_dtypes(a, attrs))
        .collect();
    let mut runs = 0;
    let mut run = |inputs: Vec<Tensor>| {
        runs += 1;
        let shapes: Vec<String> = inputs.iter().map(|t| format!("{:?}", t.dims())).collect();
        if let Err(e) = ctx().execute(&op.name, inputs, attrs) {
            if e.code() == Code::Internal && e.message().contains("panicked") {
                panics.push(format!(
                    "{} {attrs:?} on {}: {e}",
                    op.name,
                    shapes.join(", ")
                ));
            }
        }
    };
    for dims in EMPTY_HUGE {
        let hostile = |dt: DataType| Tensor::zeros(dt, dims).expect("an empty tensor");
        run(dtypes.iter().map(|&dt| hostile(dt)).collect());
        for k in 0..dtypes.len() {
            for rest in [&[][..], &[0][..], &[2][..], &[1, 1][..]] {
                for value in [Rest::Zeros, Rest::Ones, Rest::HugeAxes] {
                    let inputs = dtypes
                        .iter()
                        .enumerate()
                        .map(|(i, &dt)| match (i == k, value) {
                            (true, _) => hostile(dt),
                            (false, Rest::Ones) => ones(dt, rest),
                            (false, Rest::Zeros) => Tensor::zeros(dt, rest).expect("small"),
                            (false, Rest::HugeAxes) => huge_axes(dt, dims),
                        })
                        .collect();
                    run(inputs);
                }
            }
        }
    }
    runs
}

#[test]
fn no_kernel_panics_on_empty_tensors_with_huge_dims() {
    opforge::opforge_ops::link();
    // Whatever a kernel would allocate for a non-empty output is refused
    // quickly instead of filling memory.
    limit::set_max_allocation(64 << 20);
    let registry = Registry::global();
    let mut panics = Vec::new();
    let (mut kernels, mut runs) = (0, 0);
    for name in registry.names() {
        let Ok(op) = registry.op_def(&name) else {
            continue;
        };
        for kernel in registry.kernels_for(&name) {
            if kernel.def.device_type != "CPU" {
                continue;
            }
            kernels += 1;
            let base: AttrMap = plausible_attrs(&op).into_iter().collect();
            // Every dtype of the first constrained attr; the others keep
            // their plausible value.
            let variants: Vec<AttrMap> = match kernel.def.constraints.first() {
                Some((attr, types)) => types
                    .iter()
                    .map(|&t| {
                        let mut attrs = base.clone();
                        attrs.insert(
                            attr.clone(),
                            AttrValue {
                                value: Some(Value::Type(t as i32)),
                            },
                        );
                        attrs
                    })
                    .collect(),
                None => vec![base],
            };
            // Then, with the first of those, each int attr at 1, 2 and 3
            // (axes, counts), each bool attr flipped, each list(int) attr
            // at a few windows and strides, and each string attr at each
            // of its allowed values (`data_format`, `padding`).
            let mut variants = variants;
            let first = variants[0].clone();
            for a in &op.attr {
                let values: Vec<Value> = match a.r#type.as_str() {
                    "int" => vec![Value::I(1), Value::I(2), Value::I(3)],
                    "bool" => vec![Value::B(true), Value::B(false)],
                    "list(int)" => [vec![2; 4], vec![1, 2, 3, 1], vec![3, 1]]
                        .into_iter()
                        .map(|i| {
                            Value::List(Box::new(opforge_core::proto::attr_value::ListValue {
                                i,
                                ..Default::default()
                            }))
                        })
                        .collect(),
                    "string" => match a.allowed_values.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Value::List(l)) => l.s.iter().cloned().map(Value::S).collect(),
                        _ => vec![],
                    },
                    _ => vec![],
                };
                for v in &values {
                    let mut attrs = first.clone();
                    attrs.insert(
                        a.name.clone(),
                        AttrValue {
                            value: Some(v.clone()),
                        },
                    );
                    variants.push(attrs);
                }
            }
            for attrs in &variants {
                runs += sweep(&op, attrs, &mut panics);
            }
        }
    }
    limit::set_max_allocation(0);
    assert!(kernels > 150, "only {kernels} CPU kernels swept");
    assert!(
        panics.is_empty(),
        "kernels panicked ({} of {runs} runs):\n{}",
        panics.len(),
        panics.join("\n")
    );
}
