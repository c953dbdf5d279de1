"""`unload_op_library`: unloading refused while graphs, functions or
tensors of a library are alive (unless forced), clear errors from the
functions of an unloaded library, and load -> call -> unload 1,000 times
with flat memory.

Every test runs in a fresh interpreter: the other tests share one loaded
zero_out library (conftest's session fixture), which an unload here would
take away from them."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO


def _run(script: str, **paths: pathlib.Path) -> str:
    """Runs `script` in a fresh interpreter with `paths` as variables;
    fails with its output unless it exits 0. Returns its stdout."""
    head = "".join(f"{k} = {str(v)!r}\n" for k, v in paths.items())
    r = subprocess.run(
        [sys.executable, "-c", head + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def probe_path(tmp_path_factory) -> pathlib.Path:
    """The loader's C probe library (tests/c/probe.c: ProbeForeign makes
    outputs in the library's own memory), built with the C compiler."""
    cc = os.environ.get("CC") or shutil.which("cc") or "cc"
    out = tmp_path_factory.mktemp("probe") / "libprobe_unload_py.so"
    subprocess.run(
        [cc, "-std=c99", "-shared", "-fPIC", "-I", str(REPO / "include"), "-o", str(out),
         str(REPO / "crates/opforge-loader/tests/c/probe.c")],
        check=True,
    )
    return out


def test_functions_of_an_unloaded_library_raise_a_clear_error(zero_out_path):
    _run(
        """
        import opforge as of
        from opforge import errors

        lib = of.load_op_library(PATH)
        f = lib.zero_out
        assert f(of.constant([3, 2])).numpy().tolist() == [3, 0]
        assert of.ops.zero_out([1, 2]).numpy().tolist() == [1, 0]
        assert of.raw_ops.ZeroOut(to_zero=[1, 2]).numpy().tolist() == [1, 0]
        r = of.unload_op_library(lib)
        assert isinstance(r, of.UnloadReport), r
        assert (r.name, r.version) == ("zero_out", "0.1.0"), r
        assert r.path == lib.__file__
        assert "ZeroOut" in r.ops and "ZeroOutList" in r.ops, r
        assert r.unmapped and r.note is None, r
        # The module's functions: natively (Tensor arguments) and through
        # the Python fallback (a list to convert), eagerly and in a graph.
        calls = [
            lambda: f(of.constant([3, 2])),
            lambda: f([3, 2]),
            lambda: lib.zero_out_int32([1]),
        ]
        for call in calls:
            try:
                call()
            except errors.NotFoundError as e:
                msg = str(e)
                assert "was in op library zero_out 0.1.0 (" + lib.__file__ + ")" in msg, msg
                assert "opforge.unload_op_library unloaded" in msg, msg
                assert "load it again with opforge.load_op_library" in msg, msg
            else:
                raise AssertionError("a function of an unloaded library ran")
        with of.Graph().as_default():
            x = of.placeholder(of.int32, [2])
            try:
                f(x)
            except errors.NotFoundError as e:
                assert "was in op library zero_out 0.1.0" in str(e), str(e)
            else:
                raise AssertionError("a graph took a node of an unloaded op")
        # opforge.ops and opforge.raw_ops lost its functions.
        assert not hasattr(of.ops, "zero_out") and not hasattr(of.raw_ops, "ZeroOut")
        # Unloaded twice, or something never loaded: NotFoundError.
        for what in (lib, PATH, PATH + ".missing"):
            try:
                of.unload_op_library(what)
            except errors.NotFoundError as e:
                assert "no op library loaded from" in str(e), str(e)
            else:
                raise AssertionError("unloaded twice")
        for bad in (of, 3):
            try:
                of.unload_op_library(bad)
            except TypeError as e:
                assert "takes a module load_op_library returned" in str(e), str(e)
            else:
                raise AssertionError(bad)
        # Loaded again: a new module, and the op functions are back.
        lib2 = of.load_op_library(PATH)
        assert lib2 is not lib
        assert lib2.zero_out([5, 4]).numpy().tolist() == [5, 0]
        assert of.ops.zero_out([6, 4]).numpy().tolist() == [6, 0]
        # ... and errors about its ops no longer speak of an unloaded library.
        try:
            lib2.zero_out([1], preserve_index=5)
        except errors.InvalidArgumentError as e:
            assert "unload" not in str(e), str(e)
        # Unloaded by path (a copy of the file is the same library).
        import shutil, tempfile
        copy = tempfile.mkdtemp() + "/libzero_out_copy.so"
        shutil.copy(PATH, copy)
        assert of.unload_op_library(copy).unmapped
        """,
        PATH=zero_out_path,
    )


