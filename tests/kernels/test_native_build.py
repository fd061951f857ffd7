"""commbench.kernels.native_build: C builds at first use, cached by source text, compiler and flags.
The compiler here is a fake (a script that copies its source to its output, counting its runs),
so a test sees the cache key decide what is built again, and a compiler's failure become one line."""

import os
import stat
import sys
from pathlib import Path

import pytest

from commbench.kernels import native_build
from commbench.kernels.native_build import BuildFailed, build, cache_dir, first_line

FAKE_CC = f"""#!{sys.executable}
import os, shutil, sys
src, out = sys.argv[1], sys.argv[2]
with open(os.environ["FAKE_CC_LOG"], "a") as log:
    log.write(open(src).read() + "\\n")
mode = os.environ.get("FAKE_CC_MODE", "ok")
if mode == "fail":
    sys.stdout.write("compiling...\\n")
    sys.stderr.write(src + ":1:1: warning: odd\\n" + src + ":2:5: Error: boom\\nmore\\n")
    sys.exit(3)
if mode == "silent":
    sys.exit(1)
if mode != "no-output":
    shutil.copyfile(src, out)
"""


def _program(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def cc(tmp_path, monkeypatch):
    """The fake compiler (its runs logged) and a cache of this test's own."""
    monkeypatch.setenv("COMMBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_CC_LOG", str(tmp_path / "runs.log"))
    (tmp_path / "runs.log").write_text("")
    return _program(tmp_path, "fakecc", FAKE_CC)


def _runs(cc: Path) -> list[str]:
    return [line for line in (cc.parent / "runs.log").read_text().splitlines() if line]


def _build(cc, text="int f(void) { return 1; }", key=("fakecc", "1.0", "-O2")) -> Path:
    return build("lib", text, ".c", lambda src, out: [str(cc), str(src), str(out)], list(key), "the test build")


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COMMBENCH_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine" / "kernels"
    monkeypatch.delenv("COMMBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "commbench" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "commbench" / "kernels"
    monkeypatch.setenv("COMMBENCH_CACHE", "")  # empty: not set
    assert cache_dir() == tmp_path / "home" / ".cache" / "commbench" / "kernels"


def test_first_line_of_a_program(tmp_path):
    both = _program(tmp_path, "both", "#!/bin/sh\necho 'cc 1.2.3'\necho second\necho err >&2\n")
    only_err = _program(tmp_path, "err", "#!/bin/sh\necho 'clang version 9' >&2\necho x >&2\n")
    failing = _program(tmp_path, "failing", "#!/bin/sh\necho 'cc 1.2.3'\nexit 1\n")
    assert first_line([str(both)]) == "cc 1.2.3"
    assert first_line([str(only_err)]) == "clang version 9"
    assert first_line([str(failing)]) == ""
    assert first_line([str(tmp_path / "missing")]) == ""


def test_one_build_per_text_and_key(cc):
    lib = _build(cc)
    assert lib.read_text() == "int f(void) { return 1; }" and lib.suffix == ".so"
    assert lib.parent == cache_dir() and lib.name.startswith("lib-") and len(lib.stem) == len("lib-") + 20
    assert _build(cc) == lib and len(_runs(cc)) == 1  # cached: not compiled again
    other_text = _build(cc, text="int f(void) { return 2; }")
    other_key = _build(cc, key=("fakecc", "2.0", "-O2"))  # a new compiler version: a new build
    other_flags = _build(cc, key=("fakecc", "1.0", "-O3"))
    assert len({lib, other_text, other_key, other_flags}) == 4 and len(_runs(cc)) == 4
    # the key is not a concatenation: ("ab", "c") and ("a", "bc") are two builds
    assert _build(cc, key=("ab", "c")) != _build(cc, key=("a", "bc"))
    leftovers = sorted(p.name for p in cache_dir().iterdir() if p.suffix not in (".so", ".lock"))
    assert leftovers == []  # the build's temporary folder is gone


def test_a_failing_compiler_is_one_line_naming_its_error(cc, monkeypatch):
    monkeypatch.setenv("FAKE_CC_MODE", "fail")
    with pytest.raises(BuildFailed) as failed:
        _build(cc)
    message = str(failed.value)
    assert message.startswith("the test build failed (fakecc exited 3: ") and message.endswith(":2:5: Error: boom)")
    assert "\n" not in message
    assert not list(cache_dir().glob("*.so"))
    monkeypatch.setenv("FAKE_CC_MODE", "ok")  # fixed: the next use builds
    assert _build(cc).exists() and len(_runs(cc)) == 2


def test_a_compiler_that_says_nothing_or_writes_nothing(cc, monkeypatch):
    monkeypatch.setenv("FAKE_CC_MODE", "silent")
    with pytest.raises(BuildFailed, match=r"^the test build failed \(fakecc exited 1, printing nothing\)$"):
        _build(cc)
    monkeypatch.setenv("FAKE_CC_MODE", "no-output")  # exit 0 but no library: a failure too
    with pytest.raises(BuildFailed, match=r"^the test build failed \(fakecc exited 0, printing nothing\)$"):
        _build(cc)


def test_a_missing_compiler_and_an_unwritable_cache(cc, tmp_path, monkeypatch):
    with pytest.raises(BuildFailed, match=r"the test build failed \(nocc: .*No such file"):
        _build(tmp_path / "nocc")
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("COMMBENCH_CACHE", str(tmp_path / "file"))  # a file where the cache folder should be
    with pytest.raises(BuildFailed, match=f"^the build cache {tmp_path / 'file'} is not this user's folder: remove it"):
        _build(cc)
    monkeypatch.setenv("COMMBENCH_CACHE", "/proc/1/cache")  # a folder that cannot be made
    with pytest.raises(BuildFailed, match="^the test build cannot be written to /proc/1/cache/kernels: "):
        _build(cc)


def test_a_timeout_is_one_line(cc, monkeypatch):
    import subprocess

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], 600)

    monkeypatch.setattr(native_build.subprocess, "run", slow)
    with pytest.raises(BuildFailed, match=r"the test build failed \(fakecc: Command .* timed out after 600 seconds\)"):
        _build(cc)
    assert os.listdir(cache_dir()) == [p for p in os.listdir(cache_dir()) if p.endswith(".lock")]


