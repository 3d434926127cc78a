"""Every registered rule keeps plum's fast path: resolvable signatures, cacheable resolver."""

import warnings

import numpy as np
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
def test_resolver_stays_faithful_after_all_rules(function):
    _ = function.methods
    assert function._resolver.is_faithful
