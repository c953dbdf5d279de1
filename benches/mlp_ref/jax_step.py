"""JAX: the whole step (forward, jax.grad, SGD) under jax.jit (XLA)."""
import jax
import jax.numpy as jnp
from common import setup, run, LR

w, b, data = setup()
params = [(jnp.asarray(wi), jnp.asarray(bi)) for wi, bi in zip(w, b)]
data = [(jnp.asarray(x), jnp.asarray(y)) for x, y in data]


def loss_fn(params, x, y):
    h = x
    for i, (wi, bi) in enumerate(params):
        h = h @ wi + bi
        if i + 1 < len(params):
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


@jax.jit
def jit_step(params, x, y):
    loss, g = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, d: p - LR * d, params, g), loss


def step(x, y):
    global params
    params, loss = jit_step(params, x, y)
    return loss


run(f"jax {jax.__version__} (jit)", step, data, finish=lambda l: float(l.block_until_ready()))
