"""Every elementwise table rule flows through the sparsity tracer as its table says."""

from __future__ import annotations

import numpy as np
import pytest

import dualad as ad
from dualad.derivatives.registry import derivative_kind, rules
from dualad.sparse import hessian_sparsity, jacobian_sparsity

RULES = {rule.name: rule for rule in rules()}
SIZE = 3


def _integer(rule, name):
    domain = (rule.domain or {}).get(name)
    return domain is not None and domain.integer


def _refused(rule, name):
    """An argument whose derivative has no closed form: held constant (1.5), not traced."""
    return derivative_kind(rule.expressions[rule.arg_names.index(name)]) == "refuse"


def _point(rule, rng):
    """The traced (float) arguments side by side; integer arguments stay constants."""
    parts = []
    for name in rule.arg_names:
        domain = (rule.domain or {}).get(name)
        if _refused(rule, name):
            continue
        if domain is None:
            parts.append(rng.uniform(0.5, 1.5, SIZE))
        elif not domain.integer:
            parts.append(np.asarray(domain.sample(rng, (SIZE,)), dtype=np.float64))
    return np.concatenate(parts)


def _split(rule):
    def f(t):
        args, k = [], 0
        for name in rule.arg_names:
            if _integer(rule, name):
                args.append(np.array([1, 2, 3]))
            elif _refused(rule, name):
                args.append(np.full(SIZE, 1.5))
            else:
                args.append(t[k * SIZE:(k + 1) * SIZE])
                k += 1
        return rule.function(*args)

    return f


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_flow_matches_table(name):
    rule = RULES[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    t = _point(rule, rng)
    f = _split(rule)
    pattern = jacobian_sparsity(f)(t).toarray()
    # the declared structure: a diagonal block per argument with a derivative
    expected = np.zeros((SIZE, t.size), dtype=bool)
    k = 0
    for name, d in zip(rule.arg_names, rule.expressions):
        if _integer(rule, name) or _refused(rule, name):
            continue
        if derivative_kind(d) not in ("none", "zero"):
            expected[:, k * SIZE:(k + 1) * SIZE] = np.eye(SIZE, dtype=bool)
        k += 1
    np.testing.assert_array_equal(pattern, expected)
    dense = ad.jacobian(f, mode="forward")(t)
    assert not (dense != 0)[~pattern].any(), "a nonzero derivative outside the pattern"


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_hessian_pattern_covers_dense(name):
    rule = RULES[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32 + 1)
    t = _point(rule, rng)
    f = _split(rule)

    def total(s):
        return np.sum(f(s))

    pattern = hessian_sparsity(total)(t).toarray()
    np.testing.assert_array_equal(pattern, pattern.T)
    try:
        dense = ad.hessian(total)(t)
    except ad.MissingRuleError:
        pytest.skip(f"no second derivative of {name} in dense mode")
    assert not (np.abs(dense) > 1e-12)[~pattern].any(), "a Hessian nonzero outside the pattern"
