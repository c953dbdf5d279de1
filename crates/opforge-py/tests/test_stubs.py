"""Type stubs: `python -m opforge.stubgen` (issue 15 parts 1 and 4)."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import opforge

PKG = pathlib.Path(opforge.__file__).parent


def test_the_committed_ops_stub_is_up_to_date():
    # CI fails when an op changes and python/opforge/ops.pyi is not regenerated.
    r = subprocess.run(
        [sys.executable, "-m", "opforge.stubgen", "-o", str(PKG), "--check"],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    ast.parse((PKG / "ops.pyi").read_text())


def test_a_library_stub(zero_out_path, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "opforge.stubgen", str(zero_out_path), "-o", str(tmp_path)],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "zero_out.pyi").read_text()
    ast.parse(text)
    assert "def zero_out(to_zero: TensorLike, preserve_index: int = ..., name: str | None = None) -> Tensor: ..." in text
    assert "def multiple_ins_and_outs(y: TensorLike, z: TensorLike, name: str | None = None) -> tuple[Tensor, Tensor]: ..." in text
    # --check notices a stale stub.
    (tmp_path / "zero_out.pyi").write_text(text.replace("zero_out_int32", "zero_out_i32"))
    r = subprocess.run(
        [sys.executable, "-m", "opforge.stubgen", str(zero_out_path), "-o", str(tmp_path), "--check"],
        capture_output=True, text=True,
    )
    assert r.returncode == 1 and "out of date" in r.stderr
