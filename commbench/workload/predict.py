"""A step's mix predicted by the fitted α-β-γ cost model (commbench.analysis.model): the model fitted
from this run's sweeps (fit.fit on their rows, what `commbench model fit OUT/measured` writes) or
read from a file (`--model`, model_file.load_model), asked per entry and algorithm through the algorithm's
own cost() (costs.time_s) at two shapes:

  * here: the ranks and size the entry was measured at, on this machine's layout, with the lanes
    the fit chose (CPU ranks that outnumber the cores share them), the check of the model;
  * at scale: the entry's own group, nodes = ceil(group_size / ranks_per_node) of ranks_per_node,
    at its full size, without intra-node contention (one lane per rank, as `model predict`).

Where the model cannot answer it says why, per entry: a collective or an algorithm it does not
model (native is the library's own call), no fit for the backend, a shape an algorithm does not
run at, or a parameter the fit left undetermined that the prediction depends on
(predict.undetermined: a one-node fit has no inter-node α, β; `--inter BW,LAT` supplies them, as
for `model predict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commbench.analysis.model.costs import Params, Shape, time_s
from commbench.errors import InputError
from commbench.library_calls import LIBRARY_CALLS
from commbench.options import MAX_PREDICT_RANKS
from commbench.algorithms import ALGORITHMS
from commbench.algorithms.base import SEGMENT_BYTES
from commbench.collectives import COLLECTIVES


@dataclass
class Model:
    """The fits per backend, where they came from, and why there are none (if so)."""

    fits: dict = field(default_factory=dict)  # backend -> [fit.Fit], its step group first
    source: str = ""
    error: str = ""  # why no model: the fit refused the rows, or none was asked for

    def groups(self) -> list[str]:
        return [f.group for fits in self.fits.values() for f in fits]


def fitted(rows, sources: list[str], links_per_node: int = 1) -> Model:
    """The model of these measured rows (fit.fit); a fit that refuses them leaves its reason."""
    from commbench.analysis.model.fit import fit

    try:
        fits = fit(rows, links_per_node)
    except InputError as exc:
        return Model(source="fitted from this run's sweeps", error=f"no model fitted from this run: {exc}")
    out: dict = {}
    for f in fits:
        out.setdefault(f.backend, []).append(f)
    return Model(out, f"fitted from {', '.join(sources)}")


def from_file(path: str, backends: list[str] | None) -> Model:
    """A model file's fits of each of `backends` (None: the file's one backend); InputError if the
    file is not a model or lacks one of them."""
    from commbench.analysis.model.model_file import load_model

    out = {}
    for backend in backends or [None]:
        fits = load_model(path, backend)
        out[fits[0].backend] = fits
    return Model(out, str(path))


def links_of(intra: str | None, inter: str | None) -> dict:
    """--intra / --inter as model parameters (name -> value) replacing the model's."""
    from commbench.analysis.model.predict import links

    out = {}
    for cls, text in (("intra", intra), ("inter", inter)):
        if text is not None:
            out[f"alpha_{cls}"], out[f"beta_{cls}"] = links(text, f"--{cls}")
    return out


def not_modelled(algorithm: str) -> str:
    if algorithm in LIBRARY_CALLS:
        return f"{algorithm} is the library's own call, which the model does not model (-a ring, tree, rhd, ... are)"
    return f"{algorithm} has no cost in the model"


