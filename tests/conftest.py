"""Shared test settings: hypothesis profiles ("ci" is the default; "long" and "thorough"
run many more examples, e.g. HYPOTHESIS_PROFILE=long for the guard against silent wrong
numbers, tests/test_silent_guard.py)."""

import os

from hypothesis import HealthCheck, settings

# "ci" is derandomized: a CI run is reproducible, and new examples are explored by the
# "long" and "thorough" profiles on demand.
settings.register_profile(
    "ci", max_examples=200, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=10_000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long", max_examples=5_000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
