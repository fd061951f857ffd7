"""COMMBENCH_PLUGINS (commbench/plugins.py): every module named (a comma list, spaces and empty
entries ignored) is imported once; a module that fails to import waits for check(), which raises the
first failure as one InputError line, and the CLI turns it into exit 2 before any command runs."""

import sys

import pytest

from cli_inprocess import run_cli
from commbench import plugins
from commbench.errors import BAD_INPUT, InputError

COUNTER = "import builtins\nbuiltins.COMMBENCH_TEST_IMPORTS = getattr(builtins, 'COMMBENCH_TEST_IMPORTS', 0) + 1\n"


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty plugin state and a folder on sys.path for the test's modules (removed afterwards)."""
    import builtins

    monkeypatch.setattr(plugins, "_loaded", set())
    monkeypatch.setattr(plugins, "_errors", [])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(builtins, "COMMBENCH_TEST_IMPORTS", 0, raising=False)
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("cbplug_")]:
        del sys.modules[name]


def _imports() -> int:
    import builtins

    return builtins.COMMBENCH_TEST_IMPORTS


def test_every_module_named_is_imported_once(fresh):
    for name in ("cbplug_a", "cbplug_b"):
        (fresh / f"{name}.py").write_text(COUNTER)
    plugins.load({plugins.PLUGINS_ENV: " cbplug_a, ,cbplug_b,,cbplug_a "})
    assert _imports() == 2 and {"cbplug_a", "cbplug_b"} <= set(sys.modules)
    plugins.load({plugins.PLUGINS_ENV: "cbplug_a,cbplug_b"})  # again (a second registry): nothing imported twice
    assert _imports() == 2 and plugins._loaded == {"cbplug_a", "cbplug_b"}
    plugins.check()  # no failure: nothing raised


def test_no_variable_or_an_empty_one_loads_nothing(fresh, monkeypatch):
    monkeypatch.delenv(plugins.PLUGINS_ENV, raising=False)
    plugins.load()
    plugins.load({plugins.PLUGINS_ENV: " , "})
    assert plugins._loaded == set() and plugins._errors == []


def test_failures_wait_for_check_which_raises_the_first_as_one_line(fresh):
    (fresh / "cbplug_broken.py").write_text("raise RuntimeError('no GPU here')\n")
    (fresh / "cbplug_syntax.py").write_text("def (:\n")
    plugins.load({plugins.PLUGINS_ENV: "cbplug_missing_module,cbplug_broken,cbplug_syntax"})  # no exception yet
    assert len(plugins._errors) == 3
    assert plugins._errors[0] == ("COMMBENCH_PLUGINS: cannot import 'cbplug_missing_module' "
                                  "(ModuleNotFoundError: No module named 'cbplug_missing_module')")
    assert plugins._errors[1] == "COMMBENCH_PLUGINS: cannot import 'cbplug_broken' (RuntimeError: no GPU here)"
    assert plugins._errors[2].startswith("COMMBENCH_PLUGINS: cannot import 'cbplug_syntax' (SyntaxError: ")
    with pytest.raises(InputError, match="cannot import 'cbplug_missing_module'") as raised:
        plugins.check()
    assert "cbplug_broken" not in str(raised.value)
    plugins.load({plugins.PLUGINS_ENV: "cbplug_broken"})  # named again: not retried, not reported twice
    assert len(plugins._errors) == 3


def test_a_plugin_registers_a_collective(fresh, monkeypatch):
    from commbench.collectives import COLLECTIVES, lookup
    from commbench.collectives.all_reduce import AllReduce

    class Renamed(AllReduce):
        name = "cbplug_all_reduce"

    monkeypatch.setattr("builtins.CBPLUG_CLASS", Renamed, raising=False)
    monkeypatch.setitem(COLLECTIVES, "cbplug_all_reduce", None)  # taken out of the registry after the test
    (fresh / "cbplug_coll.py").write_text("import builtins\nfrom commbench.collectives import register\n"
                                          "register(builtins.CBPLUG_CLASS())\n")
    plugins.load({plugins.PLUGINS_ENV: "cbplug_coll"})
    assert isinstance(lookup("cbplug_all_reduce"), Renamed) and plugins._errors == []


def test_the_cli_refuses_to_run_with_a_broken_plugin(fresh, tmp_path):
    before = run_cli("compare", tmp_path / "a", tmp_path / "b")
    assert before.code == BAD_INPUT and "COMMBENCH_PLUGINS" not in before.stderr  # the folders' own error
    plugins.load({plugins.PLUGINS_ENV: "cbplug_nowhere"})
    outcome = run_cli("compare", tmp_path / "a", tmp_path / "b")
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT
    assert outcome.stderr == ("commbench: error: COMMBENCH_PLUGINS: cannot import 'cbplug_nowhere' "
                              "(ModuleNotFoundError: No module named 'cbplug_nowhere')\n")
