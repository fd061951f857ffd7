"""The docs' reference tables, generated from commbench's own registries when the site is built
(an MkDocs hook: mkdocs.yml `hooks:`), so that nothing in them is typed twice: a page holds a
marker `<!-- generated: NAME -->` and the build replaces it with TABLES[NAME](). The commands'
page walks the typer application (every command, every option, its default and help, which the
option table commbench.options owns); the others read the registries of collectives, algorithms,
backends, exit codes, result columns, run.json's fields, reader limits and kernel tuning. tests/test_docs.py checks that every entry
has the text its row needs."""

from __future__ import annotations

import re

MARKER = re.compile(r"<!-- generated: ([a-z_]+) -->")


def _text(text) -> str:
    """Help text as Markdown shows it: `<` and `>` outside code spans escaped (else "results/<UTC time>/"
    would be read as an HTML tag, and vanish)."""
    parts = str(text).split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _cell(text) -> str:
    """Text for one Markdown table cell: one line, pipes and angle brackets escaped."""
    return _text(" ".join(str(text).split())).replace("|", "\\|")


def _table(head: tuple[str, ...], rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _click_commands():
    """(full name, click command) of every command, subcommands of groups included, in the CLI's order."""
    import importlib

    import typer

    importlib.import_module("commbench.cli")  # registers every command on the application
    from commbench.cli.app import app

    def walk(group, prefix):
        for name, command in group.commands.items():
            full = f"{prefix} {name}".strip()
            if hasattr(command, "commands"):
                yield from walk(command, full)
            else:
                yield full, command

    return list(walk(typer.main.get_command(app), "commbench"))


def _default(param) -> str:
    if getattr(param, "is_flag", False):
        return "on" if param.default else "off"
    if param.default is None or callable(param.default) or param.default == "":
        return ""
    return f"`{param.default}`"


def commands() -> str:
    """One section per command: its help (the examples included) and a table of its arguments and options."""
    out = []
    for name, command in _click_commands():
        help_text = (command.help or "").split("Examples:")[0].strip()
        out += [f"## `{name}`", "", _text(help_text), ""]
        rows = []
        for p in command.params:
            if getattr(p, "hidden", False):
                continue
            flags = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts)) if p.param_type_name == "option" \
                else f"`{p.name.upper()}`"
            rows.append((flags, _default(p), getattr(p, "help", None) or ""))
        if rows:
            out += [_table(("argument or option", "default", "meaning"), rows), ""]
        examples = (command.epilog or "") + ("Examples:" + command.help.split("Examples:", 1)[1]
                                             if command.help and "Examples:" in command.help else "")
        if examples.strip():
            out += ["```text", examples.strip(), "```", ""]
    return "\n".join(out)


def collectives() -> str:
    from commbench.collectives import COLLECTIVES

    rows = []
    for name, c in COLLECTIVES.items():
        mpi, torch = c.native.get("mpi"), c.native.get("torch")
        rows.append((f"`{name}`", c.description, f"`{mpi.name}`" if mpi else "", f"`{torch.name}`" if torch else "",
                     f"`{c.nccl_tests_name}_perf`" if c.nccl_tests_name else "", "yes" if c.in_place_form else "no"))
    return _table(("collective", "what it does, size and busbw (nccl-tests' conventions)", "MPI",
                   "torch.distributed", "nccl-tests", "in place"), rows)


def algorithms() -> str:
    from commbench.algorithms import ALGORITHMS
    from commbench.library_calls import LIBRARY_CALLS

    rows = [(f"`{name}`", text, "every collective the library has") for name, text in LIBRARY_CALLS.items()]
    rows += [(f"`{name}`", a.description, ", ".join(a.collectives)) for name, a in ALGORITHMS.items()]
    return _table(("-a", "what runs", "collectives"), rows)


def backends() -> str:
    from commbench.backends import BACKENDS

    return _table(("--backend", "devices", "needs", "ranks started by"),
                  [(f"`{b.name}`", ", ".join(b.devices), f"`pip install 'commbench[{b.extra}]'` ({b.package})",
                    b.world) for b in BACKENDS.values()])


def exit_codes() -> str:
    from commbench.errors import EXIT_CODES

    return _table(("exit code", "meaning"), [(f"`{code}`", text) for code, text in EXIT_CODES.items()])


def columns() -> str:
    from commbench.folder.schema import AB_COLUMN_DOCS, COLUMN_DOCS, RANK_COLUMN_DOCS

    return "\n\n".join((
        "`results.csv` (and `run --json`'s rows):\n\n" + _table(("column", "meaning"),
                                                                 [(f"`{n}`", t) for n, t in COLUMN_DOCS]),
        "A `commbench ab` folder's rows also carry:\n\n" + _table(("column", "meaning"),
                                                                   [(f"`{n}`", t) for n, t in AB_COLUMN_DOCS]),
        "`ranks.csv`:\n\n" + _table(("column", "meaning"), [(f"`{n}`", t) for n, t in RANK_COLUMN_DOCS])))


def run_json() -> str:
    from commbench.folder.record import FIELDS

    return _table(("field", "JSON type", "what it records"), [(f"`{f.name}`", f.what, f.doc) for f in FIELDS.values()])


def limits() -> str:
    from commbench.folder.limits import table

    return _table(("variable", "default", "what it bounds"), [(f"`{v}`", d, w) for v, d, w in table()])


def tuning() -> str:
    from commbench.kernels.abi import TUNABLES

    def defaults(t) -> str:
        shown = {w: (f"{v / t.scale:g}" if t.scale != 1 else f"{v:,}") for w, v in t.defaults.items()}
        return "; ".join(f"{w}: {v}" for w, v in shown.items()) or "per collective (`ONESHOT_MAX`)"

    return _table(("variable", "default", "what it sets", "accepted"),
                  [(f"`{t.variable}`", defaults(t), t.meaning,
                    t.accepted() + (", a power of two" if t.power_of_two else ""))
                   for t in TUNABLES.values()])


TABLES = {"commands": commands, "collectives": collectives, "algorithms": algorithms, "backends": backends,
          "exit_codes": exit_codes, "columns": columns, "run_json": run_json, "limits": limits,
          "tuning": tuning}


def render(markdown: str) -> str:
    """`markdown` with every marker replaced by its table (an unknown marker is an error)."""
    def one(match):
        if match.group(1) not in TABLES:
            raise KeyError(f"no generated table {match.group(1)!r} (known: {', '.join(TABLES)})")
        return TABLES[match.group(1)]()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown, page, config, files):  # the MkDocs hook
    return render(markdown)
