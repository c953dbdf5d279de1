"""The guide's Python section (docs/adding-an-op.md, section 10) runs as
written: its code blocks, in order, in a fresh interpreter (it unloads the
library), with this build's path of the zero_out library."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

GUIDE = REPO / "docs" / "adding-an-op.md"
PATH_IN_GUIDE = '"target/debug/libzero_out.so"'


def test_the_guides_python_section_runs(zero_out_path):
    text = GUIDE.read_text()
    section = text[text.index("## 10. Use it from Python") : text.index("## 11. ")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 5, "the section's code blocks"
    code = "\n".join(blocks)
    assert PATH_IN_GUIDE in code
    code = code.replace(PATH_IN_GUIDE, repr(str(zero_out_path)))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(to_zero, preserve_index=0, name=None)", lines
    assert "ZeroOut" in result.stdout


def test_the_guides_python_op_section_runs():
    text = GUIDE.read_text()
    section = text[text.index("## 11. Or write the op in Python") : text.index("## 12. ")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3, "the section's code blocks"
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(blocks)], cwd=REPO, capture_output=True, text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "[0.0, -2.0, 3.0]",
        "[6.0, 12.0]",
        "[0.0, -1.0, 0.699999988079071]",
        "[0.0, 1.0, 1.0]",
        "[0.0, -2.0, 1.399999976158142]",
        "gradient checked",
    ]


def test_the_readmes_mxnet_style_example_runs():
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Operators in Python (MXNet style)") :]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    code = block.replace("print(tape.gradient(p, x))", "g = tape.gradient(p, x)")
    code += (
        "\nx0 = x.numpy()\n"
        "e = np.exp(x0 - x0.max(axis=1, keepdims=True))\n"
        "want = e / e.sum(axis=1, keepdims=True)\n"
        "want[np.arange(4), [0, 1, 2, 1]] -= 1.0\n"
        "assert np.allclose(g.numpy(), want, atol=1e-6), (g, want)\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("ok")


def test_the_guides_cpp_section_is_a_tested_source_and_runs(tmp_path):
    import shutil

    import pytest

    if shutil.which("c++") is None:
        pytest.skip("needs a C++ compiler")
    text = GUIDE.read_text()
    section = text[text.index("## 12. Or bring a TensorFlow C++ source") :]
    (cpp,) = re.findall(r"```cpp\n(.*?)```", section, re.S)
    # The guide's source is the test source that builds against both
    # TensorFlow's headers and opforge's (crates/opforge-cli/tests/tf).
    assert cpp == (REPO / "crates" / "opforge-cli" / "tests" / "tf" / "gradient.cc").read_text()
    (tmp_path / "cube.cc").write_text(cpp)
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["[0.125, -1.0, 8.0] [0.75, 3.0, 12.0]", "True"]
