"""Rank 0's events to the parent (commbench/events.py): one JSON object per stdout line behind a
prefix; parse() finds it wherever the launcher put it on the line (a tag of mpirun --tag-output, a
srun label) and takes every other line, a broken one included, for ordinary output (None)."""

import json
from pathlib import Path

import pytest

from commbench import events
from commbench.events import PREFIX, emit_stdout, parse


def test_an_event_is_one_prefixed_json_line_and_flushed(capsys):
    emit_stdout("row", row={"point": 3, "time_us": 1.5}, note="a\nb")
    out = capsys.readouterr().out
    assert out.startswith(PREFIX) and out.endswith("\n") and out.count("\n") == 1  # a newline in a value stays escaped
    assert json.loads(out[len(PREFIX):]) == {"event": "row", "row": {"point": 3, "time_us": 1.5}, "note": "a\nb"}


def test_what_json_cannot_hold_travels_as_its_text(capsys):
    emit_stdout("ready", path=Path("/tmp/x"), value=1 + 2j)
    assert parse(capsys.readouterr().out) == {"event": "ready", "path": "/tmp/x", "value": "(1+2j)"}


def test_emit_then_parse_gives_the_event_back(capsys):
    data = {"world_size": 4, "hosts": ["a", "b"], "total": 7, "text": "\x1b[31m\u202e"}
    emit_stdout("ready", **data)
    line = capsys.readouterr().out.rstrip("\n")
    assert parse(line) == {"event": "ready", **data}


@pytest.mark.parametrize("tag", ["", "[1,0]<stdout>: ", "0: ", "some text before "])
def test_the_prefix_is_found_after_a_launchers_tag(tag):
    assert parse(f'{tag}{PREFIX}{{"event": "done"}}') == {"event": "done"}


@pytest.mark.parametrize("line", ["", "hello", "@@commbench", "@@commbench{}", f'{PREFIX}{{"event": "done"',
                                  f"{PREFIX}not json", f"{PREFIX}{{'event': 'done'}}", f"{PREFIX[:-1]}x"])
def test_an_ordinary_or_broken_line_is_none(line):
    assert parse(line) is None


def test_the_first_prefix_on_a_line_is_the_one_read():
    assert parse(f'{PREFIX}{{"event": "a"}} {PREFIX}{{"event": "b"}}') is None  # the JSON runs into the second
    assert events.parse(f'x {PREFIX}{{"event": "a", "s": "{PREFIX}"}}') == {"event": "a", "s": PREFIX}


@pytest.mark.parametrize("line", [f"{PREFIX}5", f"{PREFIX}[1, 2]", f'{PREFIX}"done"', f'{PREFIX}{{"row": 1}}'])
def test_a_prefixed_value_that_is_no_event_is_not_taken_for_one(line):
    event = parse(line)
    assert event is None or (isinstance(event, dict) and "event" in event)
