"""commbench: benchmarks for collective communication (all-reduce, all-gather, reduce-scatter)."""

__version__ = "0.1.0"
