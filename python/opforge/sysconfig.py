"""Build flags for op libraries (TensorFlow's `tf.sysconfig`).

A TensorFlow custom-op source builds into an opforge op library with
TensorFlow's documented line and these flags::

    import opforge as of
    flags = of.sysconfig.get_compile_flags() + of.sysconfig.get_link_flags()
    # c++ -std=c++17 -shared -fPIC -O2 zero_out.cc -o zero_out.so <flags>

The headers (the C ABI's `opforge/opforge.h` and the TensorFlow C++ layer
at TensorFlow's paths, `tensorflow/core/framework/op_kernel.h` and the
rest) ship with the package; Eigen 3.4 is the system's (Debian/Ubuntu:
`apt-get install libeigen3-dev`, or set `EIGEN3_INCLUDE_DIR`).
"""

from __future__ import annotations

import os
import warnings

from . import _C

__all__ = ["get_include", "get_lib", "get_compile_flags", "get_link_flags"]


def get_include() -> str:
    """The directory of opforge's headers (`opforge/opforge.h`,
    `tensorflow/core/framework/*.h`)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def get_lib() -> str:
    """The package's directory. Op libraries link no opforge library (every
    call crosses the C ABI), so nothing in it is needed to link one."""
    return os.path.dirname(os.path.abspath(__file__))


def get_compile_flags(lang: str = "c++") -> list[str]:
    """The compiler flags of an op library (`opforge lib cflags`): the
    include directories (opforge's headers, Eigen's), Eigen's alignment as
    TensorFlow builds it, and for C++ the flags that keep the library
    unloadable. `lang="c"` gives the include directory only. Warns when Eigen
    is missing."""
    if lang not in ("c", "c++"):
        raise ValueError(f"lang must be 'c' or 'c++', got {lang!r}")
    flags, missing = _C.compile_flags(get_include(), lang == "c")
    if missing:
        warnings.warn(missing, stacklevel=2)
    return list(flags)


def get_link_flags() -> list[str]:
    """The linker flags of an op library: none (it links no opforge library;
    `tf.sysconfig.get_link_flags()` names libtensorflow_framework, which an
    opforge library does not need)."""
    return []
