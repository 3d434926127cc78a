"""Sparsity detection: a tracer that carries index sets instead of numbers.

index_sets (the set of input entries each entry depends on, as a small CSR structure),
flows (``SparsityTracer`` and ``index_flow``, the rule function that says how entries flow
through each call; the rule families declare their flows with ``declare_*``), detection
(``jacobian_sparsity``, ``hessian_sparsity``). A third mode beside forward and reverse,
independent of both.
"""

__all__: list[str] = []
