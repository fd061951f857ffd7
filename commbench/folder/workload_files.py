"""A `commbench workload` OUT folder's own files, next to its measured/ run folders: their names,
the format version of workload.json and the kinds of traffic mix.csv sorts its rows into. Written by
commbench.workload.report, read by the report's workload section (commbench.analysis.report.workload)."""

WORKLOAD_JSON, MIX_CSV = "workload.json", "mix.csv"
FORMAT = 1  # workload.json's "commbench_workload"
KINDS = ("dp", "tp", "pp", "ep")  # data, tensor, pipeline and expert parallel traffic (a trace's own: "other")
