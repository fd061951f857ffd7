"""Errors the CLI turns into one line and an exit code, and the exit codes (commbench.cli.app.main)."""

OK, FAILED, BAD_INPUT, INTERNAL = 0, 1, 2, 3  # FAILED: a regression, a failed or wrong measurement


class InputError(ValueError):
    """Bad user input: reported as one line, exit code 2, before anything is written."""


class JobError(RuntimeError):
    """The ranks failed (a crash, a hang past the timeout, an error in a rank): exit code 1."""
