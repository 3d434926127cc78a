"""dualad benchmarks: ``python -m benchmarks`` runs them and writes BENCHMARKS.md."""
