"""`sweep SUITE --dry-run`: what each run of a suite would measure, without running it."""

from __future__ import annotations

import shlex

from commbench.options import MODES

_MODE_OF = {values: mode for mode, values in MODES.items()}


def _mode(in_place: bool) -> str:
    return "in-place" if in_place else "out-of-place"


def spec_lines(spec) -> list[str]:
    """One line per combination (SweepSpec.combinations, in the plan's order) of collective, backend,
    algorithm, dtype, op and buffer mode, with its sizes."""
    from commbench.spec import format_size

    sizes = " ".join(format_size(s) for s in spec.sizes)
    return [f"  {c:15} {b:5} {a:22} {d:9} {o or 'none':5} {_mode(m):12} {sizes}"
            for b, c, a, d, o, m in spec.combinations()]


def print_suite(suite) -> None:
    """Each run: its layout and timing choices, its points (one line per combination), and the total."""
    total = 0
    print(f"suite {suite.name} ({suite.path}): {len(suite.runs)} runs; nothing is run (--dry-run)")
    for run in suite.runs:
        s = run.spec
        n = s.point_count()
        total += n * run.repeat
        timing = f"{s.iters} iterations" if s.iters is not None else f"{s.min_time:g} s per point (<= {s.max_iters})"
        extra = [f"emulate {s.emulate}"] if s.emulate else []
        extra += [f"{s.ranks_per_node} ranks per node"] if s.ranks_per_node else []
        extra += [f"launcher args: {shlex.join(run.launcher_args)}"] if run.launcher_args else []
        print(f"\n== {run.label}: {n} points x {run.repeat} job{'s' if run.repeat > 1 else ''}; {s.nprocs} ranks, "
              f"device {s.device}, launcher {s.launcher}, {timing}" + "".join(f", {e}" for e in extra))
        print(f"  {'collective':15} {'backend':5} {'algorithm':22} {'dtype':9} {'op':5} {'mode':12} sizes")
        for line in spec_lines(s):
            print(line)
    print(f"\n{total} points in all (jobs counted)")
