"""The documentation's pages as the tests read them: the Markdown sources under docs/, each page with
its generated tables rendered by the site's own hook (docs/hooks/reference.py), and the command
lines of their code blocks."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RUNNABLE = "<!-- runnable -->"  # before a code block: its command lines run in the tests as written


@cache
def hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pages() -> list[Path]:
    """Every page of the site (the hook's folder is not a page)."""
    return sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)


def rendered(page: str) -> str:
    """A page (its path under docs/) with its generated tables in place."""
    return hook().render((DOCS / page).read_text())


def runnable_lines() -> list[tuple[str, str]]:
    """(page, command line) of every line of every code block marked runnable, comments dropped."""
    found = []
    for page in pages():
        text = page.read_text()
        for block in re.findall(re.escape(RUNNABLE) + r"\s*```\w*\n(.*?)```", text, re.S):
            found += [(str(page.relative_to(DOCS)), line.split("  #")[0].strip())
                      for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    return found
