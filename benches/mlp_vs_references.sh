#!/usr/bin/env bash
# The 784-512-512-10 MLP (batch 128, SGD, float32): opforge's graph-mode
# training step (examples/mlp/) against the same step in other frameworks,
# all in the same run on the same machine:
#   opforge-python  the step written in Python with @of.function +
#               of.GradientTape (the package, `pip install .` in release)
#   numpy       the step written by hand (OpenBLAS matmuls)
#   tensorflow  tf.function + GradientTape + assign_sub (tensorflow-cpu)
#   tensorflow-xla  the same tf.function compiled by XLA (jit_compile=True)
#   jax         jax.jit of forward + jax.grad + SGD (jaxlib, XLA:CPU)
#   torch       eager autograd + torch.optim.SGD (optional: PyPI's torch wheel
#               pulls several GiB of CUDA libraries, so it is not a default)
# opforge runs first and last, so drift during the run shows.
# The frameworks come from PyPI into a venv this script creates
# (target/bench-venv); OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for
# the Python commands alone, so numpy runs its best kernel.
# Usage: benches/mlp_vs_references.sh [STEPS] [FRAMEWORK ...]
#        (default: 300 opforge-python numpy tensorflow tensorflow-xla jax)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=${1:-300}
shift || true
if [ $# -gt 0 ]; then frameworks=("$@"); else frameworks=(opforge-python numpy tensorflow tensorflow-xla jax); fi
venv=target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
for f in "${frameworks[@]}"; do
    case $f in
    opforge-python)
        # The package from this checkout, rebuilt in release each run.
        "$venv/bin/pip" install --quiet numpy threadpoolctl
        "$venv/bin/pip" install --quiet --force-reinstall --no-deps .
        continue ;;
    numpy) pkg=numpy module=numpy ;;
    tensorflow | tensorflow-xla) pkg=tensorflow-cpu module=tensorflow ;;
    jax) pkg=jax module=jax ;;
    torch) pkg=torch module=torch ;;
    *) echo "unknown framework '$f' (opforge-python, numpy, tensorflow, tensorflow-xla, jax, torch)" >&2; exit 2 ;;
    esac
    "$venv/bin/python" -c "import $module" 2>/dev/null ||
        "$venv/bin/pip" install --quiet numpy threadpoolctl "$pkg"
done
cargo build --quiet --release --example mlp
target/release/examples/mlp "$steps"
for f in "${frameworks[@]}"; do
    script=${f%-xla}
    args=("${script%-python}_step.py" "$steps")
    [ "$f" != tensorflow-xla ] || args+=(xla)
    (cd benches/mlp_ref && env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
        "../../$venv/bin/python" "${args[@]}")
done
target/release/examples/mlp "$steps"
