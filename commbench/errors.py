"""Errors the CLI turns into one line and an exit code, and the exit codes (commbench.cli.app.main)."""

OK, FAILED, BAD_INPUT, INTERNAL = 0, 1, 2, 3  # FAILED: a regression, a failed or wrong measurement
NO_VERDICT = BAD_INPUT  # compare / ab judged no point (every one inconclusive): nothing usable came out, not a pass
# what each exit code means, for every command (the docs' table is generated from this)
EXIT_CODES = {
    OK: "ok",
    FAILED: "a wrong result, a failed or hung job, an asked-for algorithm or backend that could not run (unless "
            "--allow-skips), or a regression (compare, ab)",
    BAD_INPUT: "bad input or unusable data (nothing measured, an unwritable output, a damaged folder), and \"no "
               "verdict\" from compare / ab (every point inconclusive: a gate does not pass on nothing judged)",
    INTERNAL: "an internal error: one line, and the traceback written to a file it names (please report it)",
    128: "128 + N: ended by signal N, with one line: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP, 141 standard output closed; "
         "the ranks are killed, the rows measured so far kept, run.json says interrupted",
}


class Unavailable(str):
    """A point's skip reason that is a failure, not a combination that cannot exist: an asked-for algorithm
    could not be built, loaded or run here (a kernel without its compiler, a GPU without peer access). A
    run with such a skip fails (exit 1), naming it."""


class InputError(ValueError):
    """Bad user input: reported as one line, exit code 2, before anything is written."""


class JobError(RuntimeError):
    """The ranks failed (a crash, a hang past the timeout, an error in a rank): exit code 1."""
