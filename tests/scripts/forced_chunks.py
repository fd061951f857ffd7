"""hierarchical_kernel with its all-reduce's chunks pipelined or in order, whatever this machine would
choose (HierarchicalKernel.pipelined), for the scripts that check both ways (imported from the
script's folder)."""

from commbench.algorithms.hierarchical_kernel import HierarchicalKernel


class Forced(HierarchicalKernel):
    def __init__(self, pipelined: bool):
        self.forced = pipelined

    def pipelined(self, ctx) -> bool:
        return self.forced
