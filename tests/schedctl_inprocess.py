"""`schedctl` run inside the test process: its entry point `schedd.cli.ctl.main.main`, from argv
to exit code, with the environment, stdin, stdout and stderr a subprocess would have had.

A schedctl process spends about 0.4 s of CPU importing itself before its one request; the
integration tests ran about 150 of them a run on two cores. What runs here is the same code:
click parses the same argv with the same environment (`auto_envvar_prefix`, COLUMNS), the
command makes its real HTTP requests, and `schedd.cli.exits.run` turns every failure into the
stderr line and `sys.exit` code the process would have exited with (an exception that escaped
would have been a traceback and exit 1: it is one here too). The streams are pipes' stand-ins:
not a terminal, UTF-8. The console script itself (a process, its exit status, `schedctl work`'s
signals) is still started by the tests that say `process=True`.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence

# Commands that install signal handlers or run until signalled: always a real process.
PROCESS_ONLY = frozenset({"work"})


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _pipe() -> io.TextIOWrapper:
    """A text stream like a subprocess's piped stdout: UTF-8, not a terminal."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="\n", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def _exit_code(exc: SystemExit, stderr: io.TextIOWrapper) -> int:
    """What the interpreter would exit with for `sys.exit(exc.code)`."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    stderr.write(f"{exc.code}\n")
    return 1


def run_schedctl(
    args: Sequence[str], *, env: Mapping[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`schedctl *args` with `env` as its whole environment and `stdin` on its standard input:
    a CompletedProcess as `subprocess.run(..., capture_output=True, text=True)` returns it."""
    assert not PROCESS_ONLY & set(args), f"run {sorted(PROCESS_ONLY & set(args))} as a process"
    from schedd.cli.ctl.main import main  # the console script's own entry point

    stdout, stderr = _pipe(), _pipe()
    stdin_stream = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
    streams = (sys.stdin, sys.stdout, sys.stderr)
    code = 0
    with _environment(env):
        sys.stdin, sys.stdout, sys.stderr = stdin_stream, stdout, stderr
        try:
            main(list(args))
        except SystemExit as exc:
            code = _exit_code(exc, stderr)
        except Exception:
            traceback.print_exc(file=stderr)  # an uncaught exception: the interpreter's report
            code = 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
    return subprocess.CompletedProcess(["schedctl", *args], code, _text(stdout), _text(stderr))
