"""Workloads: a training job's model and parallelism (config), one step's collectives derived from
them (mix), and the mix as a PARAM comms basic trace, out and back in (param_trace)."""

from commbench.workload.config import WorkloadConfig, load_workload, parse_workload
from commbench.workload.mix import Entry, bytes_by_kind, bytes_per_rank, derive

__all__ = ["Entry", "WorkloadConfig", "bytes_by_kind", "bytes_per_rank", "derive", "load_workload", "parse_workload"]
