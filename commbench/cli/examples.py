"""Every command's examples, shown at the end of its --help (`attach`). Each line is a command as
typed, then a comment; tests/cli/test_help.py parses every one with the real commands, so an
example cannot name a flag that does not exist."""

from __future__ import annotations

from rich.markup import escape

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("commbench run -n 4                     # all-reduce, all-gather, reduce-scatter, 8 B .. 16 MB, both modes",
         "commbench sweep --list                 # the bundled suites",
         "commbench run -h                       # any command's flags and examples"),
    "run": ("commbench run -n 4                                # all-reduce, all-gather, reduce-scatter, 8 B .. 16 MB",
            "commbench run -n 2 -c allreduce -d float,half -o sum,max --sizes 8,1K,1M   # nccl-tests' names work",
            "commbench run -n 2 --backend gloo --in-place --repeat 3 --out results/base",
            "commbench run -n 4 --sizes 8,1K,4M --iters 200 --json",
            "commbench run -n 4 -c all_reduce --inject-delay 2=0.3     # rank 2 made late: commbench stragglers"),
    "sweep": ("commbench sweep --list                       # the bundled suites and what each measures",
              "commbench sweep ci --dry-run                 # the points of the ci suite; nothing runs",
              "commbench sweep ci -n 4 --out results/ci     # the suite, with -n 4 for every run",
              "commbench sweep ci --out results/ci --resume  # finish an interrupted sweep"),
    "ab": ("commbench ab -n 2 -c all_reduce --args-a '-a native' --args-b '-a ring_kernel'",
           "commbench ab -n 2 --env-b LD_PRELOAD=/tmp/libslow.so --format markdown",
           "commbench ab -n 4 --python-a base/.venv/bin/python --python-b cand/.venv/bin/python "
           "--output ab.md --output ab.xml"),
    "report": ("commbench report results/base results/cand --output report.html",),
    "check": ("commbench check --launcher-args '--hostfile hosts'      # every node, every node pair's link",
              "commbench check --peers 16 --size 256M --json           # sampled: 16 peers a node, for scripts",
              "commbench check --emulate 8x1 --node-link-rate 3=600mbit   # rehearse (root): names node 3"),
    "stragglers": ("commbench stragglers results/run                       # which rank or node is slow",
                   "commbench stragglers results/nccl --format json       # an nccl-tests -I 1 -J import"),
    "topo-compare": ("commbench topo-compare results/emulated --output comparison.csv",),
    "compare": ("commbench compare results/base results/cand --threshold 5%    # exit 1 on a regression",
                "commbench compare base night1 night2 --output verdicts.md --output trend.html"),
    "topo": ("commbench topo --json",),
    "floor": ("commbench floor            # this machine's floors (cached)", "commbench floor --fresh --json"),
    "model": ("commbench model fit results/run-a results/run-b",
              "commbench model predict --nodes 64 --ranks-per-node 8 --intra 450,2 --inter 50,5"),
    "model fit": ("commbench model fit results/run-a results/run-b --output model.json",),
    "model validate": ("commbench model validate results/run-a",),
    "model predict": ("commbench model predict --nodes 64 --ranks-per-node 8 --intra 450,2 --inter 50,5 -b 8 -e 8G",
                      "commbench model predict --nodes 16 --ranks-per-node 2 --model model.json"),
    "workload": ("commbench workload --list                              # the bundled workloads",
                 "commbench workload llama7b_fsdp_64 -n 4 --scale 0.015625   # measured here, predicted at 64 GPUs",
                 "commbench workload gpt3_175b_512 --no-measure --model model.json --inter 50,5 --intra 450,2",
                 "commbench workload --trace step.json --gpus-per-node 8 -n 4 --compute-ms 900"),
    "import": ("commbench import nccl-tests all_reduce.log --out results/nccl",),
    "import nccl-tests": ("commbench import nccl-tests all_reduce.log --out results/nccl   # text, or -J JSON",
                          "commbench import nccl-tests run.log -c allreduce --label H100"),
    "import osu": ("commbench import osu osu_allgather.txt -n 4 --out results/osu",),
}


def split(example: str) -> tuple[str, str]:
    """An example's command and its comment ("" if none)."""
    command, _, comment = example.partition("  #")
    return command.strip(), comment.strip()


def epilog(path: str) -> str:
    """The examples of the command `path` ("model fit"; "" for commbench itself) as an epilog: each
    comment on its own line above its command, so that neither is wrapped into the other."""
    lines = []
    for example in EXAMPLES[path]:
        command, comment = split(example)
        lines += [f"  # {escape(comment)}"] if comment else []
        lines.append(f"  {escape(command)}")
    return "Examples:\n\n" + "\n".join(lines)


def attach(app, path: str = "") -> None:
    """Give every command and group of `app` registered so far its examples (an epilog it declares
    itself is kept)."""
    from typer.main import get_command_name

    if path in EXAMPLES and not app.info.epilog:
        app.info.epilog = epilog(path)
    for info in app.registered_commands:
        name = f"{path} {info.name or get_command_name(info.callback.__name__)}".strip()
        if name in EXAMPLES and not info.epilog:
            info.epilog = epilog(name)
    for group in app.registered_groups:
        if not group.epilog:  # add_typer(epilog=...) would take precedence
            attach(group.typer_instance, f"{path} {group.name}".strip())
