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
