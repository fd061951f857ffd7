"""`model predict` as a Python API (commbench.analysis.model.at_scale): a request checked whole,
answered with one table per collective at the asked shape, where the parameters came from, and the
refusals the CLI prints as one line."""

import pytest

from commbench.analysis.model.at_scale import Request, predict_at_scale
from commbench.errors import InputError


def test_links_given_predict_every_step_algorithm_at_the_shape():
    p = predict_at_scale(Request(nodes=4, ranks_per_node=8, collectives=["all_reduce", "all_gather"],
                                 sizes=[1024, 1 << 20], intra="100,1", inter="10,5"))
    assert p.shape.n == 32 and p.shape.links_per_node == 8  # one link per rank without a model
    assert p.source == "--reduce-bw 0.0 --intra 100,1 --inter 10,5"
    for collective, table in p.tables.items():
        assert len(table) and set(table.size_bytes) == {1024, 1 << 20} and (table.collective == collective).all()
        assert (table.time_us > 0).all() and {"ring", "hierarchical"} <= set(table.algorithm)
    assert "tree" in set(p.tables["all_reduce"].algorithm)  # (all-gather has no tree)
    assert p.dropped_lines() == [] or all(line.startswith("not predicted, as ") for line in p.dropped_lines())


@pytest.mark.parametrize("request_, message", [
    (Request(4, 8, ["all_reduce"], [1024]), "give --model, or both --intra and --inter"),
    (Request(0, 8, ["all_reduce"], [1024], intra="1,1", inter="1,1"), "at least 1"),
    (Request(4, 8, ["all_reduce"], [1024], intra="1,1", inter="1,1", reduce_bw=-1), "invalid --reduce-bw"),
    (Request(4, 8, ["all_reduce"], [1024], intra="1,1", inter="1,1", links_per_node=0), "invalid --links-per-node"),
    (Request(4, 8, ["all_reduce"], [1024], model="m.json", reduce_bw=5), "--reduce-bw sets the reduction speed"),
])
def test_a_request_no_prediction_answers_is_one_line(request_, message):
    with pytest.raises(InputError, match=message.replace("-", r"\-")) as exc:
        predict_at_scale(request_)
    assert "\n" not in str(exc.value)


def test_the_fastest_per_size_is_the_first_by_name_among_equal_times():
    """The best algorithm of a size does not depend on the order of the table's rows (nor so on the order
    algorithms are registered in): a tie goes to the first by name; crossovers where the best changes."""
    import pandas as pd

    from commbench.analysis.model.predict import best_and_crossovers

    rows = [(8, "tree", 5.0), (8, "ring", 5.0), (8, "rhd", 6.0), (1024, "tree", 9.0), (1024, "ring", 7.0)]
    for order in (rows, rows[::-1]):
        best, changes = best_and_crossovers(pd.DataFrame(order, columns=["size_bytes", "algorithm", "time_us"]))
        assert best.to_dict() == {8: "ring", 1024: "ring"} and changes == []
    best, changes = best_and_crossovers(pd.DataFrame(rows[:3] + [(1024, "tree", 1.0)],
                                                     columns=["size_bytes", "algorithm", "time_us"]))
    assert changes == [(1024, "ring", "tree")]
