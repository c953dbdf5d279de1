//! Graph rewrites a [`Session`](super::Session) applies before it runs a
//! graph, as TensorFlow's grappler does (its remapper fuses patterns of
//! ops into one kernel). Core holds no rewrite of its own: a rewrite is a
//! per-op attribute ([`GraphRewrite`]) that an op family registers with an
//! op, usually the fused op the rewrite makes (the `linalg` family's
//! `_ResourceApplyGradientDescentMatMul` carries the SGD update fusions),
//! so it exists exactly when that op does, and unloading its owner removes
//! it.
//!
//! A rewrite looks at the graph ([`RewriteContext`]) and returns
//! [`Replacement`]s: nodes to replace, each by a node that keeps its id,
//! name and output types and reads only earlier nodes, so feeds, fetches,
//! targets and the nodes' consumers mean the same nodes; a rewrite must
//! change no result. The session runs the registry's rewrites in the order
//! of their ops' names, each on the graph the ones before it left, and
//! checks every replacement (an invalid one is an `Internal` error naming
//! the node). [`SessionOptions::optimize`] turns them off.
//!
//! ```
//! use opforge_core::graph::{Graph, NodeSpec, Replacement, RewriteContext, Session};
//! use opforge_core::{OpDefBuilder, Registry};
//! use std::sync::Arc;
//!
//! let registry = Arc::new(Registry::new());
//! registry.register_op(OpDefBuilder::new("Slow").output("y: float")).unwrap();
//! // `Fast` carries a rewrite that puts it in place of every `Slow`.
//! registry.register_op(OpDefBuilder::new("Fast").output("y: float").graph_rewrite(
//!     |ctx: &RewriteContext<'_>| {
//!         let g = ctx.graph();
//!         Ok(g.node_ids()
//!             .filter(|&id| g.node(id).is_ok_and(|n| n.op == "Slow"))
//!             .map(|id| Replacement::new(id, NodeSpec::new("Fast", &g.node(id).unwrap().name)))
//!             .collect())
//!     },
//! )).unwrap();
//! let mut g = Graph::with_registry(registry);
//! let slow = g.add(NodeSpec::new("Slow", "s")).unwrap();
//! // (No kernels: building the session is enough to see the rewrite.)
//! let session = Session::new(g).unwrap();
//! assert_eq!(session.graph().node(slow).unwrap().op, "Fast");
//! ```
//!
//! [`SessionOptions::optimize`]: super::SessionOptions::optimize

use super::{Graph, NodeId, NodeSpec};
use crate::op_attr::OpAttr;
use crate::{OpDefBuilder, Result, Status};
use std::sync::Arc;

/// What a graph rewrite sees: the graph, and the types of the devices the
/// session places nodes on (a rewrite that uses CPU-only kernels applies
/// only when every device is a CPU).
pub struct RewriteContext<'a> {
    graph: &'a Graph,
    device_types: &'a [&'a str],
}

impl<'a> RewriteContext<'a> {
    /// A context for rewriting `graph` for devices of `device_types`.
    pub fn new(graph: &'a Graph, device_types: &'a [&'a str]) -> RewriteContext<'a> {
        RewriteContext {
            graph,
            device_types,
        }
    }

    /// The graph to rewrite (as the rewrites before this one left it).
    pub fn graph(&self) -> &'a Graph {
        self.graph
    }

    /// The types of the session's devices (`"CPU"`, ...), default first.
    pub fn device_types(&self) -> &'a [&'a str] {
        self.device_types
    }

    /// Whether every device of the session has type `device_type`.
    pub fn all_devices_are(&self, device_type: &str) -> bool {
        self.device_types.iter().all(|t| *t == device_type)
    }
}

/// One node a rewrite replaces: the node, and what takes its place (same
/// name and output types; inputs and control inputs only from earlier
/// nodes).
#[derive(Clone, Debug)]
pub struct Replacement {
    /// The node replaced.
    pub node: NodeId,
    /// The node that takes its place.
    pub spec: NodeSpec,
}

impl Replacement {
    /// Node `node` becomes the node `spec` describes.
    pub fn new(node: NodeId, spec: NodeSpec) -> Replacement {
        Replacement { node, spec }
    }
}

