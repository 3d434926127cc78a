"""Every ```python block of README.md runs, in order, in one namespace, as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 3


@pytest.fixture(scope="module")
def namespace():
    return {"__name__": "readme"}


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, namespace):
    code = compile(BLOCKS[index], f"README.md block {index + 1}", "exec")
    exec(code, namespace)
