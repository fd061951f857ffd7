"""Errors the CLI turns into one line and an exit code, and the exit codes (commbench.cli.app.main)."""

OK, FAILED, BAD_INPUT, INTERNAL = 0, 1, 2, 3  # FAILED: a regression, a failed or wrong measurement
NO_VERDICT = BAD_INPUT  # compare / ab judged no point (every one inconclusive): nothing usable came out, not a pass


class Unavailable(str):
    """A point's skip reason that is a failure, not a combination that cannot exist: an asked-for algorithm
    could not be built, loaded or run here (a kernel without its compiler, a GPU without peer access). A
    run with such a skip fails (exit 1), naming it."""


class InputError(ValueError):
    """Bad user input: reported as one line, exit code 2, before anything is written."""


class JobError(RuntimeError):
    """The ranks failed (a crash, a hang past the timeout, an error in a rank): exit code 1."""
