"""The collectives commbench measures. Adding one is one small module and one line here (or,
outside the package, a plugin module that calls `register`: commbench.plugins)."""

from commbench import plugins
from commbench.rank.collectives.all_gather import AllGather
from commbench.rank.collectives.all_reduce import AllReduce
from commbench.rank.collectives.base import Collective, Counts
from commbench.rank.collectives.reduce_scatter import ReduceScatter

COLLECTIVES: dict[str, Collective] = {}


def register(collective: Collective) -> Collective:
    """Add a collective to the registry every list of collectives is derived from."""
    COLLECTIVES[collective.name] = collective
    return collective


for _c in (AllReduce(), AllGather(), ReduceScatter()):
    register(_c)
plugins.load()

__all__ = ["COLLECTIVES", "Collective", "Counts", "register"]
