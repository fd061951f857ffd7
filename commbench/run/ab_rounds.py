"""`commbench ab`'s rounds (commbench.run.ab): the jobs that serve the sides, each point's turns
(ABBA), its rows and samples written as measured, and the rounds until the gate (commbench.analysis.
paired) has settled every point, the last round, or the budget."""

from __future__ import annotations

import time

import numpy as np

from commbench import interrupts, runinfo
from commbench.analysis import paired
from commbench.errors import JobError
from commbench.metrics import summarize
from commbench.rank import arena
from commbench.run import launch
from commbench.run.ab_sides import AbSide, Compared, arena_layout
from commbench.folder.write import RunFolder
from commbench.run.jobs import blocks
from commbench.run.turn_server import STARTUP_TIMEOUT_S, TurnJob, TurnServer
from commbench.folder.schema import AB_COLUMNS, AB_SAMPLE_COLUMNS, RunStatus, build_row
from commbench.spec import SweepSpec

PAIRS_PER_ROUND = 8
SAMPLES_PER_TURN = 3


class AbFolder(RunFolder):
    columns, sample_columns = AB_COLUMNS, AB_SAMPLE_COLUMNS


def turn_order(round_no: int, pairs: int) -> list[tuple[str, int]]:
    """(side, pair) of each turn of a round: ABBA ABBA..., starting with B every other round."""
    out = []
    for k in range(pairs):
        first, second = ("A", "B") if (k + round_no) % 2 == 0 else ("B", "A")
        out += [(first, k), (second, k)]
    return out


