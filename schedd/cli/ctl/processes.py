"""The processes `schedctl work` runs: one per message, in a process group of its own (as the
payload's user with --shell under root), its stdout and stderr relayed and kept (the two ends, for
the attempt's output; the tail of stderr for a nack's error), killed on --timeout or past the
grace period. It never touches the store, raft or the node; work.py holds the command line.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO

from schedd.cli.ctl.shell import Launch, Unrunnable, argv_launch, shell_launch
from schedd.timeformat import format_duration
from schedd.worker import Ack, Message, Nack, Output

POLL_S = 0.1  # how often a runner looks at its command's deadline
KILL_AFTER_S = 5.0  # SIGTERM to a process group, then SIGKILL this much later
TAIL_BYTES = 2_000  # the end of a command's stderr that a nack carries
LINE_BYTES = 64 * 1024  # a longer line is relayed in pieces of this size
OUTPUT_AFTER_EXIT_S = 1.0  # what the pipes still carry this long after the command's exit is kept


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What `schedctl work` was asked to do, checked before any request."""

    queue: str
    argv: tuple[str, ...]  # empty with `is_shell`: each message's payload names its command
    is_shell: bool
    concurrency: int
    timeout_ms: int | None
    visibility_timeout_ms: int
    wait_ms: int
    grace_ms: int
    is_once: bool
    as_json: bool
    allowed_users: tuple[str, ...] = ()  # --allow-user: with --shell, whom a command may run as


@dataclass(slots=True, eq=False)
class Task:
    """One received message and the command running for it."""

    message: Message
    started_s: float = field(default_factory=time.monotonic)
    exit_code: int | None = None
    abort_reason: str | None = None  # set when the command must be killed: timeout or shutdown
    tail: bytearray = field(default_factory=bytearray)
    output: Output = field(default_factory=Output)
    is_kept: bool = True  # False once the attempt's output is taken: later output is only relayed
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def facts(self) -> str:
        return self.message.facts


class Log:
    """Timestamped lines on stderr, between the lines the commands write."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: the signal handler logs on the main thread

    def line(self, text: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        with self._lock:
            sys.stderr.write(f"{stamp} schedctl work: {text}\n")
            sys.stderr.flush()

    def relay(self, data: bytes, stream: IO[bytes]) -> None:
        """Pass a line of a command's output through (a closed stream drops it)."""
        with self._lock, contextlib.suppress(OSError, ValueError):
            stream.write(data)
            stream.flush()


