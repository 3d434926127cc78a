"""Declarative derivative rules: the tables under ``rules/``, their language and registry.

language (expressions -> checked trees -> numpy and Numba source), tables (reading and
checking ``rules/*.toml``), registry (one ``ElementwiseRule`` per function; each mode
attaches its rule through ``on_rule_registered``).
"""

__all__: list[str] = []
