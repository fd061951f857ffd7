"""The collectives commbench measures. Adding one is one small module and one line here."""

from commbench.rank.collectives.all_gather import AllGather
from commbench.rank.collectives.all_reduce import AllReduce
from commbench.rank.collectives.base import Collective, Counts
from commbench.rank.collectives.reduce_scatter import ReduceScatter

COLLECTIVES: dict[str, Collective] = {c.name: c for c in (AllReduce(), AllGather(), ReduceScatter())}

__all__ = ["COLLECTIVES", "Collective", "Counts"]
