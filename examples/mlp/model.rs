//! The model of the MLP example: a multilayer perceptron (MatMul, BiasAdd,
//! Relu, sparse softmax cross-entropy) trained with SGD on resource
//! variables, in graph mode, on synthetic data whose labels come from a
//! fixed random "teacher", so the loss can fall.
//!
//! `examples/mlp/main.rs` (`cargo run --release --example mlp`) trains the
//! 784-512-512-10 one and reports steps/s; `tests/mlp.rs` includes this file
//! too, trains a small one and checks that the loss falls.

use opforge::autodiff::gradients;
use opforge::graph::{Graph, NodeId, NodeSpec, Output, Session, SessionOptions};
use opforge::{DataType, Result, Status, Tensor, TensorShape};

/// A deterministic pseudo-random source (SplitMix64), so runs are repeatable.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Approximately normal(0, 1) (sum of uniforms).
    pub fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.uniform()).sum::<f32>() * 1.732 - 3.464
    }
}

/// The trained model: the graph's session and the names needed to train it.
pub struct Mlp {
    /// The session holding the graph and the variables.
    pub session: Session,
    x: Output,
    labels: Output,
    loss: Output,
    train: NodeId,
    init: NodeId,
}

fn konst(g: &mut Graph, name: &str, t: &Tensor) -> Result<Output> {
    Ok(Output::new(
        g.add(
            NodeSpec::new("Const", name)
                .attr("value", t)
                .attr("dtype", t.dtype()),
        )?,
        0,
    ))
}

/// Builds the training graph for layer sizes `sizes` (e.g. `[784, 512, 512, 10]`)
/// and batch `batch`, with learning rate `lr`.
pub fn build(
    sizes: &[usize],
    batch: usize,
    lr: f32,
    seed: u64,
    options: SessionOptions,
) -> Result<Mlp> {
    let mut g = Graph::new();
    let mut rng = Rng::new(seed);
    let x = g.add(
        NodeSpec::new("Placeholder", "x")
            .attr("dtype", DataType::Float)
            .attr(
                "shape",
                TensorShape::from_usize(&[batch, sizes[0]])?.to_proto(),
            ),
    )?;
    let labels = g.add(
        NodeSpec::new("Placeholder", "labels")
            .attr("dtype", DataType::Int32)
            .attr("shape", TensorShape::from_usize(&[batch])?.to_proto()),
    )?;
    let mut h = Output::new(x, 0);
    let mut vars: Vec<(NodeId, Output)> = Vec::new(); // (handle, value read for the forward pass)
    let mut inits = Vec::new();
    let layers = sizes.len() - 1;
    for l in 0..layers {
        let (fan_in, fan_out) = (sizes[l], sizes[l + 1]);
        let scale = (2.0 / fan_in as f32).sqrt();
        let w0 = Tensor::from_vec(
            &[fan_in as i64, fan_out as i64],
            (0..fan_in * fan_out)
                .map(|_| rng.normal() * scale)
                .collect(),
        )?;
        let b0 = Tensor::from_vec(&[fan_out as i64], vec![0.0f32; fan_out])?;
        let mut read = Vec::new();
        for (name, init) in [(format!("w{l}"), w0), (format!("b{l}"), b0)] {
            let handle = g.add(
                NodeSpec::new("VarHandleOp", &name)
                    .attr("dtype", DataType::Float)
                    .attr("shape", init.shape().to_proto())
                    .attr("shared_name", name.as_str()),
            )?;
            let value = konst(&mut g, &format!("{name}/initial_value"), &init)?;
            inits.push(
                g.add(
                    NodeSpec::new("AssignVariableOp", &format!("{name}/assign"))
                        .input(handle)
                        .input(value)
                        .attr("dtype", DataType::Float),
                )?,
            );
            let r = g.add(
                NodeSpec::new("ReadVariableOp", &format!("{name}/read"))
                    .input(handle)
                    .attr("dtype", DataType::Float),
            )?;
            vars.push((handle, Output::new(r, 0)));
            read.push(Output::new(r, 0));
        }
        let mm = g.add(
            NodeSpec::new("MatMul", &format!("layer{l}/MatMul"))
                .input(h)
                .input(read[0]),
        )?;
        let z = g.add(
            NodeSpec::new("BiasAdd", &format!("layer{l}/BiasAdd"))
                .input(mm)
                .input(read[1]),
        )?;
        h = if l + 1 < layers {
            Output::new(
                g.add(NodeSpec::new("Relu", &format!("layer{l}/Relu")).input(z))?,
                0,
            )
        } else {
            Output::new(z, 0)
        };
    }
    let xent = g.add(
        NodeSpec::new("SparseSoftmaxCrossEntropyWithLogits", "xent")
            .input(h)
            .input(labels),
    )?;
    let axis = konst(&mut g, "loss/axis", &Tensor::from_vec(&[1], vec![0i32])?)?;
    let loss = Output::new(
        g.add(
            NodeSpec::new("Mean", "loss")
                .input(Output::new(xent, 0))
                .input(axis),
        )?,
        0,
    );
    let reads: Vec<Output> = vars.iter().map(|v| v.1).collect();
    let grads = gradients(&mut g, &[loss], &reads, None)?;
    let lr_t = konst(&mut g, "learning_rate", &Tensor::scalar(lr))?;
    let mut updates = Vec::new();
    for ((handle, read), grad) in vars.iter().zip(grads) {
        let grad = grad.ok_or_else(|| Status::internal("no gradient for a weight"))?;
        let name = g.node(*handle).unwrap().name.clone();
        // Read before update: the forward pass of this step used `read`.
        updates.push(
            g.add(
                NodeSpec::new("ResourceApplyGradientDescent", &format!("{name}/update"))
                    .input(*handle)
                    .input(lr_t)
                    .input(grad)
                    .control_input(read.node),
            )?,
        );
    }
    let mut train = NodeSpec::new("NoOp", "train");
    for u in updates {
        train = train.control_input(u);
    }
    let train = g.add(train)?;
    let mut init = NodeSpec::new("NoOp", "init");
    for i in inits {
        init = init.control_input(i);
    }
    let init = g.add(init)?;
    let session = Session::with_options(g, options)?;
    Ok(Mlp {
        session,
        x: Output::new(x, 0),
        labels: Output::new(labels, 0),
        loss,
        train,
        init,
    })
}

