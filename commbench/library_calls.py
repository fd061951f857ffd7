"""The library's own calls, named like algorithms (-a): `native`, the call run as the library chooses,
and `native_han`, the MPI call on a communicator where Open MPI runs its hierarchical collectives
(coll/han: commbench/rank/han.py). Neither has a message pattern or a cost model of commbench's."""

HAN = "native_han"
LIBRARY_CALLS = {
    "native": "the library's call",
    HAN: "the MPI call with Open MPI's hierarchical coll/han; --backend mpi, ranks on 2+ nodes",
}