class Commands:
    """The handler: runs the command for a message to its end, kills its process group on
    --timeout or once the worker's grace period is over; returns Ack(output) on exit 0, else
    raises Nack(error, output). Each message's exit code is kept for its `finished` line."""

    def __init__(self, settings: Settings, log: Log, grace_over: threading.Event) -> None:
        self._s = settings
        self._log = log
        self._grace_over = grace_over
        self._exit_codes: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def __call__(self, message: Message) -> Ack:
        task = Task(message=message)
        is_dead = False
        try:
            error = self._execute(task)
        except Unrunnable as exc:
            error, is_dead = str(exc), exc.is_dead
            self._log.line(f"not run {message.facts}{' (dead)' if is_dead else ''}: {exc}")
        except Exception as exc:  # the top of a handler: the message is still nacked
            error = f"schedctl work could not run the command: {exc!r}"
        with self._lock:
            self._exit_codes[message.receipt] = task.exit_code
        output = task.output.text()
        if error is not None:
            raise Nack(error, output=output, is_dead=is_dead)
        return Ack(output)

    def exit_code(self, message: Message) -> int | None:
        """The exit code of the message's command (None: never started, or still running)."""
        with self._lock:
            return self._exit_codes.pop(message.receipt, None)

    def _launch(self, message: Message) -> Launch:
        if not self._s.is_shell:
            return argv_launch(self._s.argv, message.payload, os.environ)
        allowed = frozenset(self._s.allowed_users)
        return shell_launch(message.payload, os.environ, euid=os.geteuid(), allowed=allowed)

    def _execute(self, task: Task) -> str | None:
        """Run the command to its end; the nack error, or None for success."""
        launch = self._launch(task.message)
        try:
            process = self._spawn(task, launch)
        except OSError as exc:
            where = f" in {launch.cwd}" if launch.cwd and exc.filename == launch.cwd else ""
            return f"cannot start {launch.argv[0]!r}{where}: {exc.strerror or exc}"
        assert process.stdin and process.stdout and process.stderr
        threading.Thread(target=_feed, args=(process.stdin, launch.stdin), daemon=True).start()
        out = sys.stderr.buffer if self._s.as_json else sys.stdout.buffer  # stdout stays JSON
        relays = [
            threading.Thread(target=self._relay, args=(task, process.stdout, out, False)),
            threading.Thread(target=self._relay, args=(task, process.stderr, sys.stderr.buffer)),
        ]
        for relay in relays:
            relay.daemon = True
            relay.start()
        task.exit_code = self._wait(task, process)
        if task.abort_reason is not None or not self._s.is_shell:
            _signal_group(process.pid, signal.SIGKILL)  # the command's stragglers end with it
        # A line's `app &` may keep the pipes open: what comes after a short while is relayed,
        # no longer kept, and the attempt ends without waiting for it.
        kept_until_s = time.monotonic() + OUTPUT_AFTER_EXIT_S
        for relay in relays:
            relay.join(timeout=max(0.0, kept_until_s - time.monotonic()))
        with task.lock:
            task.is_kept = False
        return _error(task)

    def _spawn(self, task: Task, launch: Launch) -> subprocess.Popen[bytes]:
        message = task.message
        env = {
            **launch.env,
            "SCHEDD_QUEUE": self._s.queue,
            "SCHEDD_JOB_ID": message.job_id,
            "SCHEDD_SCHEDULED_AT": message.scheduled_at,
            "SCHEDD_ATTEMPT": str(message.attempt),
            "SCHEDD_IDEMPOTENCY_KEY": message.idempotency_key,
        }
        return subprocess.Popen(
            launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=launch.cwd,
            start_new_session=True,  # its own process group, out of reach of the terminal's ^C
            # Set in the child before its exec, groups, then gid, then uid: no root left.
            user=launch.uid,
            group=launch.gid,
            extra_groups=None if launch.groups is None else list(launch.groups),
        )

    def _relay(self, task: Task, stream: IO[bytes], to: IO[bytes], is_stderr: bool = True) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with stream:
            for data in _chunks(stream):
                self._log.relay(data, to)
                with task.lock:
                    if not task.is_kept:
                        continue
                    task.output.add(decoder.decode(data))
                    if is_stderr:
                        task.tail += data
                        del task.tail[:-TAIL_BYTES]
        with task.lock:
            if task.is_kept:
                task.output.add(decoder.decode(b"", final=True))

    def _wait(self, task: Task, process: subprocess.Popen[bytes]) -> int:
        """Wait for the command; on timeout or past the grace period SIGTERM its group, later
        SIGKILL."""
        timeout_ms = self._s.timeout_ms
        deadline_s = None if timeout_ms is None else task.started_s + timeout_ms / 1000
        term_sent_s: float | None = None
        while True:
            try:
                return process.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                now = time.monotonic()
            if task.abort_reason is None and deadline_s is not None and now >= deadline_s:
                task.abort_reason = (
                    f"timed out after {format_duration(timeout_ms or 0)}: process group killed"
                )
                self._log.line(f"timed out {task.facts}: killing process group {process.pid}")
            if task.abort_reason is None and self._grace_over.is_set():
                grace = format_duration(self._s.grace_ms)
                task.abort_reason = f"schedctl work stopped: the {grace} grace period passed"
            if task.abort_reason is not None and term_sent_s is None:
                _signal_group(process.pid, signal.SIGTERM)
                term_sent_s = now
            elif term_sent_s is not None and now - term_sent_s >= KILL_AFTER_S:
                _signal_group(process.pid, signal.SIGKILL)


def _chunks(stream: IO[bytes]) -> Iterator[bytes]:
    """A command's output line by line, a line longer than LINE_BYTES in pieces, and a line not
    ended after POLL_S of quiet as it is (else a background child holding the pipe would keep
    it from the attempt)."""
    fd = stream.fileno()
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    pending = bytearray()
    while True:
        if not poll.poll(POLL_S * 1000):
            if pending:
                yield bytes(pending)
                pending.clear()
            continue
        data = os.read(fd, LINE_BYTES)
        if not data:
            break
        pending += data
        while (end := pending.find(b"\n") + 1) or len(pending) >= LINE_BYTES:
            cut = end or LINE_BYTES
            yield bytes(pending[:cut])
            del pending[:cut]
    if pending:
        yield bytes(pending)


def _feed(stream: IO[bytes], data: bytes) -> None:
    """Write the command's stdin, then close it; a command that never reads it is fine."""
    with contextlib.suppress(OSError), stream:
        stream.write(data)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pgid, sig)


def exit_text(code: int | None) -> str:
    """An exit status for people: 0, 3, SIGTERM (killed by a signal), or - (never started)."""
    if code is None or code >= 0:
        return "-" if code is None else str(code)
    with contextlib.suppress(ValueError):
        return signal.Signals(-code).name
    return f"signal {-code}"


def _error(task: Task) -> str | None:
    """The nack error of a finished command: why, then the tail of its stderr."""
    code = task.exit_code
    if task.abort_reason is not None:
        reason = task.abort_reason
    elif code == 0:
        return None
    elif code is not None and code < 0:
        reason = f"killed by {exit_text(code)}"
    else:
        reason = f"exit code {code}"
    tail = task.tail.decode("utf-8", errors="replace").strip()
    return f"{reason}\n{tail}" if tail else reason
