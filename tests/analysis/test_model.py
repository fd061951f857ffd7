"""The cost model: its formulas, that a fit recovers known parameters, the CLI on a real sweep,
and predictions in the results layout that the report reads."""

import importlib
import json
import math

import numpy as np
import pandas as pd
import pytest

from commbench.analysis.model.costs import Params, Shape, modelled, time_s
from commbench.analysis.model.fit import calls_of, fit, fit_backend, predicted_s, usable_rows
from commbench.analysis.model.model_file import from_json, to_json
from commbench.analysis.model.validate import held_out, summary
from commbench.analysis.model.predict import predict, predicted
from commbench.algorithms import ALGORITHMS
from conftest import commbench, needs_mpirun
from commbench.errors import BAD_INPUT, OK

BETA_ONLY = Params(0.0, 1e-9, 0.0, 1e-8, 0.0)


def test_ring_and_hierarchical_closed_forms():
    N = 2**26
    one_node = Shape(1, 4)
    assert time_s(BETA_ONLY, "ring", "all_reduce", one_node, N) == pytest.approx(2 * 3 / 4 * N * 1e-9)
    two_by_two = Shape(2, 2)
    ring = time_s(BETA_ONLY, "ring", "all_reduce", two_by_two, N)
    assert ring == pytest.approx(2 * 3 / 4 * N * 1e-8 + 0)  # every step waits for the crossing edges
    free_intra = Params(0.0, 0.0, 0.0, 1e-8, 0.0)
    hier = time_s(free_intra, "hierarchical", "all_reduce", two_by_two, N)
    assert hier == pytest.approx(N * 1e-8, rel=1e-9)  # node link carries 2(M-1)/M·N = N
    assert ring / hier == pytest.approx(1.5)  # the theory for 2x2
    robin = Shape(2, 2, "round-robin")
    assert (time_s(free_intra, "ring", "all_reduce", robin, N)
            / time_s(free_intra, "ring_topology", "all_reduce", robin, N)) == pytest.approx(2.0)
    assert time_s(BETA_ONLY, "tree", "all_gather", one_node, N) is None


def test_latency_terms_count_steps():
    alpha = Params(1e-6, 0.0, 1e-5, 0.0, 0.0)
    assert time_s(alpha, "ring", "all_reduce", Shape(1, 8), 8) == pytest.approx(2 * 7 * 1e-6)
    assert time_s(alpha, "tree", "all_reduce", Shape(1, 8), 8) == pytest.approx(2 * 3 * 1e-6)
    assert time_s(alpha, "rhd", "all_reduce", Shape(1, 8), 8) == pytest.approx(2 * 3 * 1e-6)
    assert time_s(alpha, "rhd", "all_reduce", Shape(1, 6), 8) == pytest.approx((2 * 2 + 2) * 1e-6)  # fold
    # hierarchical on 4x2: 2(G-1) intra steps + 2(M-1) inter steps
    assert time_s(alpha, "hierarchical", "all_reduce", Shape(4, 2), 8) == pytest.approx(2 * 1e-6 + 6 * 1e-5)


STEP_ALGORITHMS = [a for a in modelled() if ALGORITHMS[a].engine == "steps" and "all_reduce" in ALGORITHMS[a].collectives]


def _synthetic(params, noise, seed=0, size_step=2, algos=STEP_ALGORITHMS,
               shapes=(Shape(1, 4, lanes=2), Shape(2, 2, lanes=2))):  # 4 ranks share 2 lanes on one node
    rng = np.random.default_rng(seed)
    rows = []
    for shape in shapes:
        for algo in algos:
            for size in (2**k for k in range(3, 29, size_step)):  # 8 B .. 128 MB: beyond the cache too
                t = time_s(params, algo, "all_reduce", shape, size)
                rows.append({"backend": "gloo", "algorithm": algo, "collective": "all_reduce", "size_bytes": size,
                             "world_size": shape.n, "nodes": shape.nodes, "ranks_per_node": shape.per_node,
                             "placement": "block", "wrong": 0, "time_us": t * 1e6 * math.exp(rng.normal(0, noise))})
    return usable_rows(pd.DataFrame(rows))


