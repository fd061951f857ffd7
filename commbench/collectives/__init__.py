"""The collectives commbench measures. Adding one is one small module and one line here (or,
outside the package, a plugin module that calls `register`: commbench.plugins)."""

from commbench import plugins
from commbench.errors import InputError
from commbench.collectives.all_gather import AllGather
from commbench.collectives.all_reduce import AllReduce
from commbench.collectives.all_to_all import AllToAll
from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.collectives.broadcast import Broadcast
from commbench.collectives.gather import Gather
from commbench.collectives.reduce import Reduce
from commbench.collectives.reduce_scatter import ReduceScatter
from commbench.collectives.scatter import Scatter
from commbench.collectives.send_recv import SendRecv

COLLECTIVES: dict[str, Collective] = {}


def register(collective: Collective) -> Collective:
    """Add a collective to the registry every list of collectives is derived from."""
    COLLECTIVES[collective.name] = collective
    return collective


def lookup(name: str) -> Collective:
    """The registered collective `name`; an InputError naming the accepted ones otherwise."""
    if name not in COLLECTIVES:
        raise InputError(f"unknown collective {name!r} (accepted: {', '.join(COLLECTIVES)})")
    return COLLECTIVES[name]


def default_collectives() -> list[str]:
    """What -c means when it is not given: all-reduce, all-gather and reduce-scatter."""
    return [name for name, c in COLLECTIVES.items() if c.default_sweep]


def names(conjunction: str = "or") -> str:
    """The registered names as a phrase for help texts: "a, b or c"."""
    *rest, last = list(COLLECTIVES)
    return f"{', '.join(rest)} {conjunction} {last}" if rest else last


for _c in (AllReduce(), AllGather(), ReduceScatter(), Broadcast(), Reduce(), AllToAll(), Gather(), Scatter(), SendRecv()):
    register(_c)
plugins.load()

__all__ = ["COLLECTIVES", "Collective", "Counts", "NativeCall", "default_collectives", "lookup", "names", "register"]
