"""The engine's core, which knows no particular function and neither mode.

operators (``Method[f]``, ``Broadcasted[f]``), dispatch (the rule functions), tracing
(levels, the innermost traced argument), array_protocol (numpy's protocols and Python's
operators for traced objects), arguments (what transforms take and give back), trees,
unbroadcast, errors.
"""

__all__: list[str] = []
