"""commbench's own collective algorithms, each written once against the Communicator's
point-to-point calls and a Reducer. `native` (the library's own call) is not here: it is the
backend's `bind`."""

from commbench.rank.algorithms.base import Algorithm, Context
from commbench.rank.algorithms.dbtree import DoubleBinaryTree
from commbench.rank.algorithms.hierarchical import Hierarchical
from commbench.rank.algorithms.peer import PeerOneShot, PeerOneShotGpuFlags, PeerTwoShot, PeerTwoShotGpuFlags
from commbench.rank.algorithms.rhd import RecursiveHalvingDoubling
from commbench.rank.algorithms.ring import Ring, TopologyRing
from commbench.rank.algorithms.tree import Tree

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (Ring(), TopologyRing(), Tree(), DoubleBinaryTree(),
                                                        RecursiveHalvingDoubling(), Hierarchical(),
                                                        PeerOneShot(), PeerTwoShot(), PeerOneShotGpuFlags(),
                                                        PeerTwoShotGpuFlags())}

__all__ = ["ALGORITHMS", "Algorithm", "Context"]