class Measure:
    """The comparison as it goes: its jobs, the folder, each point's pairs, the gate."""

    def __init__(self, a: AbSide, b: AbSide, folder: AbFolder, grain: str, launcher: str, launcher_args: list[str],
                 relay, on_event):
        self.sides = {"A": a, "B": b}
        self.folder, self.grain = folder, grain
        self.launcher, self.launcher_args = launcher, launcher_args
        self.relay, self.on_event = relay, on_event
        self.server = TurnServer(local=launch.ranks_here(launcher, launcher_args), unix=launcher == "emulated")
        self.jobs: dict[tuple[str, int], TurnJob] = {}  # (side, launch pair) -> the job serving it
        self.launch_pairs = 1  # pairs of jobs alive at once (the token grain: LAUNCH_PAIRS)
        self.active = 1  # the launch pair measuring this round
        self.facts: dict[str, dict] = {}

    # --- jobs -------------------------------------------------------------------------------------
    def start(self, sides: list[str], launch_pairs: int = 1) -> None:
        """Launch the jobs for these sides: one serving both (in-process), or one each, `launch_pairs`
        times over (all alive together, taking turns)."""
        groups = [sides] if self.grain == "in-process" else [[s] for s in sides]
        new = []
        for j in range(1, launch_pairs + 1):
            for group in groups:
                first = self.sides[group[0]]
                job = TurnJob("".join(group) + (str(j) if launch_pairs > 1 else ""),
                              {s: self.sides[s].spec for s in group}, self.launcher, self.launcher_args,
                              first.python, first.env, self.server, self.relay)
                new.append(job)
                self.jobs.update({(s, j): job for s in group})
        self.launch_pairs, self.active = launch_pairs, 1
        self.server.accept(new, time.monotonic() + STARTUP_TIMEOUT_S)
        for job in new:
            for side in job.sides:
                self.facts.setdefault(side, job.facts)

    def job(self, side: str) -> TurnJob:
        """The job serving `side` in the launch pair measuring now."""
        return self.jobs[side, self.active]

    def _unique(self) -> list[TurnJob]:
        return list({id(j): j for j in self.jobs.values()}.values())

    def stop(self) -> None:
        for job in self._unique():
            job.end()
        self.jobs.clear()

    def kill(self) -> None:
        for job in self._unique():
            job.kill()
        self.jobs.clear()

    # --- one point, one round -----------------------------------------------------------------------
    def _timeout(self, c: Compared) -> float:
        return max(s.spec.point_timeout(c.a.size if s.name == "A" else c.b.size) for s in self.sides.values())

    def _ask(self, side: str, c: Compared, command: dict, what: str) -> dict:
        return self.job(side).request(command, self._timeout(c), f"{c.title} ({what})")

    def point_round(self, c: Compared, round_no: int, sides: list[str], order: list[tuple[str, int]]) -> bool:
        """Prepare the point on these sides, take the turns, check it, write its rows; False when it
        cannot run (c.skip says why)."""
        index = {"A": c.a.index, "B": c.b.index}
        info: dict[str, dict] = {}
        for job in {id(self.job(s)): self.job(s) for s in sides}.values():  # a job with both: one command
            mine = [s for s in sides if self.job(s) is job]
            got = job.request({"cmd": "prepare", "points": {s: index[s] for s in mine}}, self._timeout(c),
                              f"{c.title} (prepare, side {'/'.join(mine)})")
            info.update(got.get("prepared", {}))
        skips = [f"side {s}: {info[s]['skip']}" for s in sides if "skip" in info.get(s, {})]
        if skips:
            c.skip, c.skipped_by = "; ".join(skips), tuple(s for s in sides if "skip" in info.get(s, {}))
            self._finish(c, sides)
            return False
        for s in sides:
            for note in info[s].get("notes", []):
                self.on_event({"event": "warning", "text": f"side {s}: {note}"})
        if c.batch is None and self.grain != "launch":
            c.batch = max(info[s]["batch"] for s in sides)
        turns: list[list] = []  # consecutive turns of one job go as one command
        for side, pair in order:
            batch = c.batch if self.grain != "launch" else info[side]["batch"]
            if turns and self.job(turns[-1][0][0]) is self.job(side):
                turns[-1].append((side, pair, batch))
            else:
                turns.append([(side, pair, batch)])
        got: dict[str, dict[int, list[float]]] = {s: {} for s in sides}
        for group in turns:
            fill = len(sides) > 1 and (c.a.dtype, c.a.op) != (c.b.dtype, c.b.op)  # one memory, two patterns
            answer = self._ask(group[0][0], c, {"cmd": "turns", "turns": [[s, b, SAMPLES_PER_TURN, fill]
                                                                          for s, _, b in group]},
                               f"turns, side {group[0][0]}")
            for (side, pair, _), samples in zip(group, answer["samples"], strict=True):
                got[side].setdefault(pair, []).extend(samples)
        wrong = self._finish(c, sides)
        for s in sides:
            self._record(c, s, round_no, info[s], got[s], wrong.get(s, 0))
        return True

    def _finish(self, c: Compared, sides: list[str]) -> dict:
        wrong = {}
        for job in {id(self.job(s)): self.job(s) for s in sides}.values():
            wrong.update(job.request({"cmd": "finish"}, self._timeout(c), f"{c.title} (check)").get("wrong", {}))
        return wrong

    def _record(self, c: Compared, side: str, round_no: int, info: dict, by_pair: dict[int, list[float]],
                wrong: int) -> None:
        point = c.a if side == "A" else c.b
        spec, facts = self.sides[side].spec, self.facts.get(side, {})
        samples_us = [t for pair in sorted(by_pair) for t in by_pair[pair]]
        tags = [{"side": side, "round": round_no, "pair": pair} for pair in sorted(by_pair) for _ in by_pair[pair]]
        for pair, values in by_pair.items():
            c.samples[side][(round_no, pair)] = values
        batch = c.batch or info["batch"]
        row = build_row(run_id=spec.run_id, label=spec.label, point=point.index, collective=point.collective,
                        backend=point.backend, algorithm=point.algorithm, device=spec.device, dtype=point.dtype,
                        op=point.op or "none", in_place=point.in_place, world_size=facts.get("world_size", spec.nprocs),
                        nodes=facts.get("nodes"), ranks_per_node=facts.get("ranks_per_node"),
                        size_bytes=info["size_bytes"], count=info["count"],
                        **summarize(np.asarray(samples_us) / 1e6), iterations=len(samples_us) * batch,
                        batch=batch, warmup=info["warmup"], timer=info["timer"], wrong=wrong,
                        library_choice=info.get("library_choice"), placement=spec.row_placement,
                        registration=spec.row_registration, side=side, round=round_no)
        with interrupts.deferred():
            self.folder.add(row, samples_us, tags)
        self.on_event({"event": "row", "row": row})

    # --- rounds -------------------------------------------------------------------------------------
    def round(self, round_no: int, todo: list[Compared]) -> None:
        if self.grain != "launch":
            self.active = (round_no - 1) % self.launch_pairs + 1
            self.folder.job = self.active  # rows and samples: which pair of launches measured them
            for c in todo:
                self.point_round(c, round_no, ["A", "B"], turn_order(round_no, PAIRS_PER_ROUND))
            return
        plan_a = [c.a for c in todo]
        by_index = {c.a.index: c for c in todo}
        for b_no, block in enumerate(blocks(plan_a)):
            order = ["A", "B"] if (round_no + b_no) % 2 == 0 else ["B", "A"]
            for side in order:
                self.start([side])
                try:
                    for i in block:
                        self.point_round(by_index[i], round_no, [side], [(side, 0)] * PAIRS_PER_ROUND)
                finally:
                    self.stop()