class Predictor:
    """Predicted seconds per call, or why not, for one model and the links given."""

    def __init__(self, model: Model, links: dict | None = None, segment_bytes: int = SEGMENT_BYTES):
        self.model, self.links, self.segment = model, links or {}, segment_bytes
        self._checked: dict = {}

    def _fit(self, backend: str, algorithm: str):
        if self.model.error:
            return None, self.model.error
        if backend not in self.model.fits:
            return None, f"the model has no backend {backend} (it has {', '.join(self.model.groups())})"
        engine = ALGORITHMS[algorithm].engine
        fit = next((f for f in self.model.fits[backend] if f.engine == engine), None)
        if fit is None:
            return None, f"the model has no fit of {backend}'s {engine} algorithms (group {backend}/{engine})"
        return fit, ""

    def here_shape(self, backend: str, algorithm: str, nodes: int, per_node: int) -> Shape:
        fit = self._fit(backend, algorithm)[0] if algorithm in ALGORITHMS else None
        return Shape(nodes, per_node, "block", fit.links_per_node if fit else 1, fit.lanes if fit else None)

    def scale_shape(self, backend: str, algorithm: str, group_size: int, ranks_per_node: int) -> Shape | str:
        per_node = max(1, min(ranks_per_node, group_size))
        nodes = -(-group_size // per_node)
        if nodes * per_node != group_size:
            return f"its {group_size} ranks do not fill nodes of {per_node} evenly, which the model assumes"
        fit = self._fit(backend, algorithm)[0] if algorithm in ALGORITHMS else None
        links = per_node if "beta_inter" in self.links else (fit.links_per_node if fit else 1)
        return Shape(nodes, per_node, "block", links)

    def _ready(self, backend: str, algorithm: str, collective: str, shape: Shape | str, size_bytes: int,
               at_scale: bool):
        """(the fit, the parameter values to predict with, the links taken as given), or why the
        model cannot answer."""
        from commbench.analysis.model.predict import undetermined

        if collective not in COLLECTIVES:
            return f"the model has no {collective}"
        if isinstance(shape, str):
            return shape
        if algorithm not in ALGORITHMS or not ALGORITHMS[algorithm].modelled:
            return not_modelled(algorithm)
        algo = ALGORITHMS[algorithm]
        if collective not in algo.collectives:
            return f"{algorithm} has no {collective}"
        if shape.n > MAX_PREDICT_RANKS:
            return f"{shape.n} ranks is more than the model takes (at most {MAX_PREDICT_RANKS})"
        if algo.one_node and shape.nodes > 1:
            return f"{algorithm} runs the ranks of one node only, not {shape.nodes} nodes"
        fit, why = self._fit(backend, algorithm)
        if fit is None:
            return why
        links = self.links if at_scale else {}
        values = fit.estimates() | links
        key = (fit.group, shape.nodes, shape.per_node, collective, size_bytes, at_scale)
        if key not in self._checked:
            try:
                _, dropped = undetermined({algo.engine: fit}, {algo.engine: values}, Shape(shape.nodes, shape.per_node),
                                          [collective], [size_bytes], self.segment, set(links))
                self._checked[key] = dropped
            except InputError as exc:
                self._checked[key] = str(exc).removeprefix("cannot predict: ")
        verdict = self._checked[key]
        if isinstance(verdict, str):
            return verdict
        if (collective, algorithm) in verdict:
            return f"not determined: {verdict[collective, algorithm]}"
        return fit, values, set(links)

    def seconds(self, backend: str, algorithm: str, collective: str, shape: Shape | str, size_bytes: int,
                in_place: bool, at_scale: bool = True) -> tuple[float | None, str]:
        """(seconds per call, "") or (None, why not); at_scale: with the links given (--intra, --inter),
        else (here) with the model's own."""
        ready = self._ready(backend, algorithm, collective, shape, size_bytes, at_scale)
        if isinstance(ready, str):
            return None, ready
        t = time_s(Params.from_values(ready[1]), algorithm, collective, shape, size_bytes, self.segment, in_place)
        return (t, "") if t is not None else (None, f"{algorithm} has no cost for {collective}")

    def bounds(self, backend: str, algorithm: str, collective: str, shape: Shape | str, size_bytes: int,
               in_place: bool, at_scale: bool = True) -> tuple[float, float] | str:
        """The 95 % interval of seconds(...) from the fit's parameter covariance
        (commbench.analysis.model.spread), or why there is none."""
        from commbench.analysis.model.spread import interval

        ready = self._ready(backend, algorithm, collective, shape, size_bytes, at_scale)
        if isinstance(ready, str):
            return ready
        fit, values, given = ready
        if not fit.log_cov:
            return "the model has no parameter covariance (no parameter determined, or a file of an older `model fit`)"
        return interval(lambda v: time_s(Params.from_values(v), algorithm, collective, shape, size_bytes,
                                         self.segment, in_place), values, fit.log_cov, given)
