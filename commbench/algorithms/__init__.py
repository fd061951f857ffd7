"""commbench's own collective algorithms, each written once against the Communicator's
point-to-point calls and a Reducer. `native` (the library's own call) is not here: it is the
backend's `bind`. A new algorithm is one file and one line below (or, outside the package, a
plugin module that calls `register`: commbench.plugins)."""

from commbench import plugins
from commbench.algorithms.base import Algorithm, Context
from commbench.algorithms.chain import Chain
from commbench.algorithms.dbtree import DoubleBinaryTree
from commbench.algorithms.hierarchical import Hierarchical
from commbench.algorithms.hierarchical_kernel import HierarchicalKernel
from commbench.algorithms.kernel import RingKernel, TreeKernel
from commbench.algorithms.pairwise import Pairwise
from commbench.algorithms.peer import PeerOneShot, PeerOneShotGpuFlags, PeerTwoShot, PeerTwoShotGpuFlags
from commbench.algorithms.rhd import RecursiveHalvingDoubling
from commbench.algorithms.ring import Ring, TopologyRing
from commbench.algorithms.tree import Tree

ALGORITHMS: dict[str, Algorithm] = {}


def register(algorithm: Algorithm) -> Algorithm:
    """Add an algorithm to the registry every list of algorithms is derived from."""
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


for _a in (Ring(), TopologyRing(), Tree(), DoubleBinaryTree(), RecursiveHalvingDoubling(), Hierarchical(),
           PeerOneShot(), PeerTwoShot(), PeerOneShotGpuFlags(), PeerTwoShotGpuFlags(), RingKernel(), TreeKernel(),
           HierarchicalKernel(), Chain(), Pairwise()):
    register(_a)
plugins.load()

__all__ = ["ALGORITHMS", "Algorithm", "Context", "register"]
