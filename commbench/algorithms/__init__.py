"""commbench's own collective algorithms, each written once against the Communicator's
point-to-point calls and a Reducer. `native` (the library's own call) is not here: it is the
backend's `bind`."""

from commbench.algorithms.base import Algorithm, Context
from commbench.algorithms.dbtree import DoubleBinaryTree
from commbench.algorithms.hierarchical import Hierarchical
from commbench.algorithms.peer import PeerOneShot, PeerOneShotGpuFlags, PeerTwoShot, PeerTwoShotGpuFlags
from commbench.algorithms.rhd import RecursiveHalvingDoubling
from commbench.algorithms.ring import Ring, TopologyRing
from commbench.algorithms.tree import Tree

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (Ring(), TopologyRing(), Tree(), DoubleBinaryTree(),
                                                        RecursiveHalvingDoubling(), Hierarchical(),
                                                        PeerOneShot(), PeerTwoShot(), PeerOneShotGpuFlags(),
                                                        PeerTwoShotGpuFlags())}

__all__ = ["ALGORITHMS", "Algorithm", "Context"]
