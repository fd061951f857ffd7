"""The collectives commbench measures. Adding one is one small module in this package: every
Collective class a module here defines is found and registered (or, outside the package, a plugin
module that calls `register`: commbench.plugins)."""

import importlib
import pkgutil

from commbench import plugins
from commbench.collectives.base import Collective, Counts, NativeCall
from commbench.errors import InputError

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


def package_collectives() -> list[Collective]:
    """One of each collective this package's modules define (a class with a name of its own; base.py
    holds none), the default sweep's first in its order, then the others by name."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [cls() for cls in vars(module).values() if isinstance(cls, type) and issubclass(cls, Collective)
                  and cls.__module__ == module.__name__ and vars(cls).get("name")]
    return sorted(found, key=lambda c: (not c.default_sweep, c.default_sweep, c.name))


for _c in package_collectives():
    register(_c)
plugins.load()

__all__ = ["COLLECTIVES", "Collective", "Counts", "NativeCall", "default_collectives", "lookup", "names", "register"]
