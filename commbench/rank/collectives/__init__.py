"""The collectives commbench measures. Adding one is one small module and one line here (or,
outside the package, a plugin module that calls `register`: commbench.plugins)."""

from commbench import plugins
from commbench.errors import InputError
from commbench.rank.collectives.all_gather import AllGather
from commbench.rank.collectives.all_reduce import AllReduce
from commbench.rank.collectives.base import Collective, Counts, NativeCall
from commbench.rank.collectives.reduce_scatter import ReduceScatter

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


def names(conjunction: str = "or") -> str:
    """The registered names as a phrase for help texts: "a, b or c"."""
    *rest, last = list(COLLECTIVES)
    return f"{', '.join(rest)} {conjunction} {last}" if rest else last


for _c in (AllReduce(), AllGather(), ReduceScatter()):
    register(_c)
plugins.load()

__all__ = ["COLLECTIVES", "Collective", "Counts", "NativeCall", "lookup", "names", "register"]
