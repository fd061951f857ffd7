"""commbench's own collective algorithms, each written once against the Communicator's
point-to-point calls and a Reducer. `native` (the library's own call) is not here: it is the
backend's `bind`. Adding one is one module in this package: every Algorithm class a module here
defines with a name of its own is found and registered (or, outside the package, a plugin module
that calls `register`: commbench.plugins)."""

import importlib
import pkgutil

from commbench import plugins
from commbench.algorithms.base import Algorithm, Context

ALGORITHMS: dict[str, Algorithm] = {}


def register(algorithm: Algorithm) -> Algorithm:
    """Add an algorithm to the registry every list of algorithms is derived from."""
    ALGORITHMS[algorithm.name] = algorithm
    return algorithm


def package_algorithms() -> list[Algorithm]:
    """One of each algorithm this package's modules define (a class with a name of its own: not base.py's
    Algorithm, nor a module's shared base such as kernel.py's _Kernel), by name."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [cls() for cls in vars(module).values() if isinstance(cls, type) and issubclass(cls, Algorithm)
                  and cls.__module__ == module.__name__ and vars(cls).get("name")]
    return sorted(found, key=lambda a: a.name)


for _a in package_algorithms():
    register(_a)
plugins.load()

__all__ = ["ALGORITHMS", "Algorithm", "Context", "register"]