def shared_arena(a: SweepSpec, b: SweepSpec, launcher: str, launcher_args: list[str], on_event) -> tuple[str, int] | None:
    """The arena both sides' buffers lie in (its file and stride), or None, said, where there can be none."""
    why = ("GPU buffers" if "cuda" in (a.device, b.device) else
           "the ranks are not all on this machine" if not launch.ranks_here(launcher, launcher_args) else None)
    if why is None:
        stride, nbytes = arena_layout(a, b)
        path = arena.create(a.run_id, nbytes)
        if path:
            return path, stride
        why = f"{nbytes / 1e9:.3g} GB do not fit in {arena.SHM_DIR}"
    on_event({"event": "warning", "text": f"each side's buffers are its own ({why}): where they lie can move a point "
                                          "by a few percent, which the pairs cannot cancel"})
    return None


def rounds_until_settled(m: Measure, compared: list[Compared], threshold: float, budget_s: float, max_rounds: int, first: int,
            launch_pairs: int) -> tuple[int, paired.Gate | None, str | None]:
    """Rounds until every point is settled, the last round, or the budget; (rounds, gate, the error
    that ended them or None). A signal kills the jobs and marks the folder interrupted."""
    start, rounds, last, gate = time.monotonic(), 0, 0.0, None
    measured: list[Compared] = []
    try:
        if m.grain != "launch":
            m.start(["A", "B"], launch_pairs)
            m.folder.update({**m.facts.get("A", {}), "sides_facts": m.facts}, sent=True)
        for r in range(1, max_rounds + 1):
            todo = [c for c in compared if c.skip is None and c.open]
            if not todo or (r > first and time.monotonic() - start + last > budget_s):
                break
            began = time.monotonic()
            m.round(r, todo)
            rounds, last = r, time.monotonic() - began
            if m.grain == "launch" and r == 1:
                m.folder.update({**m.facts.get("A", {}), "sides_facts": m.facts}, sent=True)
            if gate is None:  # the points that run here are known after the first round
                measured = [c for c in compared if c.skip is None]
                gate = paired.Gate(len(measured), threshold, max_rounds, first=first)
            if r in gate.looks:
                gate.look([c.blocks(launch_pairs) for c in measured], last=r == max_rounds)
                for c, v in zip(measured, gate.verdicts, strict=True):
                    c.open = not v.settled
            m.on_event({"event": "round", "round": r, "open": sum(c.open for c in measured),
                        "seconds": time.monotonic() - start})
        m.stop()
    except (KeyboardInterrupt, BrokenPipeError):
        with interrupts.deferred():
            m.kill()
            m.folder.update({"status": RunStatus.INTERRUPTED, "end_time": runinfo.utc_now(), "rounds": rounds})
        raise
    except JobError as exc:
        m.kill()
        return rounds, gate, str(exc)
    return rounds, gate, None
