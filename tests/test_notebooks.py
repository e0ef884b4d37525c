"""The notebooks: they run top to bottom, use only public names, and ship with their pictures.

Execution is headless: the test picks matplotlib's backend (``MPLBACKEND=Agg``) for the kernel;
the notebooks never choose one, so in Jupyter they plot inline. The committed notebooks carry the
outputs of ``notebooks/run_all.py``; these tests execute copies and never rewrite them.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import itertools
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
inputtransformer2 = pytest.importorskip("IPython.core.inputtransformer2")

ROOT = Path(__file__).resolve().parents[1]
RUN_ALL = ROOT / "notebooks" / "run_all.py"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]
#: Attribute access through these built-ins is checked like ``obj.name``.
ATTRIBUTE_BUILTINS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
#: Calls that open a new matplotlib figure: the cell making one draws a picture.
FIGURE_CALLS = frozenset({"figure", "subplots", "subplot_mosaic"})
#: Limits that keep the committed outputs small (bytes of PNG, bytes of notebook).
MAX_IMAGE_BYTES = 150_000
MAX_NOTEBOOK_BYTES = 600_000


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebooks_run_all", RUN_ALL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(path: Path, cell_type: str) -> list[Any]:
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == cell_type]


def _parse(cell_source: str) -> ast.Module:
    """A code cell as Python: IPython syntax (magics) translated, top-level ``await`` allowed."""
    python = inputtransformer2.TransformerManager().transform_cell(cell_source)
    tree = compile(python, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert isinstance(tree, ast.Module)
    return tree


def private_accesses(cell_source: str) -> list[str]:
    """Every private name the cell reaches into: ``x._y``, ``getattr(x, "_y")``, imports.

    Names in strings and comments do not count; dunder methods called through syntax
    (``len(x)``, ``x[i]``) never appear as attributes. Explicit dunders (``x.__dict__``) do.
    """
    found = []
    for node in ast.walk(_parse(cell_source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ATTRIBUTE_BUILTINS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("_")
        ):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            parts = (node.module or "").split(".") + [alias.name for alias in node.names]
            found += [f"line {node.lineno}: import {p}" for p in parts if p.startswith("_")]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(p.startswith("_") for p in alias.name.split(".")):
                    found.append(f"line {node.lineno}: import {alias.name}")
    return found


def _draws_a_figure(cell_source: str) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in FIGURE_CALLS
        for node in ast.walk(_parse(cell_source))
    )


# -- the private-name check itself -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("env._group_tasks[0]", ["line 1: ._group_tasks"]),
        ("x = getattr(env, '_group_tasks')", ["line 1: getattr(..., '_group_tasks')"]),
        ("from collimate_envs._tasks import TaskChooser", ["line 1: import _tasks"]),
        ("from collimate_envs.tasks import _model", ["line 1: import _model"]),
        ("import collimate_envs._groups", ["line 1: import collimate_envs._groups"]),
        ("name = type(x).__name__", ["line 1: .__name__"]),
        ("await client.reset()\nclient._ws", ["line 2: ._ws"]),
        ("%matplotlib inline\nenv._x", ["line 2: ._x"]),
    ],
)
def test_private_access_is_found(source: str, expected: list[str]) -> None:
    assert private_accesses(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "print('env._group_tasks')  # env._private in a comment",
        "code = '_orig = f'\n_, reward, *_ = env.step(code)",
        "len(tasks), tasks[0], task == other",
        "getattr(env, name)",
        "from __future__ import annotations",
    ],
)
def test_strings_names_and_syntax_dunders_are_not_private_access(source: str) -> None:
    assert private_accesses(source) == []


# -- the committed notebooks -----------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_uses_only_public_names(path: Path) -> None:
    for index, cell in enumerate(_cells(path, "code")):
        assert private_accesses(cell.source) == [], f"{path.name}, code cell {index}"


def chooses_a_backend(cell_source: str) -> bool:
    """Whether the cell picks matplotlib's backend (``matplotlib.use``, ``%matplotlib``, ...)."""
    for node in ast.walk(_parse(cell_source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if node.func.attr == "switch_backend" or (
            node.func.attr == "use"
            and isinstance(owner, ast.Name)
            and owner.id in {"matplotlib", "mpl"}
        ):
            return True
        if node.func.attr == "run_line_magic" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value in {"matplotlib", "pylab"}:
                return True
    return False


@pytest.mark.parametrize(
    ("source", "chooses"),
    [
        ('import matplotlib\nmatplotlib.use("Agg")', True),
        ("%matplotlib inline", True),
        ('plt.switch_backend("agg")', True),
        ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()", False),
        ("styles.use(theme)", False),
    ],
)
def test_backend_choice_is_found(source: str, chooses: bool) -> None:
    assert chooses_a_backend(source) is chooses


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_never_chooses_the_matplotlib_backend(path: Path) -> None:
    for cell in _cells(path, "code"):
        assert not chooses_a_backend(cell.source), cell.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_picture_is_introduced_by_a_sentence(path: Path) -> None:
    cells = nbformat.read(path, as_version=4).cells
    for before, cell in itertools.pairwise(cells):
        if cell.cell_type == "code" and _draws_a_figure(cell.source):
            assert before.cell_type == "markdown" and before.source.strip(), cell.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_with_its_outputs(path: Path) -> None:
    """Run in order by ``run_all.py``, no errors, a PNG for every picture, small enough."""
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, "outputs too large: smaller figures"
    cells = _cells(path, "code")
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), (
        f"{path.name} is not committed as executed top to bottom: run notebooks/run_all.py"
    )
    for cell in cells:
        assert all(out.output_type != "error" for out in cell.outputs), cell.source
        images = [
            base64.b64decode(out.data["image/png"])
            for out in cell.outputs
            if out.output_type == "display_data" and "image/png" in out.get("data", {})
        ]
        if _draws_a_figure(cell.source):
            assert images, f"{path.name}: no picture saved for\n{cell.source}"
        assert all(len(image) <= MAX_IMAGE_BYTES for image in images)


# -- execution -------------------------------------------------------------------------------


def _headless_env() -> dict[str, str]:
    return {**os.environ, "MPLBACKEND": "Agg"}


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_executes(path: Path, tmp_path: Path) -> None:
    before = path.read_bytes()
    book = _runner().execute(path, workdir=tmp_path, env=_headless_env())
    assert all(c.execution_count for c in book.cells if c.cell_type == "code")
    assert path.read_bytes() == before  # executed a copy


@pytest.mark.slow
def test_run_all_writes_outputs_with_inline_pictures(tmp_path: Path, monkeypatch: Any) -> None:
    """Regeneration plots inline (PNG outputs) even when the caller's environment says Agg."""
    source = (
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(2, 1))\nax.plot([0, 1])"
    )
    book = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("A line."), nbformat.v4.new_code_cell(source)]
    )
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    path = tmp_path / "tiny.ipynb"
    nbformat.write(book, path)
    failing = tmp_path / "broken.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")]), failing)
    broken_before = failing.read_bytes()
    monkeypatch.setenv("MPLBACKEND", "Agg")

    outcome = _runner().regenerate([path, failing])

    assert isinstance(outcome[path], float)
    assert isinstance(outcome[failing], Exception)
    assert failing.read_bytes() == broken_before  # a failed notebook is left as it was
    written = json.loads(path.read_text())
    outputs = written["cells"][1]["outputs"]
    assert any("image/png" in out.get("data", {}) for out in outputs), outputs
    assert "execution" not in written["cells"][1]["metadata"]  # no timing stamps in the diff
