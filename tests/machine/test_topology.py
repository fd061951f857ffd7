from commbench.machine.topology import detect, inside_launched_job, node_layout


def test_torchrun_env():
    info = detect({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"})
    assert (info.rank, info.world, info.local_rank, info.local_world, info.node, info.source) == (5, 8, 1, 4, 1, "torchrun")


def test_openmpi_env():
    info = detect({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                   "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "1"})
    assert (info.rank, info.world, info.local_rank, info.local_world, info.node) == (3, 4, 1, 2, None)
    assert inside_launched_job({"OMPI_COMM_WORLD_SIZE": "4"})


def test_slurm_env():
    env = {"SLURM_PROCID": "9", "SLURM_NTASKS": "11", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
           "SLURM_TASKS_PER_NODE": "4(x2),3"}
    info = detect(env)
    assert (info.rank, info.world, info.local_rank, info.local_world, info.node) == (9, 11, 1, 3, 2)
    assert not inside_launched_job(env)  # a batch script is not a rank: use --launcher none under srun


def test_pmi_env_and_single():
    assert detect({"PMI_RANK": "1", "PMI_SIZE": "2"}).world == 2
    assert detect({}).source == "single"


def test_node_layout():
    assert node_layout(["a", "a", "b", "b"]) == [0, 0, 1, 1]
    assert node_layout(["b", "a", "b"]) == [0, 1, 0]
    assert node_layout(["h"] * 4, ranks_per_node=2) == [0, 0, 1, 1]
    assert node_layout(["h"] * 4, launcher_nodes=[1, 0, 1, 0]) == [0, 1, 0, 1]
    assert node_layout(["a", "a", "b"], launcher_nodes=[0, None, 1]) == [0, 0, 1]