def test_unload_is_refused_while_graphs_and_functions_use_the_library(zero_out_path):
    _run(
        """
        import opforge as of
        from opforge import errors

        lib = of.load_op_library(PATH)
        g = of.Graph()
        with g.as_default():
            x = of.placeholder(of.int32, [3])
            y = lib.zero_out(lib.zero_out(x))

        @of.function
        def traced(t):
            return lib.zero_out(t)

        assert traced(of.constant([1, 2, 3])).numpy().tolist() == [1, 0, 0]
        try:
            of.unload_op_library(lib)
        except errors.FailedPreconditionError as e:
            msg = str(e)
            assert "op library zero_out 0.1.0 (" in msg and "is in use" in msg, msg
            assert "(2 nodes of ZeroOut)" in msg, msg
            assert "the graph of function 'traced' (1 node of ZeroOut)" in msg, msg
            assert "force=True" in msg, msg
        else:
            raise AssertionError("unloaded while graphs use it")
        # Nothing changed: the library still runs, in graphs too.
        assert lib.zero_out([4, 5]).numpy().tolist() == [4, 0]
        assert g.run(y, {x: [7, 8, 9]}).numpy().tolist() == [7, 0, 0]
        # Dropped (the graphs are in reference cycles: unloading collects them).
        del g, x, y, traced
        r = of.unload_op_library(lib)
        assert r.unmapped, r
        """,
        PATH=zero_out_path,
    )


def test_a_forced_unload_leaves_graphs_that_fail_cleanly(zero_out_path):
    _run(
        """
        import gc
        import opforge as of
        from opforge import errors

        lib = of.load_op_library(PATH)
        g = of.Graph()
        with g.as_default():
            x = of.placeholder(of.int32, [2])
            y = lib.zero_out(x)
        assert g.run(y, {x: [1, 2]}).numpy().tolist() == [1, 0]
        r = of.unload_op_library(lib, force=True)
        # The graph's session holds the kernel: unmapped when it goes.
        assert not r.unmapped and "still held" in r.note, r
        try:
            g.run(y, {x: [1, 2]})
        except errors.OpError as e:
            assert "unloaded" in str(e) or "not registered" in str(e), str(e)
        else:
            raise AssertionError("a graph ran an unloaded library's kernel")
        # Loading it again waits for the graph to go.
        try:
            of.load_op_library(PATH)
        except errors.FailedPreconditionError as e:
            assert "still" in str(e), str(e)
        else:
            raise AssertionError("loaded again while the old one is held")
        del g, x, y
        gc.collect()
        assert of.load_op_library(PATH).zero_out([3, 1]).numpy().tolist() == [3, 0]
        """,
        PATH=zero_out_path,
    )


def test_tensors_in_the_librarys_memory_hold_it(probe_path):
    _run(
        """
        import opforge as of
        from opforge import errors

        lib = of.load_op_library(PATH)
        t = lib.probe_foreign(of.constant(3, dtype=of.int32))
        assert t.numpy().tolist() == [0.0, 1.0, 2.0]
        try:
            of.unload_op_library(lib)
        except errors.FailedPreconditionError as e:
            assert "1 tensor whose memory the library owns" in str(e), str(e)
        else:
            raise AssertionError("unloaded while a tensor lives in its memory")
        del t
        assert of.unload_op_library(lib).unmapped
        """,
        PATH=probe_path,
    )


def test_a_thousand_load_call_unload_cycles_keep_memory_flat(zero_out_path):
    out = _run(
        """
        import opforge as of

        def rss_kib():
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])

        def cycle(i):
            lib = of.load_op_library(PATH)
            y = lib.zero_out(of.constant([i, 1, 2]))
            assert y.numpy().tolist() == [i, 0, 0]
            r = of.unload_op_library(lib)
            assert r.unmapped, r

        for i in range(50):
            cycle(i)
        before = rss_kib()
        for i in range(1000):
            cycle(i)
        after = rss_kib()
        print(before, after)
        """,
        PATH=zero_out_path,
    )
    before, after = map(int, out.split())
    grown = after - before
    # A leak of 4 KiB a cycle (a module, its functions, a kernel) would
    # show as 4 MiB.
    assert grown < 4096, f"resident memory grew by {grown} KiB over 1000 cycles ({before} -> {after})"