/// Synthetic data: inputs uniform in [-1, 1), labels = argmax of a fixed
/// random linear map of the input (the "teacher"), so the task is learnable.
pub fn synthetic_batches(
    n_batches: usize,
    batch: usize,
    features: usize,
    classes: usize,
    seed: u64,
) -> Result<Vec<(Tensor, Tensor)>> {
    let mut rng = Rng::new(seed);
    let teacher: Vec<f32> = (0..features * classes).map(|_| rng.normal()).collect();
    (0..n_batches)
        .map(|_| {
            let x: Vec<f32> = (0..batch * features)
                .map(|_| rng.uniform() * 2.0 - 1.0)
                .collect();
            let labels: Vec<i32> = (0..batch)
                .map(|b| {
                    let row = &x[b * features..(b + 1) * features];
                    (0..classes)
                        .map(|c| {
                            (
                                c,
                                row.iter()
                                    .enumerate()
                                    .map(|(f, v)| v * teacher[f * classes + c])
                                    .sum::<f32>(),
                            )
                        })
                        .max_by(|a, b| a.1.total_cmp(&b.1))
                        .map_or(0, |(c, _)| c as i32)
                })
                .collect();
            Ok((
                Tensor::from_vec(&[batch as i64, features as i64], x)?,
                Tensor::from_vec(&[batch as i64], labels)?,
            ))
        })
        .collect()
}

impl Mlp {
    /// Initializes the variables.
    pub fn init(&self) -> Result<()> {
        self.session.run(vec![], &[], &[self.init]).map(|_| ())
    }

    /// One SGD step on a batch; the batch's loss before the update.
    pub fn step(&self, x: &Tensor, labels: &Tensor) -> Result<f32> {
        let out = self.session.run(
            vec![(self.x, x.clone()), (self.labels, labels.clone())],
            &[self.loss],
            &[self.train],
        )?;
        out[0].scalar_value::<f32>()
    }

    /// The loss on a batch, without training.
    pub fn loss(&self, x: &Tensor, labels: &Tensor) -> Result<f32> {
        let out = self.session.run(
            vec![(self.x, x.clone()), (self.labels, labels.clone())],
            &[self.loss],
            &[],
        )?;
        out[0].scalar_value::<f32>()
    }
}