def test_without_a_home_the_cache_is_this_users_in_the_temporary_folder(monkeypatch, tmp_path):
    """Issue 67, H2: HOME unset and a uid missing from passwd put the cache in ./~/.cache/commbench."""
    for name in ("COMMBENCH_CACHE", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(native_build.os.path, "expanduser", lambda path: path)  # no passwd entry: "~" stays
    monkeypatch.setattr(native_build.tempfile, "gettempdir", lambda: str(tmp_path))
    assert cache_dir() == tmp_path / f"commbench-cache-{os.getuid()}" / "kernels"


def test_an_empty_home_is_no_home(monkeypatch, tmp_path):
    """HOME set empty: Python's expanduser reads "~" as "/", which put root's cache in /.cache."""
    for name in ("COMMBENCH_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", "")
    monkeypatch.setattr(native_build.tempfile, "gettempdir", lambda: str(tmp_path))
    assert cache_dir() == tmp_path / f"commbench-cache-{os.getuid()}" / "kernels"


def test_the_cache_is_this_users_alone_whatever_the_umask(cc):
    """Issue 67, H2: under umask 000 the folders and libraries were 0777 and another user's library ran."""
    old = os.umask(0)
    try:
        lib = _build(cc)
    finally:
        os.umask(old)
    assert stat.S_IMODE(lib.stat().st_mode) == 0o755
    assert stat.S_IMODE(lib.parent.stat().st_mode) == stat.S_IMODE(lib.parent.parent.stat().st_mode) == 0o700
    lib.parent.chmod(0o777)  # opened up since: made private again, not trusted as it is
    assert _build(cc) == lib and stat.S_IMODE(lib.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("planted", ["writable by others", "a link", "another user's"])
def test_a_library_this_user_did_not_build_is_not_loaded(cc, tmp_path, planted):
    lib = _build(cc)
    if planted == "writable by others":
        lib.chmod(0o777)
    elif planted == "a link":
        (tmp_path / "theirs.so").write_text("x")
        lib.unlink()
        lib.symlink_to(tmp_path / "theirs.so")
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(lib, 12345, 12345)
    with pytest.raises(BuildFailed, match="is not a library this user built"):
        _build(cc)
    assert len(_runs(cc)) == 1  # nothing built over it either


def test_a_cache_folder_of_another_users_is_refused(cc, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    (tmp_path / "cache" / "kernels").mkdir(parents=True)
    os.chown(tmp_path / "cache" / "kernels", 12345, 12345)
    with pytest.raises(BuildFailed, match="is not this user's folder"):
        _build(cc)
