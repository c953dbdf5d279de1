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


def _stub_names(path):
    """Top-level names a stub declares, and each class's members."""
    tree = ast.parse(path.read_text())
    names, members = set(), {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            members[node.name] = {
                n.name for n in node.body if isinstance(n, ast.FunctionDef)
            }
    return names, members


def test_the_native_module_stub_matches_the_module():
    # _C.pyi declares exactly what the native module exports, and every
    # method of its classes, so mypy sees the real interface.
    from opforge import _C

    names, members = _stub_names(PKG / "_C.pyi")
    exported = {n for n in dir(_C) if not n.startswith("__")}
    assert exported - names == set(), "exported by _C but not in _C.pyi"
    assert names - exported == set(), "in _C.pyi but not exported by _C"
    for cls in ("Tensor", "Graph", "Tape"):
        native = {
            n for n in vars(getattr(_C, cls))
            if not n.startswith("__") or n in ("__array__", "__dlpack__", "__dlpack_device__")
        }
        assert native - members[cls] == set(), f"_C.{cls} members missing from _C.pyi"
