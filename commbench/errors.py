"""Errors the CLI turns into one line and an exit code."""


class InputError(ValueError):
    """Bad user input: reported as one line, exit code 2, before anything is written."""


class JobError(RuntimeError):
    """The ranks failed (a crash, a hang past the timeout, an error in a rank): exit code 1."""
