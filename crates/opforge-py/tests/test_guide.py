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
    section = text[text.index("## 10. Use it from Python") :]
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
