"""What two result sets were measured under (commbench/analysis/conditions.py): the facts read from
run.json (versions, hosts from ranks and jobs, layout, launcher and its arguments, the timed loop,
the collective environment), each cleaned to one line of at most 80 characters, wrong-typed facts
left out; what differs between two sides, an environment variable set on one side only shown as
(unset) when both recorded their environment, a side that disagrees within itself showing all its
values."""

from commbench.analysis.conditions import UNSET, Change, changes, facts

META = {"versions": {"mpi_library": "Open MPI v5.0.11", "python": "3.11.7", "torch": None, "nccl": ""},
        "ranks": [{"hostname": "node-b", "rank": 0}, {"hostname": "node-a", "rank": 1}],
        "jobs": [{"job": 1, "hosts": ["node-a", "node-c"]}],
        "world_size": 2, "nodes": 2, "ranks_per_node": 1, "launcher": "mpirun",
        "launcher_args": ["--mca", "btl", "self,tcp"],
        "environment": {"NCCL_ALGO": "ring", "OMPI_MCA_btl": "self"}, "rank0_environment": {"OMPI_MCA_btl": "tcp"}}


def test_the_facts_of_a_run():
    found, env = facts({**META, "timers": ["native", "python"]})
    assert found == {"version mpi_library": "Open MPI v5.0.11", "version python": "3.11.7",
                     "hosts": "node-a, node-b, node-c", "world size": "2", "nodes": "2", "ranks per node": "1",
                     "launcher": "mpirun", "launcher args": "--mca btl self,tcp", "timed by": "native, python"}
    assert env == {"NCCL_ALGO": "ring", "OMPI_MCA_btl": "tcp"}  # a rank's own value wins over the parent's


def test_what_a_run_did_not_record_is_absent():
    found, env = facts({"world_size": "", "launcher": None})
    assert found == {} and env is None
    assert facts({"timers": []})[0] == {"timed by": "python (not recorded)"}  # a folder from before the column
    assert facts({"rank0_environment": {}})[1] == {}  # recorded, and empty: not the same as unrecorded


def test_facts_of_the_wrong_type_are_left_out():
    hostile = {"versions": ["not", "a", "dict"], "ranks": {"hostname": "x"},
               "jobs": [5, {"hosts": "node-z"}, {"hosts": [["nested"], {"a": 1}, None, "node-y", 7]}],
               "environment": "NCCL_ALGO=ring", "rank0_environment": ["x"], "launcher_args": "--bind-to core"}
    found, env = facts(hostile)
    assert found == {"hosts": "7, node-y", "launcher args": "--bind-to core"} and env == {}


def test_values_are_cleaned_to_one_short_line():
    long = "v" * 200
    found, env = facts({"versions": {"mpi\nlibrary": "Open\x00 MPI\n\t v5  "}, "launcher": long,
                        "environment": {"NCCL_DEBUG_FILE": " /tmp/a\r\nb "}})
    assert found["version mpi library"] == "Open MPI v5"
    assert found["launcher"] == "v" * 79 + "…" and len(found["launcher"]) == 80
    assert env == {"NCCL_DEBUG_FILE": "/tmp/a b"}


def test_only_what_differs_is_listed():
    cand = {**META, "versions": {**META["versions"], "mpi_library": "Open MPI v5.0.12"}, "launcher": "srun"}
    found = changes([META], [cand])
    assert found == [Change("launcher", "mpirun", "srun"), Change("version mpi_library", "Open MPI v5.0.11",
                                                                   "Open MPI v5.0.12")]
    assert str(found[0]) == "launcher: mpirun -> srun"
    assert changes([META], [dict(META)]) == []


def test_a_fact_recorded_on_one_side_only_is_not_a_change():
    assert changes([{"launcher": "mpirun", "versions": {"torch": "2.3"}}], [{"launcher": "mpirun"}]) == []


def test_an_environment_variable_on_one_side_is_unset_on_the_other():
    base = {"environment": {"NCCL_ALGO": "ring"}}
    cand = {"environment": {"NCCL_PROTO": "LL"}}
    assert changes([base], [cand]) == [Change("env NCCL_ALGO", "ring", UNSET), Change("env NCCL_PROTO", UNSET, "LL")]


def test_no_environment_recorded_on_a_side_compares_none():
    base = {"environment": {"NCCL_ALGO": "ring"}, "launcher": "mpirun"}
    assert changes([base], [{"launcher": "mpirun"}]) == []
    assert changes([{"launcher": "mpirun"}], [base]) == []


def test_a_side_that_disagrees_within_itself_shows_every_value():
    runs = [{"launcher": "mpirun", "environment": {"NCCL_ALGO": "tree"}},
            {"launcher": "srun", "environment": {}}]
    found = changes([{"launcher": "mpirun", "environment": {"NCCL_ALGO": "ring"}}], runs)
    assert found == [Change("env NCCL_ALGO", "ring", f"{UNSET} | tree"), Change("launcher", "mpirun", "mpirun | srun")]
    assert changes(runs, list(reversed(runs))) == []  # the same values, whatever the order


def test_a_change_of_timed_loop_is_a_context_change():
    assert changes([{"timers": ["native"]}], [{"timers": ["python"]}]) == [Change("timed by", "native", "python")]
