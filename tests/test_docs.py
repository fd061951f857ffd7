"""The documentation (issue 68): a README a newcomer reads in minutes, a site whose reference tables
come from the registries (so a registry entry without its text fails here), every page reachable
from the site's navigation, every generated table rendered and every relative link leading to a
page or file that exists. `make docs` builds the site strictly (CI runs it); the runnable examples
run in tests/cli/test_readme_runs.py."""

from __future__ import annotations

import re

import pytest
import yaml
from docs_pages import DOCS, ROOT, hook, pages, rendered, runnable_lines

from commbench.errors import BAD_INPUT, EXIT_CODES, FAILED, INTERNAL, OK


def _nav_files(nav) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_files(value) if isinstance(value, list) else [value]
    return out


def test_the_readme_is_short_and_its_first_screen_names_the_three_jobs():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    first_screen = "\n".join(lines[:60])
    for command in ("commbench check", "commbench stragglers", "commbench ab", "commbench compare", "commbench report",
                    "commbench workload", "make sweep", "make test"):
        assert command in first_screen, command


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    nav = _nav_files(config["nav"])
    assert sorted(nav) == sorted(str(p.relative_to(DOCS)) for p in pages())
    assert config["strict"] is True and "docs/hooks/reference.py" in config["hooks"]


@pytest.mark.parametrize("page", [str(p.relative_to(DOCS)) for p in pages()])
def test_every_generated_table_renders_and_every_relative_link_resolves(page):
    text = rendered(page)
    assert "<!-- generated:" not in text
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+:", target):
            assert ((DOCS / page).parent / target).exists(), f"{page}: {target}"


def test_an_unknown_generated_table_is_an_error():
    with pytest.raises(KeyError, match="no generated table 'nope'"):
        hook().render("<!-- generated: nope -->")


def test_every_registry_entry_has_the_text_its_row_needs():
    from commbench.algorithms import ALGORITHMS
    from commbench.backends import BACKENDS
    from commbench.collectives import COLLECTIVES
    from commbench.folder.schema import AB_COLUMN_DOCS, COLUMN_DOCS, RANK_COLUMN_DOCS
    from commbench.library_calls import LIBRARY_CALLS

    assert all(c.description.strip() for c in COLLECTIVES.values())
    assert [n for n, a in ALGORITHMS.items() if not a.description.strip()] == []
    assert all(text.strip() for text in LIBRARY_CALLS.values())
    assert all(b.devices and b.extra for b in BACKENDS.values())
    assert all(text.strip() for _, text in (*COLUMN_DOCS, *AB_COLUMN_DOCS, *RANK_COLUMN_DOCS))
    assert {OK, FAILED, BAD_INPUT, INTERNAL} <= set(EXIT_CODES) and all(EXIT_CODES.values())


def test_every_command_and_every_option_is_documented_once_with_its_help():
    page = hook().commands()
    for name, command in hook()._click_commands():
        section = page.split(f"## `{name}`\n", 1)[1].split("\n## `", 1)[0]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        for p in params:
            flags = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts)) if p.param_type_name == "option" \
                else f"`{p.name.upper()}`"
            rows = [line for line in section.splitlines() if line.startswith(f"| {flags} |")]
            assert len(rows) == 1, (name, flags)
            assert getattr(p, "help", None), f"{name} {flags}: no help text"
    run = page.split("## `commbench run`\n", 1)[1].split("\n## `", 1)[0]
    from commbench import options

    for option in (o for o in options.OPTIONS if o.cli):
        flag = option.flag or "--" + option.name.replace("_", "-")
        assert f"`{flag}`" in run, flag


def test_the_runnable_examples_are_found():
    lines = runnable_lines()
    assert len(lines) >= 4 and all(line.startswith("commbench ") for _, line in lines)