/// A graph rewrite: the replacements it makes in the context's graph
/// (none when its pattern does not occur).
pub type RewriteFunction = dyn Fn(&RewriteContext<'_>) -> Result<Vec<Replacement>> + Send + Sync;

/// The per-op attribute holding a graph rewrite (see the
/// [module docs](self)): `registry.attr::<GraphRewrite>(op)`.
pub struct GraphRewrite;

impl OpAttr for GraphRewrite {
    type Value = RewriteFunction;
    const NAME: &'static str = "GraphRewrite";
}

impl OpDefBuilder {
    /// Registers a graph rewrite with the op, as its [`GraphRewrite`]
    /// attribute: sessions run it before they run a graph (see
    /// [`crate::graph::rewrite`]).
    pub fn graph_rewrite(
        self,
        f: impl Fn(&RewriteContext<'_>) -> Result<Vec<Replacement>> + Send + Sync + 'static,
    ) -> Self {
        self.set_attr::<GraphRewrite>(Arc::new(f))
    }
}

/// `graph` after the registry's rewrites, or `None` when none applies.
pub(crate) fn optimize(graph: &Graph, device_types: &[&str]) -> Result<Option<Graph>> {
    let registry = graph.registry_arc().clone();
    let mut ops = registry.ops_with_attr::<GraphRewrite>();
    ops.sort();
    let mut rewritten: Option<Graph> = None;
    for op in ops {
        let Some(rewrite) = registry.attr::<GraphRewrite>(&op) else {
            continue;
        };
        let current = rewritten.as_ref().unwrap_or(graph);
        let replacements = rewrite(&RewriteContext::new(current, device_types))
            .map_err(|e| e.prepend(format!("graph rewrite of op '{op}': ")))?;
        if replacements.is_empty() {
            continue;
        }
        let mut g = match rewritten.take() {
            Some(g) => g,
            None => graph.clone_as_same(),
        };
        for r in replacements {
            g.replace_node(r.node, r.spec).map_err(|e| {
                Status::internal(format!(
                    "graph rewrite of op '{op}' (registered by {}): {}",
                    describe_origins(&registry.attr_origins::<GraphRewrite>(&op)),
                    e.message()
                ))
            })?;
        }
        rewritten = Some(g);
    }
    Ok(rewritten)
}

fn describe_origins(origins: &[crate::origin::Origin]) -> String {
    let names: Vec<String> = origins.iter().map(|o| o.to_string()).collect();
    match names.is_empty() {
        true => "an unknown owner".to_string(),
        false => names.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn registry_with(
        rewrite: impl Fn(&RewriteContext<'_>) -> Result<Vec<Replacement>> + Send + Sync + 'static,
    ) -> Arc<Registry> {
        let r = Registry::new();
        r.register_op(OpDefBuilder::new("A").output("y: float"))
            .unwrap();
        r.register_op(
            OpDefBuilder::new("B")
                .output("y: float")
                .graph_rewrite(rewrite),
        )
        .unwrap();
        r.register_op(OpDefBuilder::new("C").output("y: int32"))
            .unwrap();
        Arc::new(r)
    }

    fn graph(r: &Arc<Registry>) -> (Graph, NodeId) {
        let mut g = Graph::with_registry(r.clone());
        let a = g.add(NodeSpec::new("A", "a")).unwrap();
        (g, a)
    }

    #[test]
    fn no_replacement_leaves_the_graph_alone() {
        let r = registry_with(|_| Ok(Vec::new()));
        let (g, _) = graph(&r);
        assert!(optimize(&g, &["CPU"]).unwrap().is_none());
    }

    #[test]
    fn a_rewrite_sees_the_devices_and_replaces_nodes() {
        let r = registry_with(|ctx| {
            if !ctx.all_devices_are("CPU") {
                return Ok(Vec::new());
            }
            let id = ctx.graph().find("a").unwrap();
            Ok(vec![Replacement::new(id, NodeSpec::new("B", "a"))])
        });
        let (g, a) = graph(&r);
        let out = optimize(&g, &["CPU"]).unwrap().unwrap();
        assert_eq!(out.node(a).unwrap().op, "B");
        assert_eq!(g.node(a).unwrap().op, "A", "the input graph is unchanged");
        assert!(optimize(&g, &["CPU", "FAKE"]).unwrap().is_none());
    }

    #[test]
    fn invalid_replacements_and_failures_name_the_rewrite() {
        // A replacement that changes the output type.
        let r = registry_with(|ctx| {
            let id = ctx.graph().find("a").unwrap();
            Ok(vec![Replacement::new(id, NodeSpec::new("C", "a"))])
        });
        let (g, _) = graph(&r);
        let Err(e) = optimize(&g, &["CPU"]) else {
            panic!("a replacement that changes the output type");
        };
        assert_eq!(e.code(), crate::Code::Internal);
        assert!(e.message().contains("graph rewrite of op 'B'"), "{e}");
        assert!(e.message().contains("output types"), "{e}");
        // A rewrite that fails.
        let r = registry_with(|_| Err(Status::invalid_argument("no")));
        let (g, _) = graph(&r);
        let Err(e) = optimize(&g, &["CPU"]) else {
            panic!("a failing rewrite");
        };
        assert!(
            e.message().starts_with("graph rewrite of op 'B': no"),
            "{e}"
        );
    }
}