def test_fit_recovers_known_parameters():
    truth = Params(2e-5, 5e-10, 8e-5, 8e-9, 3e-10, mem_factor=1.0, cache_bytes=64e6)
    model = fit_backend(_synthetic(truth, 0.03), "gloo")
    assert model.lanes == 2
    for name, value in truth.__dict__.items():  # the truth lies within the reported uncertainty
        assert abs(math.log(model.params[name] / value)) <= 3 * model.rel_std[name] + 0.02, name
    for name in ("alpha_intra", "alpha_inter", "beta_inter"):  # these the sweep pins down
        assert model.params[name] == pytest.approx(truth.__dict__[name], rel=0.25), name
    assert model.median_error < 0.05
    exact = fit_backend(_synthetic(truth, 0.0), "gloo")
    assert exact.lanes == 2 and exact.median_error < 1e-6
    for name, value in truth.__dict__.items():
        assert exact.params[name] == pytest.approx(value, rel=1e-3), name


def test_a_point_measured_in_several_jobs_is_evaluated_once(monkeypatch):
    truth = Params(2e-5, 5e-10, 8e-5, 8e-9, 3e-10)
    rows = _synthetic(truth, 0.0)
    jobs = pd.concat([rows, rows, rows], ignore_index=True)  # each point three times, as three jobs give it
    distinct, of_row = calls_of(jobs, 1, 2)
    assert len(distinct) == len(rows) and len(of_row) == 3 * len(rows)
    one_by_one = [time_s(truth, r.algorithm, r.collective, Shape(r.nodes, r.ranks_per_node, r.placement, 1, 2),
                         r.size_bytes) for r in jobs.itertuples()]
    evaluated = []
    monkeypatch.setattr(importlib.import_module("commbench.analysis.model.fit"), "time_s",
                        lambda *call: evaluated.append(call) or time_s(*call))
    assert np.array_equal(predicted_s(truth, jobs, 1, 2), np.array(one_by_one))
    assert len(evaluated) == len(rows)  # once a point, not once a row


def test_held_out_error_and_uninformed_parameters():
    truth = Params(2e-5, 5e-10, 8e-5, 8e-9, 3e-10)
    rows = _synthetic(truth, 0.02, size_step=4)  # 8 B, 128 B, ... 128 MB: every refit is a whole fit
    s = summary(held_out(rows, "algorithm"))
    assert s["median_abs_error"] < 0.1 and s["points"] > 0
    single = rows[rows.nodes == 1]
    model = fit_backend(single, "gloo")
    assert model.params["alpha_inter"] is None and model.params["beta_inter"] is None


