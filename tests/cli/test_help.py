"""Help in every command (commbench/cli/app.py, commbench/cli/examples.py): -h is --help, every
help ends with examples that parse with the real commands (as do the README's command lines), an
on/off flag shows no value type, and no visible flag means one thing in one command and another
elsewhere (-o is --op; files are --output FILE, result folders --out DIR)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.exceptions import Exit

from cli_inprocess import run_cli

from commbench.cli import app
from commbench.cli.examples import EXAMPLES, split
from commbench.errors import OK

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands(cmd=None, path=()):
    """(path, click command) of commbench and every group and command under it."""
    cmd = cmd or typer.main.get_command(app)
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = [path for path, _ in _commands()]


def parse(argv: list[str]):
    """`commbench ARGV` parsed by the real command (options, types, arguments), nothing run; the
    leaf command's context."""
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="commbench", **root.context_settings)
    cmd, args = root, list(argv)
    while hasattr(cmd, "commands"):
        name = args.pop(0)
        assert name in cmd.commands, f"no command {name!r} in {' '.join(argv)!r}"
        cmd = cmd.commands[name]
        ctx = cmd.make_context(name, args, parent=ctx) if not hasattr(cmd, "commands") else \
            cmd.context_class(cmd, info_name=name, parent=ctx)
    return ctx


def test_every_group_and_command_is_covered():
    assert {"run", "sweep", "ab", "report", "compare", "topo-compare", "topo", "import nccl-tests",
            "model fit"} <= {" ".join(p) for p in COMMANDS}


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "commbench")
def test_dash_h_is_help_and_ends_with_examples(path):
    short, long = run_cli(*path, "-h"), run_cli(*path, "--help")
    assert short.code == long.code == OK, short.stderr
    assert short.stdout == long.stdout and "Usage: commbench" in short.stdout
    tail = short.stdout[short.stdout.rindex("Examples:"):]
    commands = [line.strip() for line in tail.splitlines()[1:] if line.strip().startswith("commbench")]
    assert len(commands) == len(EXAMPLES[" ".join(path)])
    assert all(line.startswith(f"commbench {' '.join(path)}") for line in commands)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "commbench")
def test_the_examples_parse(path, capsys):
    """Each example names its own command and only flags and values that command takes."""
    for line in EXAMPLES[" ".join(path)]:
        argv = shlex.split(split(line)[0])
        assert argv[0] == "commbench" and argv[1:1 + len(path)] == list(path), line
        try:
            parse(argv[1:])
        except Exit as exc:  # -h: help shown
            assert exc.exit_code == 0 and "-h" in argv, line


def _readme_commands() -> list[str]:
    """The `commbench ...` command lines of the README and of every page of the docs, in shell blocks
    and in `code` in the text, as typed (those with placeholders left out)."""
    from docs_pages import pages

    found = []
    for text in (README.read_text(), *(p.read_text() for p in pages())):
        found += _command_lines(text)
    return found


def _command_lines(text: str) -> list[str]:
    found, block, shell = [], False, False
    for line in text.replace("\\\n", " ").splitlines():  # continued lines joined
        if line.startswith("```"):
            block = not block
            shell = block and line.strip() in ("```bash", "```sh", "```")
            continue
        if not block:
            found += [c for c in re.findall(r"`(commbench\s[^`]*)`", line)  # a command with options, not a name
                      if " -" in c and not re.search(r"\.\.\.|<|\[|\$|\|", c)]
        if not shell:
            continue
        for part in line.split("&&"):
            m = re.search(r"(?:^|\s)(commbench\s.*)", part.split(" #")[0].split(" > ")[0])
            if m and not re.search(r"\.\.\.|<|\[|\$\(", m.group(1)):
                found.append(m.group(1).strip())
    return found


def test_the_readmes_command_lines_parse():
    lines = _readme_commands()
    assert len(lines) > 25 and "commbench sweep ci --out base" in lines
    for line in lines:
        try:
            parse(shlex.split(line)[1:])
        except Exit as exc:
            assert exc.exit_code == 0, line
        except Exception as exc:  # noqa: BLE001 - say which line
            pytest.fail(f"README or docs: {line!r}: {exc}")


def test_a_readme_line_with_a_flag_that_does_not_exist_is_caught():
    with pytest.raises(Exception, match="No such option"):
        parse(["report", "r", "--csv", "x"])


def test_on_off_flags_show_no_value_type():
    text = run_cli("run", "-h").stdout
    for flag in ("--in-place", "--both", "--power", "--graph", "--help"):
        row = next(line for line in text.splitlines() if f"{flag} " in line)
        assert "<bool>" not in row, row
    assert "<int>" in next(line for line in text.splitlines() if "--nprocs" in line)  # valued options keep theirs
    for path in COMMANDS:
        assert "<bool>" not in run_cli(*path, "-h").stdout, path


def _visible_options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option" and not p.hidden]


# flags of commands owned elsewhere that do not follow the grammar yet: (command, flag) -> who changes it.
# The test fails when one is fixed, so the entry goes too.
PENDING = {}  # (command, flag): what remains to change, while a command still uses a flag otherwise


def test_one_meaning_per_flag():
    """-o is --op wherever it is shown; --out is a folder a command creates; --csv and --html are no
    command's visible flag (files are --output)."""
    seen = set()
    for path, cmd in _commands():
        name = " ".join(path)
        for p in _visible_options(cmd):
            flags = set(p.opts) | set(p.secondary_opts)
            for flag in flags & {"-o", "--csv", "--html"}:
                if (name, flag) in PENDING:
                    seen.add((name, flag))
                    continue
                assert flag == "-o" and p.name == "op", f"{name}: {flag} is {p.name}"
            if "--out" in flags:
                assert p.name == "out" and "folder" in (p.help or "").lower(), f"{name}: --out is {p.help}"
    assert seen == set(PENDING), f"fixed (remove from PENDING): {set(PENDING) - seen}"


@pytest.mark.parametrize("args,line", [
    (["run", "--in-place", "true"], "--in-place is an on/off flag and takes no value (got 'true'): give --in-place "
                                    "alone, or leave it out for off"),
    (["run", "--graph", "false"], "--graph is an on/off flag and takes no value (got 'false'): give --graph alone, "
                                  "or --no-graph"),
    (["topo", "--json", "yes"], "--json is an on/off flag and takes no value (got 'yes')"),
])
def test_a_value_after_an_on_off_flag_is_explained_in_one_line(args, line):
    outcome = run_cli(*args)
    outcome.assert_clean()
    assert outcome.code == 2 and outcome.stderr.startswith(f"commbench: error: {line}"), outcome.stderr


def test_other_usage_errors_keep_clicks_message():
    outcome = run_cli("run", "--label", "x", "extra")
    assert outcome.code == 2 and "unexpected extra argument" in outcome.stderr and "on/off" not in outcome.stderr
