"""The native code: cuda/collectives.cu built for the host or a GPU (its ABI, builds and one communicator's
kernels), the reducers, the peers' shared slots, the C MPI timing loop and the floor probe."""
