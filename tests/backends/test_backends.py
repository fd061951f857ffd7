"""The backends' registry (commbench.backends): one descriptor per backend holds its devices, its
package, how its world forms and what a rank opens, and everything else reads them from it: a
descriptor added is a backend `run` accepts, checks and launches, with nothing else edited."""

from __future__ import annotations

import dataclasses

import pytest

from commbench import options
from commbench.backends import BACKENDS, MPI_WORLD, TORCH_WORLD, Backend, _resolve, emulated_launcher, needs_mpi_launcher
from commbench.errors import InputError
from commbench.backends.communicators import missing
from commbench.machine.topology import LAUNCHED_MARKERS
from commbench.run.launch import resolve_launcher
from commbench.spec import SweepSpec


def test_every_descriptor_names_what_exists():
    assert options.BACKENDS == tuple(BACKENDS) == ("mpi", "gloo", "nccl")
    for b in BACKENDS.values():
        assert callable(_resolve(b.communicator)) and (not b.probe or callable(_resolve(b.probe)))
        assert b.world in (MPI_WORLD, TORCH_WORLD) and b.devices and set(b.devices) <= set(options.DEVICES)
    assert needs_mpi_launcher(["gloo", "mpi"]) and not needs_mpi_launcher(["gloo", "nccl"])


def test_the_descriptors_devices_are_what_run_refuses():
    for name, b in BACKENDS.items():
        for device in options.DEVICES:
            spec = SweepSpec(backends=[name], device=device, algorithms=["native", "peer_oneshot"])
            if device in b.devices:
                spec.validate()
            else:
                with pytest.raises(InputError, match=f"cannot run on device '{device}' .it runs on: {', '.join(b.devices)}"):
                    spec.validate()


@pytest.fixture
def fake(monkeypatch):
    """A backend added by its descriptor alone: a torch-style world of a package that is installed."""
    b = Backend("fakecomm", ("cpu",), "json", "fake", TORCH_WORLD, "commbench.backends.communicators:open_torch")
    monkeypatch.setitem(BACKENDS, b.name, b)
    return b


def test_a_descriptor_added_is_a_backend_run_accepts_checks_and_launches(fake, monkeypatch):
    import os

    for name in [*LAUNCHED_MARKERS, *(k for k in os.environ if k.startswith("SLURM_"))]:
        monkeypatch.delenv(name, raising=False)  # neither inside a launched job nor a Slurm allocation
    spec = SweepSpec(backends=["FakeComm"], nprocs=2, launcher="auto").validate()
    assert spec.backends == ["fakecomm"]
    assert missing("fakecomm", "cpu") is None
    assert resolve_launcher(spec) == "local"  # its world is torch's: no MPI launcher
    assert resolve_launcher(SweepSpec(backends=["mpi"], nprocs=2, launcher="auto").validate()) == "mpirun"
    with pytest.raises(InputError, match="cannot run on device 'cuda'"):
        SweepSpec(backends=["fakecomm"], device="cuda").validate()
    monkeypatch.setitem(BACKENDS, "fakecomm", dataclasses.replace(fake, package="no_such_package_here"))
    assert missing("fakecomm", "cpu") == ("backend 'fakecomm' needs no_such_package_here, which is not installed "
                                          "(pip install 'commbench[fake]')")
    mpi_like = dataclasses.replace(fake, world=MPI_WORLD)
    monkeypatch.setitem(BACKENDS, "fakecomm", mpi_like)
    with pytest.raises(InputError, match="backend 'fakecomm' needs an MPI launcher, not 'local'"):
        resolve_launcher(SweepSpec(backends=["fakecomm"], nprocs=2, launcher="local").validate())


def test_emulation_and_the_peer_only_rule_come_from_the_descriptors():
    with pytest.raises(InputError, match="--emulate runs the mpi and gloo backends only; got --backend nccl"):
        SweepSpec(backends=["nccl"], device="cuda", nprocs=4, emulate="2x2").validate()
    with pytest.raises(InputError, match="needs two \\(mpirun for MPI, torchrun agents for torch.distributed\\)"):
        SweepSpec(backends=["mpi", "gloo"], nprocs=4, emulate="2x2").validate()
    with pytest.raises(InputError, match="--emulate with --backend mpi launches with mpirun, not 'torchrun'"):
        SweepSpec(backends=["mpi"], nprocs=4, emulate="2x2", launcher="torchrun").validate()
    assert SweepSpec(backends=["mpi"], nprocs=4, emulate="2x2", launcher="mpirun").validate().emulate == "2x2"
    assert emulated_launcher(["mpi"]) == "mpirun" and emulated_launcher(["gloo"]) == "torchrun"
    with pytest.raises(InputError, match="gloo with --device cuda runs the peer algorithms only"):
        SweepSpec(backends=["gloo"], device="cuda", algorithms=["ring"]).validate()
    # a device no backend of the list drives is said before the peer-only rule
    with pytest.raises(InputError, match="backend 'mpi' cannot run on device 'cuda'"):
        SweepSpec(backends=["gloo", "mpi"], device="cuda", algorithms=["ring"]).validate()
