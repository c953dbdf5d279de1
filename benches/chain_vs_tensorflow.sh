#!/usr/bin/env bash
# Executor overhead per node on a 10,000-node chain of scalar AddV2:
# opforge (`cargo bench --bench ops -- chain`) against TensorFlow's executor
# on the same graph (benches/chain_tensorflow.py), in the same run;
# opforge runs first and last, so drift during the run shows.
# tensorflow-cpu comes from PyPI into the venv of mlp_vs_references.sh
# (target/bench-venv).
# Usage: benches/chain_vs_tensorflow.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import tensorflow" 2>/dev/null ||
    "$venv/bin/pip" install --quiet numpy tensorflow-cpu
cargo bench --quiet --bench ops -- chain | grep '^chain'
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" benches/chain_tensorflow.py
cargo bench --quiet --bench ops -- chain | grep '^chain'
