"""Every registered rule keeps the per-type method cache valid: resolvable signatures whose
types are all faithful (an instance's type alone decides the method)."""

import warnings

import numpy as np
import plum
import pytest

import dualad as ad

FUNCTIONS = [ad.forward, ad.gradient, ad.backward]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_every_method_resolves_without_warnings(function):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        methods = function.methods  # resolves pending registrations
    assert len(methods) > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ad.grad(lambda x: np.sum(np.sin(x) * x))(np.ones(2))


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_every_signature_is_faithful_after_all_rules(function):
    for method in function.methods:
        sig = method.signature
        types = list(sig.types) + ([sig.varargs] if sig.has_varargs else [])
        unfaithful = [t for t in types if not plum.is_faithful(t)]
        assert not unfaithful, (method, unfaithful)


def test_a_fresh_process_lists_no_builtin_rule_among_user_methods():
    """dualad's own rules (numpy, scipy drop-ins, the engine's methods) are all marked
    built-in: ``user_methods`` of a fresh process is empty, and a user's rule shows up."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        import dualad as ad
        from dualad.scipy_rules import integrate, linalg, special, stats  # noqa: F401
        ad.grad(lambda x: np.sum(np.abs(np.conj(x)) * x[0]))(np.ones(2))  # rules resolved
        print([(f.__name__, str(m.signature)) for f in (ad.gradient, ad.forward, ad.backward)
               for m in f.user_methods])

        @ad.primitive
        def cube(x):
            return x ** 3

        @ad.gradient.dispatch
        def _(op: ad.Method[cube], grad, output, x):
            return (3 * x ** 2 * grad,)

        print(len(ad.gradient.user_methods), len(ad.forward.user_methods))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "1 0"]
