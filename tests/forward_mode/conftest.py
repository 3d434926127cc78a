"""Fixtures of the forward-mode tests."""

import pytest

from dualad.forward_mode import dual as dual_module


@pytest.fixture
def general_only(monkeypatch):
    """Forward mode with every fast path record emptied: the general (dispatch) path only."""
    monkeypatch.setattr(dual_module, "_REGISTERED", {})
    dual_module._mark_stale()
    yield
    monkeypatch.undo()
    dual_module._mark_stale()
