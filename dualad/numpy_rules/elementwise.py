"""Elementwise rules: registered from the declarative tables under ``rules/``."""

from __future__ import annotations

try:
    from ..rule_generator import register_tables
except ImportError:  # the generator is not available yet
    register_tables = None

if register_tables is not None:
    register_tables()
