#!/usr/bin/env bash
# MatMul 1024x1024x1024 f32: opforge against numpy's np.matmul, in the same run.
# numpy comes from PyPI into a venv this script creates (target/bench-venv).
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the numpy command alone,
# so numpy runs its best kernel on this CPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=target/bench-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet numpy threadpoolctl
fi
numpy_ms=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" - <<'PY'
import time, numpy as np
from threadpoolctl import threadpool_info
n = 1024
a = (np.arange(n * n) * 7 % 13).astype(np.float32).reshape(n, n) * 0.1
b = (np.arange(n * n) * 5 % 11).astype(np.float32).reshape(n, n) * 0.1
np.matmul(a, b)
ts = []
for _ in range(7):
    t = time.perf_counter()
    for _ in range(3):
        np.matmul(a, b)
    ts.append((time.perf_counter() - t) / 3)
ts.sort()
import sys
info = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
print(f"numpy {np.__version__} BLAS {info}", file=sys.stderr)
print(f"{ts[len(ts) // 2] * 1e3:.3f}")
PY
)
ours=$(cargo bench --quiet --bench ops -- matmul 2>/dev/null | grep '^matmul:')
echo "$ours"
ours_ms=$(echo "$ours" | sed -E 's/.*f32: ([0-9.]+) ms.*/\1/')
python3 -c "
n=1024; ours=$ours_ms; npy=$numpy_ms
print(f'numpy np.matmul 1024x1024x1024 f32: {npy:.2f} ms, {2*n**3/npy/1e6:.1f} GFLOP/s')
print(f'opforge / numpy speed: {100*npy/ours:.0f}% (target >= 90%)')
"
