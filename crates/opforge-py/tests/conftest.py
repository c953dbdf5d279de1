"""Shared fixtures: the repository's example op libraries, built with cargo
when missing (CI builds them before pytest runs)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def _target_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


def example_library(package: str) -> pathlib.Path:
    """`examples/<package>` built as a cdylib (debug); its path."""
    lib = _target_dir() / "debug" / f"lib{package}.so"
    if sys.platform == "darwin":
        lib = lib.with_suffix(".dylib")
    cargo = os.environ.get("CARGO") or shutil.which("cargo") or "cargo"
    subprocess.run([cargo, "build", "--quiet", "-p", package, "--lib"], cwd=REPO, check=True)
    assert lib.is_file(), lib
    return lib


@pytest.fixture(scope="session")
def zero_out_path() -> pathlib.Path:
    return example_library("zero_out")


@pytest.fixture(scope="session")
def zero_out_lib(zero_out_path):
    import opforge as of

    return of.load_op_library(zero_out_path)
