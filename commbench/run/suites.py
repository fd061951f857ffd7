"""Suites: a YAML file listing runs, validated whole before anything is launched.

    name: ci
    description: small and fast, for regression gates
    defaults:            # fields every run starts from
      backend: mpi
      nprocs: 2
    runs:
      - label: mpi-native         # names the run's folder; unique
        collective: all_reduce,all_gather
        sizes: 8,1K,64K
      - label: mpi-ring
        algorithm: ring

Fields are the option table's (commbench.options): `commbench run`'s long options with '_' for
'-' (lists as YAML lists or comma text), `mode` (in-place, out-of-place or both) for its buffer
switches, and `repeat`; a field not given takes its command-line default (label: run<i>).
`repeat: N` means what `commbench run --repeat N` means: every point of the run measured by N
separate jobs, one after another (each measuring every block), into the run's one folder
(commbench.run.jobs), so `compare` can tell a real change from one job landing differently.
`commbench sweep SUITE --out DIR` puts each run in DIR/<label>/; `--resume` finishes what an
interrupted sweep left: completed runs are kept, cut-short ones resumed, missing ones run.

A suite is data (received, downloaded, attached to a ticket), read within limits decided before
it is parsed: at most MAX_SUITE_BYTES, plain YAML (no anchors or aliases, which let a few bytes
expand to gigabytes; at most MAX_DEPTH levels of nesting), at most MAX_RUNS runs, each run's
fields checked like `commbench run`'s options (their own limits: commbench.options).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from commbench.errors import InputError
from commbench.folder.files import read_named
from commbench.options import BY_NAME, SUITE_FIELDS, launcher_argv, spec_arguments
from commbench.run.jobs import check_repeat
from commbench.sources import SUITES_DIR
from commbench.spec import SweepSpec

_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a run's label and the suite's name: they name folders
MAX_SUITE_BYTES = 64 * 1024  # the suite file (the bundled ones are under 2 KB; 1000 runs of one line fit)
MAX_RUNS = 1000  # runs of one suite
MAX_DEPTH = 8  # levels of YAML nesting (a suite needs 4: the file, runs, a run, a list)


@dataclass
class SuiteRun:
    label: str
    spec: SweepSpec
    launcher_args: list[str]
    repeat: int = 1  # jobs per point (commbench.run.jobs)
    backend: str = "auto"  # the backend field as written (auto: the machine's choice, said when it falls back)


@dataclass
class Suite:
    name: str
    description: str
    path: Path
    runs: list[SuiteRun]


def bundled_suites() -> list[str]:
    """Names of the suites shipped in suites/."""
    return sorted(f.stem for f in SUITES_DIR.glob("*.yaml")) if SUITES_DIR.is_dir() else []


def summary(description: str) -> str:
    """A suite description's first sentence (what `sweep --help` and `sweep --list` show)."""
    text = " ".join(description.split())
    end = text.find(". ")
    return text if end < 0 else text[:end + 1]


def bundled_summaries() -> dict[str, str]:
    """Each bundled suite's name -> the first sentence of its description (read, not validated:
    a suite that cannot be read says so in its place)."""
    out = {}
    for name in bundled_suites():
        try:
            doc = read_yaml(SUITES_DIR / f"{name}.yaml")
            description = doc.get("description") if isinstance(doc, dict) else None
            out[name] = summary(description) if isinstance(description, str) else "(no description)"
        except InputError as exc:
            out[name] = f"(cannot be read: {exc})"
    return out


def find_suite(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.is_file():
        return p
    bundled = SUITES_DIR / f"{name_or_path}.yaml"
    if bundled.is_file():
        return bundled
    import difflib

    names = bundled_suites()
    near = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.75)
    hint = f"; did you mean {near[0]}?" if near else ""
    raise InputError(f"no suite {name_or_path!r}: not a file, and not a bundled suite "
                     f"(bundled: {', '.join(names) or 'none found'}){hint}")


def _field_value(where: str, key: str, value):
    """A suite field's value as the option table types it (lists become comma text)."""
    if key not in SUITE_FIELDS:
        spelled = str(key).lstrip("-").replace("-", "_")
        if spelled in SUITE_FIELDS:
            hint = f"write it {spelled!r}: a field is run's long option with '_' for '-'"
        elif spelled in BY_NAME and BY_NAME[spelled].sets_mode:
            hint = f"the buffers are one field: mode: {BY_NAME[spelled].sets_mode}"
        else:
            hint = f"accepted: {', '.join(sorted(SUITE_FIELDS))}"
        raise InputError(f"{where}: unknown field {str(key)[:40]!r} ({hint})")
    option = SUITE_FIELDS[key]
    kind = option.type
    if option.is_list and isinstance(value, list):
        if not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
            raise InputError(f"{where}.{key}: list items must be names or sizes")
        return ",".join(getattr(v, "text", str(v)) for v in value)
    if kind is str and isinstance(value, (str, int)) and not isinstance(value, bool):
        return getattr(value, "text", str(value))
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind is bool and isinstance(value, bool):
        return value
    raise InputError(f"{where}.{key}: expected {'a list or ' if option.is_list else ''}"
                     f"{ {str: 'text', int: 'an integer', float: 'a number', bool: 'true or false'}[kind]}, "
                     f"got {value!r:.60}")


class SourceInt(int):
    """An integer as the suite file wrote it (`text`): `label: 0777` names the folder 0777, and sizes
    are read by the CLI's own parser from the digits as written."""

    def __new__(cls, text: str):
        value = super().__new__(cls, int(text, 10))
        value.text = text
        return value


