"""Each public module shows its documented surface in ``dir()``, nothing else (no ``np``,
``Any``, ``functools`` or helper leaking), and every name it shows is there."""

import importlib
import re
import warnings

import pytest
import scipy.special

import dualad as ad

API_MD_NAMES = {  # the public API contract (/work/shared/API.md): names under ``ad.``
    "grad", "value_and_grad", "jacobian", "jvp", "vjp", "hessian", "derivative",
    "AbstractNode", "LeafNode", "Variable", "Node", "CachedNode", "register", "primitive",
    "value", "forward", "backward", "gradient", "Operator", "Method", "Broadcasted",
    "MissingRuleError", "Dual", "define_rule", "gradcheck", "GradcheckError", "DualadError",
    "ShapeError", "ode_jacobian", "jacobian_sparsity", "sparse_jacobian", "sparse_hessian",
    "color_columns", "record", "hvp", "taylor_test", "to_dot", "register_tree",
}

# module -> its surface: __all__, plus what it forwards
FACES = {
    "dualad": lambda m: {*m.__all__, "__version__"},
    "dualad.extend": lambda m: set(m.__all__),
    "dualad.api": lambda m: set(m.__all__),
    "dualad.diagnostics": lambda m: set(m.__all__),
    "dualad.sparse": lambda m: set(m.__all__),
    "dualad.tape": lambda m: set(m.__all__),
    "dualad.scipy_rules.integrate": lambda m: set(m.__all__),
    "dualad.scipy_rules.linalg": lambda m: set(m.__all__),
    "dualad.scipy_rules.stats": lambda m: set(m.__all__),
    "dualad.scipy_rules.special": lambda m: set(m.__all__) | {
        n for n in dir(scipy.special) if not n.startswith("_")},
}

DROP_INS = ["special", "stats", "linalg", "integrate"]


@pytest.mark.parametrize("name", sorted(FACES))
def test_dir_is_the_documented_surface(name):
    module = importlib.import_module(name)
    assert dir(module) == sorted(FACES[name](module))


@pytest.mark.parametrize("name", sorted(FACES))
def test_every_name_shown_is_there(name):
    module = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no name of the surface is a deprecated one
        for attr in module.__all__:
            assert getattr(module, attr) is not None, attr


@pytest.mark.parametrize("name", DROP_INS)
def test_drop_in_functions_are_documented_in_the_module(name):
    module = importlib.import_module(f"dualad.scipy_rules.{name}")
    words = set(re.findall(r"\w+", module.__doc__))
    assert set(module.__all__) <= words


def test_special_leaks_nothing_of_its_own():
    from dualad.scipy_rules import special

    shown = set(dir(special))
    for leaked in ("np", "Any", "functools", "primitive", "composite_rules", "constant"):
        assert leaked not in shown


def test_the_top_level_keeps_every_contract_name():
    assert API_MD_NAMES <= set(dir(ad))


def test_extend_old_names_warn_and_still_work():
    from dualad import extend

    with pytest.warns(DeprecationWarning, match="define_table_rules"):
        assert extend.register_tables is extend.define_table_rules
    with pytest.warns(DeprecationWarning, match="zero_partials"):
        assert callable(extend.zero_partials)
    with pytest.raises(AttributeError, match="no_such_name"):
        extend.no_such_name  # noqa: B018


@pytest.mark.parametrize("old", sorted(__import__("dualad.extend").extend._MOVED))
def test_every_old_extend_name_leads_where_its_warning_says(old):
    from dualad import extend

    module, new = extend._MOVED[old]
    assert old not in dir(extend)
    with pytest.warns(DeprecationWarning, match=rf"dualad\.extend\.{old} is deprecated; "
                                                rf"use {re.escape(module)}\.{new}"):
        found = getattr(extend, old)
    assert found is getattr(importlib.import_module(module), new)


def _names_taken_from_extend(path):
    """Names a file takes from dualad.extend: imported from it, or read as ``extend.<name>``."""
    import ast

    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("extend"):
            names.update(a.name for a in node.names)
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "extend"):
            names.add(node.attr)
    return names


def test_extend_exports_only_names_in_use():
    """Every name of dualad.extend is used by dualad's own rules or by rules the tests
    write, or documented for rule writers (the README, the contract's ``define_rule``)."""
    import pathlib

    from dualad import extend

    root = pathlib.Path(__file__).resolve().parents[1]
    used = set()
    for folder in ("dualad/numpy_rules", "dualad/scipy_rules", "tests"):
        for path in (root / folder).rglob("*.py"):
            used |= _names_taken_from_extend(path)
    readme = (root / "README.md").read_text()
    used |= set(re.findall(r"extend\.(\w+)", readme))
    used |= {"define_rule"}  # the contract: import dualad.extend ... define_rule
    assert set(extend.__all__) - used == set()


def test_every_module_declares_its_names():
    """Every module of the package has ``__all__`` (read from the source, nothing imported)."""
    import ast
    import pathlib

    package = pathlib.Path(ad.__file__).parent
    missing = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        targets = [t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                   for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                   if isinstance(t, ast.Name)]
        if "__all__" not in targets:
            missing.append(str(path.relative_to(package)))
    assert missing == []


def test_no_module_of_dualad_uses_a_dropped_extend_name():
    """Importing every module of the package warns of no name dualad.extend dropped (the
    rule files use its current surface)."""
    import subprocess
    import sys

    code = ("import importlib, pkgutil, dualad\n"
            "for m in pkgutil.walk_packages(dualad.__path__, 'dualad.'):\n"
            "    if m.name != 'dualad.__main__':\n"
            "        importlib.import_module(m.name)\n")
    subprocess.run([sys.executable, "-W", "error:dualad.extend.:DeprecationWarning", "-c",
                    code], check=True, capture_output=True, text=True)