def test_kernels_are_fitted_apart_and_predicted_with_their_own_parameters(tmp_path):
    steps = Params(2e-5, 5e-10, 0.0, 0.0, 3e-10)
    flags = Params(2e-7, 2e-10, 0.0, 0.0, 1e-10)  # a flag hand-off: 100x less α
    one_node = (Shape(1, 4, lanes=2),)
    rows = pd.concat([_synthetic(steps, 0.0, size_step=4, algos=["ring", "tree", "rhd"], shapes=one_node),
                      _synthetic(flags, 0.0, size_step=4, algos=["ring_kernel", "tree_kernel"], shapes=one_node)])
    native = rows[rows.algorithm == "ring"].assign(algorithm="native")  # not modelled: in no group
    fits = {f.group: f for f in fit(pd.concat([rows, native]))}
    assert set(fits) == {"gloo", "gloo/kernel"}
    assert fits["gloo"].algorithms == ["rhd", "ring", "tree"]
    assert fits["gloo/kernel"].algorithms == ["ring_kernel", "tree_kernel"]
    assert fits["gloo/kernel"].engine == "kernel" and fits["gloo/kernel"].backend == "gloo"
    assert fits["gloo"].median_error < 1e-6 and fits["gloo/kernel"].median_error < 1e-6  # each its own α
    for group, truth in (("gloo", steps), ("gloo/kernel", flags)):  # α and lanes trade off: compare times
        f, shape = fits[group], Shape(1, 4, lanes=fits[group].lanes)
        assert time_s(f.to_params(), "ring", "all_reduce", shape, 8) == pytest.approx(
            time_s(truth, "ring", "all_reduce", one_node[0], 8), rel=1e-3)
    held = held_out(rows, "size_bytes")
    assert set(held.group) == {"gloo", "gloo/kernel"} and held.error.abs().max() < 1e-3
    loaded = from_json(json.loads(json.dumps(to_json(list(fits.values()), ["x"]))), "gloo")
    assert [f.group for f in loaded] == ["gloo", "gloo/kernel"]
    assert loaded[1].to_params() == fits["gloo/kernel"].to_params()
    params = {"steps": steps, "kernel": flags}
    table = predict(params, Shape(1, 8), "all_reduce", [8]).set_index("algorithm").time_us
    assert table["ring_kernel"] == pytest.approx(2 * 7 * 2e-7 * 1e6, rel=1e-2)  # 2(n-1) hand-offs
    assert table["ring"] == pytest.approx(2 * 7 * 2e-5 * 1e6, rel=1e-2)
    two_nodes = predict(params, Shape(2, 4), "all_reduce", [8])
    assert "ring_kernel" not in set(two_nodes.algorithm) and "ring" in set(two_nodes.algorithm)  # one node only
    assert "ring_kernel" not in set(predict(steps, Shape(1, 8), "all_reduce", [8]).algorithm)  # no kernel parameters
    model = tmp_path / "model.json"
    model.write_text(json.dumps(to_json(list(fits.values()), ["x"])))
    proc = commbench("model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model, "-e", "1M", check_rc=OK)
    assert "ring_kernel" in proc.stdout and "gloo, gloo/kernel" in proc.stdout
    proc = commbench("model", "predict", "--nodes", 2, "--ranks-per-node", 2, "--model", model, "--inter", "10,5",
                     "-e", "1M", check_rc=OK)
    assert "ring_kernel" not in proc.stdout and "ring" in proc.stdout


@needs_mpirun
def test_fit_validate_predict_on_a_real_sweep(job, tmp_path):
    """all_gather, which copies only: all_reduce alone fixes β_intra + γ/2, not each, and a noisy
    fit may give either all of it (a CI run's fit gave γ every byte, and predict rightly refused;
    test_model_determined covers that split)."""
    pytest.importorskip("scipy")
    run, swept = tmp_path / "run", ("ring", "rhd")  # the cheap ones that gather
    commbench("run", "-n", 4, "--backend", "mpi", "-a", ",".join(swept), "-c", "all_gather", "-b", "8", "-e", "4M",
              "-f", 4, "--out-of-place", "--min-time", "0.02", "--out", run, "--quiet", check_rc=OK)
    model = tmp_path / "model.json"
    fitted = commbench("model", "fit", run, "--output", model, check_rc=OK)
    assert "alpha_intra" in fitted.stdout  # one node: no inter-node terms
    assert "alpha_inter  not determined: no point has more than one node; needs a run with more than one node" \
        in fitted.stdout
    assert "gamma        not determined: no point reduces" in fitted.stdout
    data = json.loads(model.read_text())["fits"]["mpi"]
    assert data["params"]["beta_intra"] > 0 and data["points"] == 9 * len(swept)  # 32 B .. 2 MB by 4x (8 B: 2 B a rank)
    assert data["median_error"] < 1.0  # this machine: 12-27 % over 8 B - 64 MB at 0.3 s a point; noisier at 0.02 s
    validated = commbench("model", "validate", run, "--output", tmp_path / "v.csv", check_rc=OK)
    assert "leave one size out" in validated.stdout and "leave one algorithm out" in validated.stdout
    assert "small  (<= 4 KB)" in validated.stdout
    assert len(pd.read_csv(tmp_path / "v.csv")) > 0
    out = tmp_path / "pred"
    predicted = commbench("model", "predict", "--nodes", 1, "--ranks-per-node", 4, "--model", model, "-e", "64M",
                          "-c", "all_gather", "--out", out, check_rc=OK)
    assert "best" in predicted.stdout
    no_inter = commbench("model", "predict", "--nodes", 2, "--ranks-per-node", 2, "--model", model, "-c", "all_gather")
    assert no_inter.returncode == BAD_INPUT and "not determined (no point has more than one node)" in no_inter.stderr
    mixed = commbench("model", "predict", "--nodes", 2, "--ranks-per-node", 2, "--model", model, "--inter", "0.125,50",
                      "-c", "all_gather", check_rc=OK)
    assert "--inter 0.125,50" in mixed.stdout
    rows = pd.read_csv(out / "results.csv")
    assert (rows.predicted == 1).all() and set(rows.algorithm) >= set(swept)
    commbench("report", run, out, "-o", tmp_path / "r.html", check_rc=OK)


def test_predict_at_scale_and_crossovers(tmp_path):
    proc = commbench("model", "predict", "--nodes", 4, "--ranks-per-node", 8, "--intra", "450,2", "--inter", "50,5",
                     "-c", "all_reduce", "-b", "8", "-e", "8G", "-f", 4, "--out", tmp_path / "p", check_rc=OK)
    assert "crossover" in proc.stdout
    rows = pd.read_csv(tmp_path / "p" / "results.csv")
    all_reduce = {a for a in predicted("steps") if "all_reduce" in ALGORITHMS[a].collectives}
    assert set(rows.algorithm) == all_reduce and "ring_topology" not in predicted()  # = ring, by block
    big = rows[rows.size_bytes == rows.size_bytes.max()].set_index("algorithm")
    assert big.busbw_gbps["ring"] == pytest.approx(50, rel=0.05)  # one crossing link per node per step
    assert big.busbw_gbps["hierarchical"] > 5 * big.busbw_gbps["ring"]  # 8 rails in parallel
    assert big.internode_bytes_expected["hierarchical"] < big.internode_bytes_expected["ring"]


def test_sizes_that_round_to_one_size_are_predicted_once(tmp_path):
    """1K and 1028 B of all_gather over 16 ranks are both 1K (a whole float32 block per rank): one
    point per algorithm, not two rows under one size (which ended in an internal error)."""
    proc = commbench("model", "predict", "--nodes", 2, "--ranks-per-node", 8, "--intra", "450,2", "--inter", "50,5",
                     "-c", "all_gather", "--sizes", "1K,1028,2K", "--out", tmp_path / "p", check_rc=OK)
    rows = pd.read_csv(tmp_path / "p" / "results.csv")
    assert sorted(set(rows.size_bytes)) == [1024, 2048] and not rows.duplicated(["algorithm", "size_bytes"]).any()
    assert "1K" in proc.stdout and "2K" in proc.stdout


@pytest.mark.parametrize("args,message", [
    (["--nodes", 2, "--ranks-per-node", 2], "give --model, or both --intra and --inter"),
    (["--nodes", 2, "--ranks-per-node", 2, "--intra", "fast,1", "--inter", "1,1"], "invalid --intra"),
    (["--nodes", 0, "--ranks-per-node", 2, "--intra", "1,1", "--inter", "1,1"], "at least 1"),
    (["--nodes", 2, "--ranks-per-node", 2, "--model", "/nonexistent.json"], "cannot read model"),
])
def test_predict_bad_input(args, message):
    proc = commbench("model", "predict", *args)
    assert proc.returncode == BAD_INPUT and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_predict_one_rank_and_validate_nothing_are_exit_2(tmp_path):
    """One rank communicates nothing (its rows would have time 0, which no reader takes); a
    folder with too few points to hold any out is unusable, as for `model fit`."""
    from cli_inprocess import run_cli
    from synthetic_runs import write_run

    one = run_cli("model", "predict", "--nodes", 1, "--ranks-per-node", 1, "--intra", "450,2", "--inter", "50,5")
    one.assert_clean()
    assert one.code == BAD_INPUT and "is one rank, which communicates nothing" in one.stderr
    few = run_cli("model", "validate", write_run(tmp_path / "r", [10.0], samples=5, algorithm="ring"))
    few.assert_clean()
    assert few.code == BAD_INPUT and few.stdout == "" and "nothing to validate: too few points" in few.stderr
    native = run_cli("model", "validate", write_run(tmp_path / "n", [10.0], samples=5))  # the library's call only
    native.assert_clean()
    assert native.code == BAD_INPUT and native.stdout == "" and "no usable points: the model fits" in native.stderr


def test_a_run_given_twice_is_refused_by_fit_and_validate(tmp_path):
    """The same run twice (the folder twice, or a copy) would count each point twice and narrow the
    intervals as if it had been measured twice: refused in one line, as compare refuses it."""
    import shutil

    from cli_inprocess import run_cli
    from synthetic_runs import write_run

    run = write_run(tmp_path / "r", [10.0], samples=5)
    copy = shutil.copytree(run, tmp_path / "copy")
    for command, args in ((["fit", "--output", tmp_path / "m.json"], [run, run]), (["validate"], [run, copy])):
        twice = run_cli("model", *command, *args)
        twice.assert_clean()
        assert twice.code == BAD_INPUT and "run 'r' is there twice" in twice.stderr
    assert not (tmp_path / "m.json").exists()


def test_rows_without_nodes_or_ranks_per_node_are_one_node_of_all_ranks():
    """A results.csv without the nodes and ranks_per_node columns (hand-edited, or fuzzed: CI's
    folders fuzz found `model fit` crashing on it): one node of world_size ranks, as a cell that
    is not a number; not an AttributeError."""
    rows = pd.DataFrame({"backend": "mpi", "algorithm": ["ring", "tree", "ring"], "collective": "all_reduce",
                         "size_bytes": 1024, "world_size": 4, "wrong": 0, "time_us": [5.0, 6.0, 7.0]})
    out = usable_rows(rows)
    assert list(out.nodes) == [1, 1, 1] and list(out.ranks_per_node) == [4, 4, 4]
    odd = usable_rows(rows.assign(nodes=["2", "x", None], ranks_per_node=[2, None, "y"]))
    assert list(odd.nodes) == [2, 1, 1] and list(odd.ranks_per_node) == [2, 4, 4]


def test_points_of_a_schedule_the_formulas_do_not_model_are_not_fitted():
    """A kernel point that ran the one-shot schedule (library_choice "oneshot") has not the ring's or the
    tree's cost, nor has a hierarchical_kernel all-reduce run in order the pipelined formula's, so the
    fit leaves them out; the same algorithms' other points and NCCL's choices stay."""
    rows = pd.DataFrame({"backend": "mpi", "algorithm": ["ring_kernel", "ring_kernel", "tree_kernel", "ring",
                                                         "hierarchical_kernel", "hierarchical_kernel"],
                         "collective": "all_reduce", "size_bytes": [8, 1 << 20, 8, 8, 1 << 24, 1 << 24],
                         "world_size": 4, "nodes": 2, "wrong": 0, "time_us": [0.1, 200.0, 0.1, 5.0, 9e4, 8e4],
                         "library_choice": ["oneshot", "ring", "oneshot", None, "in order", "pipelined"]})
    out = usable_rows(rows)
    assert list(zip(out.algorithm, out.size_bytes)) == [("ring_kernel", 1 << 20), ("ring", 8),
                                                        ("hierarchical_kernel", 1 << 24)]
    assert list(out.library_choice.fillna("")) == ["ring", "", "pipelined"]
    assert len(usable_rows(rows.drop(columns="library_choice"))) == 6  # an older folder: every point