# What a plain scalar may mean, in the CLI's syntax only (YAML 1.1 would also read 010 as octal 8,
# 1:20 as sexagesimal 80, 0x10 as 16, yes/no/on/off as booleans and 2024-01-01 as a date): anything
# else is text, which the field's own parser then takes or refuses as the command line would.
_SCALARS = (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", r"^[-+]?[0-9]+$", "-+0123456789"),
    ("tag:yaml.org,2002:float", r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$", "-+0123456789."),
)


def read_yaml(path: Path, what: str = "suite"):
    """A suite file's (or another `what`'s: a workload's) YAML document, within MAX_SUITE_BYTES and
    MAX_DEPTH, without anchors or aliases or a key given twice (refused while it is read, before any
    of it is built), its plain scalars read in the CLI's syntax (_SCALARS). Messages name `what`."""
    import re as regex

    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0
        yaml_implicit_resolvers: dict = {}

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise InputError(f"{path}: line {key_node.start_mark.line + 1}: a key is a name, "
                                     "not a list or a mapping")
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int)) and key in seen:
                    raise InputError(f"{path}: line {key_node.start_mark.line + 1}: {str(key)[:40]!r} is given twice "
                                     "(a later one would silently replace the first)")
                seen.add(key)
            return super().construct_mapping(node, deep)

        def compose_node(self, parent, index):
            event = self.peek_event()
            where = f"{path}: line {event.start_mark.line + 1}"
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise InputError(f"{where}: YAML anchors and aliases (&name, *name) are not accepted in a {what}")
            if self.depth >= MAX_DEPTH:
                raise InputError(f"{where}: more than {MAX_DEPTH} levels of nesting")
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    for tag, pattern, first in _SCALARS:
        Loader.add_implicit_resolver(tag, regex.compile(pattern), list(first))
    Loader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: SourceInt(loader.construct_scalar(node)))
    data = read_named(path, MAX_SUITE_BYTES, what, f"{MAX_SUITE_BYTES // 1024} KB, the largest {what} file accepted")
    try:
        loader = Loader(data.decode("utf-8"))
        loader.name = str(path)  # named in YAML's messages
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except InputError:
        raise
    except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:  # ValueError: an integer of > 4300 digits
        raise InputError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:200]})") from None


def load_suite(name_or_path: str, overrides: dict | None = None) -> Suite:
    """The suite, every run validated; `overrides` (option name -> value, from `sweep`'s command line:
    commbench.options.suite_overrides) replace those fields in every run."""
    path = find_suite(name_or_path)
    doc = read_yaml(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a suite is a mapping with 'runs' (got {type(doc).__name__})")
    unknown = [k for k in doc if k not in ("name", "description", "defaults", "runs")]
    if unknown:
        raise InputError(f"{path}: unknown top-level field {str(unknown[0])[:40]!r} "
                         "(accepted: name, description, defaults, runs)")
    name, description = doc.get("name"), doc.get("description")
    if isinstance(name, int) and not isinstance(name, bool):  # name: 2024 (or 0777, as written)
        name = getattr(name, "text", str(name))
    if name is not None and not (isinstance(name, str) and _LABEL.fullmatch(name)):
        raise InputError(f"{path}: name {str(name)[:40]!r} must be 1-64 letters, digits, '.', '_' or '-' "
                         "(it names the sweep's folder)")
    if description is not None and not isinstance(description, str):
        raise InputError(f"{path}: description must be text")
    defaults, runs = doc.get("defaults") or {}, doc.get("runs")
    if not isinstance(defaults, dict):
        raise InputError(f"{path}: defaults must be a mapping of fields")
    if not isinstance(runs, list) or not runs:
        raise InputError(f"{path}: runs must be a non-empty list")
    if len(runs) > MAX_RUNS:
        raise InputError(f"{path}: {len(runs)} runs; a suite holds at most {MAX_RUNS}")
    base = {k: _field_value(f"{path}: defaults", k, v) for k, v in defaults.items()}
    out, labels = [], set()
    for i, run in enumerate(runs):
        where = f"{path}: runs[{i}]"
        if not isinstance(run, dict):
            raise InputError(f"{where}: each run is a mapping of fields")
        fields = base | {k: _field_value(where, k, v) for k, v in run.items()}
        if overrides:
            fields |= {k: v if v is None else _field_value("the command line", k, v) for k, v in overrides.items()}
        label = fields.get("label") or f"run{i}"
        if not _LABEL.fullmatch(label):
            raise InputError(f"{where}.label: {label[:70]!r} must be 1-64 letters, digits, '.', '_' or '-' "
                             "(it names a folder)")
        if label in labels:
            raise InputError(f"{where}.label: {label!r} is used twice")
        labels.add(label)
        launcher_args = fields.pop("launcher_args", BY_NAME["launcher_args"].default)
        repeat = check_repeat(fields.pop("repeat", BY_NAME["repeat"].default), f"{where}.repeat")
        fields["label"] = label
        try:
            spec = SweepSpec.from_options(**spec_arguments(fields))
            argv = launcher_argv(launcher_args)
        except InputError as exc:
            given = ", with the options given on the command line" if overrides else ""
            raise InputError(f"{where} ({label}){given}: {exc}") from None
        out.append(SuiteRun(label, spec, argv, repeat, str(fields.get("backend") or BY_NAME["backend"].default)))
    return Suite(name or path.stem, description or "", path, out)
