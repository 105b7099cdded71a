"""`schedctl work`: a competing consumer that runs a command for each message of one queue.

It long-polls over HTTP, runs each command in its own process group, extends the message's
visibility while it runs, and acks or nacks it. It never touches the store, raft or the node.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import IO, Any, TypeVar

import click

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import read_answer
from schedd.cli.ctl.client import Client, parse_urls
from schedd.cli.ctl.render import json_option
from schedd.errors import ClusterUnavailable, InvalidRequest, QuotaExceeded, SchedError
from schedd.jsonbody import JSONValue
from schedd.timeformat import format_duration, parse_duration
from schedd.wire.queues import Message, Messages

QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MAX_WAIT_MS = 20_000  # the server's longest long poll
MAX_VISIBILITY_MS = 12 * 3_600_000
POLL_S = 0.1  # how often a runner looks at its command's deadline
TICK_S = 0.2  # the main thread waits in short steps so signal handlers run promptly
KILL_AFTER_S = 5.0  # SIGTERM to a process group, then SIGKILL this much later
TAIL_BYTES = 2_000  # the end of a command's stderr that a nack carries
SETTLE_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
SETTLE_BUDGET_S = KILL_AFTER_S + 2 * sum(SETTLE_BACKOFF_S)
RECONNECT_MAX_S = 10.0
F = TypeVar("F", bound=Callable[..., Any])


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


@dataclass(slots=True, eq=False)
class Task:
    """One received message and the command running for it."""

    message: Message
    started_s: float = field(default_factory=time.monotonic)
    exit_code: int | None = None
    abort_reason: str | None = None  # set when the command must be killed: timeout or shutdown
    tail: bytearray = field(default_factory=bytearray)

    @property
    def receipt(self) -> str:
        return self.message.receipt

    @property
    def facts(self) -> str:
        return f"job={self.message.job_id} attempt={self.message.attempt}"


class Log:
    """Timestamped lines on stderr, between the lines of the commands' own stderr."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: the signal handler logs on the main thread

    def line(self, text: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        with self._lock:
            sys.stderr.write(f"{stamp} schedctl work: {text}\n")
            sys.stderr.flush()

    def relay(self, data: bytes) -> None:
        """Pass a line of a command's stderr through."""
        with self._lock:
            sys.stderr.buffer.write(data)
            sys.stderr.buffer.flush()


class Nodes:
    """The node URLs: requests stay on the node that answered last and move on when it fails."""

    def __init__(self, client: Client, log: Log) -> None:
        self._urls = parse_urls(client.url)
        self._client = client
        self._log = log
        self._current = 0
        self._lock = threading.Lock()

    @property
    def current(self) -> str:
        return self._urls[self._current]

    def request(
        self, method: str, path: str, body: Any = None, *, extra_timeout_s: float = 0.0
    ) -> Any:
        """Try the current node, then each other one. Every worker request is safe to repeat:
        a lost receive delays its messages by one visibility timeout; a repeated ack finds none."""
        failures: list[str] = []
        for _ in self._urls:
            index = self._current
            node = Client(
                self._urls[index],
                token=self._client.token,
                tenant=self._client.tenant,
                timeout_s=self._client.timeout_s + extra_timeout_s,
                cacert=self._client.cacert,
            )
            try:
                return node.request(method, path, body, is_safe=True)
            except ClusterUnavailable as exc:
                failures.append(str(exc))
                self._move_on(index, exc)
        raise ClusterUnavailable("no schedd node answered: " + "; ".join(failures))

    def _move_on(self, index: int, exc: ClusterUnavailable) -> None:
        with self._lock:
            if self._current != index or len(self._urls) == 1:
                return
            self._current = (index + 1) % len(self._urls)
        self._log.line(f"node {self._urls[index]} failed ({exc}); switching to {self.current}")


class Worker:
    """Receives, runs, extends and settles messages until stopped (or after one batch)."""

    def __init__(self, settings: Settings, nodes: Nodes, log: Log) -> None:
        self._s = settings
        self._nodes = nodes
        self._log = log
        self._path = "/v1/queues/" + urllib.parse.quote(settings.queue, safe="")
        self._tasks: set[Task] = set()
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._done = threading.Event()
        self._grace_ends_s = float("inf")
        self._fatal: SchedError | None = None
        self._grace = format_duration(settings.grace_ms)

    def serve(self) -> None:
        """Run until SIGTERM/SIGINT (or one batch with --once); raise what stopped it early."""
        self._nodes.request("GET", "/v1/queues")  # no node at start: exit 3 before anything runs
        facts = f"queue={self._s.queue} concurrency={self._s.concurrency}"
        self._log.line(f"receiving {facts} node={self._nodes.current}")
        signals = (signal.SIGTERM, signal.SIGINT)
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in signals}
        poller = threading.Thread(target=self._poll_loop, name="poll", daemon=True)
        extender = threading.Thread(target=self._extend_loop, name="extend", daemon=True)
        try:
            poller.start()
            extender.start()
            while poller.is_alive() and not self._stopping.is_set():
                poller.join(TICK_S)
            self._drain()
        finally:
            self._done.set()
            for sig, handler in handlers.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if self._fatal is not None:
            raise self._fatal
        self._log.line("stopped")

    def _poll_loop(self) -> None:
        backoff_s = 1.0
        while not self._stopping.is_set():
            free = self._free_slots()
            if free == 0:
                continue
            try:
                messages = self._receive(free)
            except (ClusterUnavailable, QuotaExceeded) as exc:  # 429: the tenant's long polls
                if self._s.is_once:
                    self._fail(exc)
                    return
                self._log.line(f"{exc}; trying again in {backoff_s:g}s")
                self._stopping.wait(backoff_s)
                backoff_s = min(2 * backoff_s, RECONNECT_MAX_S)
                continue
            except Exception as exc:  # the top of a thread: stop cleanly, exit with its code
                self._fail(exc if isinstance(exc, SchedError) else SchedError(repr(exc)))
                return
            backoff_s = 1.0
            for message in messages:
                self._start(message)
            if self._s.is_once:
                return

    def _free_slots(self) -> int:
        with self._cond:
            while len(self._tasks) >= self._s.concurrency and not self._stopping.is_set():
                self._cond.wait(0.5)
            return 0 if self._stopping.is_set() else self._s.concurrency - len(self._tasks)

    def _receive(self, count: int) -> list[Message]:
        body: JSONValue = {
            "max": count,
            "wait": f"{self._s.wait_ms}ms",
            "visibility_timeout": f"{self._s.visibility_timeout_ms}ms",
        }
        extra_s = self._s.wait_ms / 1000
        path = self._path + "/receive"
        answer = self._nodes.request("POST", path, body, extra_timeout_s=extra_s)
        return read_answer(answer, Messages, request=f"POST {path}").view.messages

    def _start(self, message: Message) -> None:
        task = Task(message=message)
        with self._cond:
            self._tasks.add(task)
        threading.Thread(target=self._run, args=(task,), name=task.receipt, daemon=True).start()

    def _run(self, task: Task) -> None:
        self._log.line(f"started {task.facts} scheduled_at={task.message.scheduled_at}")
        try:
            error = self._execute(task)
        except Exception as exc:  # the top of a runner thread: the message is still nacked
            error = f"schedctl work could not run the command: {exc!r}"
        outcome = self._settle(task, error)
        self._report(task, outcome, error)
        with self._cond:
            self._tasks.discard(task)
            self._cond.notify_all()

    def _execute(self, task: Task) -> str | None:
        """Run the command to its end; the nack error, or None for success."""
        argv = self._argv(task)
        if isinstance(argv, str):
            return argv
        try:
            process = self._spawn(task, argv)
        except OSError as exc:
            return f"cannot start {argv[0]!r}: {exc.strerror or exc}"
        assert process.stdin is not None and process.stderr is not None
        payload = (json.dumps(task.message.payload, ensure_ascii=False) + "\n").encode()
        threading.Thread(target=_feed, args=(process.stdin, payload), daemon=True).start()
        relay = threading.Thread(target=self._relay, args=(task, process.stderr), daemon=True)
        relay.start()
        task.exit_code = self._wait(task, process)
        _signal_group(process.pid, signal.SIGKILL)  # the command's stragglers end with it
        relay.join(timeout=2.0)
        return _error(task)

    def _argv(self, task: Task) -> tuple[str, ...] | str:
        """The command line for this message, or why there is none (a nack error)."""
        if not self._s.is_shell:
            return self._s.argv
        payload = task.message.payload
        command = payload.get("command") if isinstance(payload, dict) else None
        if not isinstance(command, str) or not command.strip():
            return "--shell: the payload has no 'command' string"
        return ("/bin/sh", "-c", command)

    def _spawn(self, task: Task, argv: tuple[str, ...]) -> subprocess.Popen[bytes]:
        message = task.message
        env = {
            **os.environ,
            "SCHEDD_QUEUE": self._s.queue,
            "SCHEDD_JOB_ID": message.job_id,
            "SCHEDD_SCHEDULED_AT": message.scheduled_at,
            "SCHEDD_ATTEMPT": str(message.attempt),
            "SCHEDD_IDEMPOTENCY_KEY": message.idempotency_key,
        }
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=sys.stderr.fileno() if self._s.as_json else None,  # stdout stays JSON only
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, out of reach of the terminal's ^C
        )

    def _relay(self, task: Task, stream: IO[bytes]) -> None:
        with stream:
            for line in stream:
                self._log.relay(line)
                task.tail += line
                del task.tail[:-TAIL_BYTES]

    def _wait(self, task: Task, process: subprocess.Popen[bytes]) -> int:
        """Wait for the command; on timeout or shutdown SIGTERM its group, later SIGKILL."""
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
            if task.abort_reason is not None and term_sent_s is None:
                _signal_group(process.pid, signal.SIGTERM)
                term_sent_s = now
            elif term_sent_s is not None and now - term_sent_s >= KILL_AFTER_S:
                _signal_group(process.pid, signal.SIGKILL)

    def _settle(self, task: Task, error: str | None) -> str:
        """Ack (error None) or nack, retried across nodes; "acked", "nacked", "expired" or
        "unsettled" (then the message comes back after its visibility timeout)."""
        action, done = ("ack", "acked") if error is None else ("nack", "nacked")
        body: dict[str, JSONValue] = {"receipts": [task.receipt]}
        if error is not None:
            body["error"] = error[:4000]
        for delay_s in (*SETTLE_BACKOFF_S, None):
            try:
                answer = self._nodes.request("POST", f"{self._path}/{action}", body)
            except ClusterUnavailable as exc:
                if delay_s is None:
                    self._log.line(f"cannot {action} {task.facts}: {exc}")
                    return "unsettled"
                time.sleep(delay_s)
                continue
            except SchedError as exc:
                self._log.line(f"cannot {action} {task.facts}: {exc}")
                return "unsettled"
            return done if isinstance(answer, dict) and answer.get(done) else "expired"
        return "unsettled"

    def _report(self, task: Task, outcome: str, error: str | None) -> None:
        duration_s = time.monotonic() - task.started_s
        shown = _exit_text(task.exit_code)
        self._log.line(f"finished {task.facts} exit={shown} duration={duration_s:.2f}s {outcome}")
        if self._s.as_json:
            message = task.message
            result: dict[str, JSONValue] = {
                "job_id": message.job_id,
                "scheduled_at": message.scheduled_at,
                "attempt": message.attempt,
            }
            result |= {"exit_code": task.exit_code, "duration_s": round(duration_s, 3)}
            render.print_json(result | {"outcome": outcome, "error": error})

    def _extend_loop(self) -> None:
        timeout = f"{self._s.visibility_timeout_ms}ms"
        while not self._done.wait(self._s.visibility_timeout_ms / 3000):
            with self._cond:
                receipts: list[JSONValue] = [task.receipt for task in self._tasks]
            if not receipts:
                continue
            body: JSONValue = {"visibility_timeout": timeout, "receipts": receipts}
            try:
                self._nodes.request("POST", self._path + "/extend", body)
            except SchedError as exc:
                self._log.line(f"cannot extend {len(receipts)} message(s): {exc}")

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._stopping.is_set():
            self._log.line(f"{name} again: ending the grace period now")
            self._grace_ends_s = 0.0
            return
        self._stop()
        self._log.line(
            f"{name}: receiving no more; waiting up to {self._grace} for "
            f"{len(self._tasks)} running command(s)"
        )

    def _stop(self) -> None:
        self._grace_ends_s = time.monotonic() + self._s.grace_ms / 1000
        self._stopping.set()

    def _fail(self, exc: SchedError) -> None:
        self._fatal = exc
        self._log.line(f"stopping: {exc}")
        self._stop()

    def _drain(self) -> None:
        """Wait for running commands; past the grace period kill them (they are nacked)."""
        with self._cond:
            while self._tasks and time.monotonic() < self._grace_ends_s:
                self._cond.wait(TICK_S)
            late = list(self._tasks)
        if late:
            self._log.line(f"grace period over: killing {len(late)} running command(s)")
        for task in late:
            task.abort_reason = f"schedctl work stopped: the {self._grace} grace period passed"
        deadline_s = time.monotonic() + SETTLE_BUDGET_S
        with self._cond:
            while self._tasks and time.monotonic() < deadline_s:
                self._cond.wait(TICK_S)


def _feed(stream: IO[bytes], data: bytes) -> None:
    """Write the payload to the command's stdin; a command that never reads it is fine."""
    with contextlib.suppress(OSError), stream:
        stream.write(data)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pgid, sig)


def _exit_text(code: int | None) -> str:
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
        reason = f"killed by {_exit_text(code)}"
    else:
        reason = f"exit code {code}"
    tail = task.tail.decode("utf-8", errors="replace").strip()
    return f"{reason}\n{tail}" if tail else reason


def duration_option(
    flag: str, default: str | None, *, help: str, minimum_ms: int = 0, maximum_ms: int = 2**62
) -> Callable[[F], F]:
    """A DURATION option ("90s", "10m", "250ms" or seconds), passed as `<name>_ms` (int or None)."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
        if value is None:
            return None
        try:
            ms = parse_duration(value, field="", minimum_ms=minimum_ms)
        except InvalidRequest as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
        if ms > maximum_ms:
            message = f"must be at most {format_duration(maximum_ms)}, got {value!r}"
            raise click.BadParameter(message, ctx, param)
        return ms

    name = flag.removeprefix("--").replace("-", "_") + "_ms"
    return click.option(
        flag,
        name,
        default=default,
        show_default=default is not None,
        callback=convert,
        metavar="DURATION",
        help=help,
    )


@click.command(
    epilog="""\b
Examples:
  schedctl work digests -- ./send-digest.sh
  schedctl work digests --concurrency 4 --timeout 10m -- python -m app.digest
  schedctl work reports --once --wait 5s -- sh -c 'jq .report > "/tmp/$SCHEDD_JOB_ID.json"'
  schedctl work crontab --shell --concurrency 4

\b
CMD gets the payload as JSON on stdin and SCHEDD_JOB_ID, SCHEDD_SCHEDULED_AT, SCHEDD_ATTEMPT,
SCHEDD_IDEMPOTENCY_KEY and SCHEDD_QUEUE in its environment. Exit 0 acks the message; anything
else nacks it with the end of CMD's stderr, and the job's retry policy decides what follows.""",
)
@click.argument("queue")
@click.argument("argv", nargs=-1, metavar="-- CMD [ARGS]...")
@click.option(
    "--shell",
    "is_shell",
    is_flag=True,
    help="Instead of CMD, run each message's payload.command with /bin/sh -c "
    "(the jobs `schedctl import-crontab` makes).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    metavar="N",
    help="Run up to N commands at once.",
)
@duration_option(
    "--timeout",
    None,
    minimum_ms=1,
    help="Kill a command's whole process group after DURATION (the request timeout goes "
    "before the verb: schedctl --timeout SECONDS work ...).",
)
@duration_option(
    "--visibility-timeout",
    "30s",
    minimum_ms=1_000,
    maximum_ms=MAX_VISIBILITY_MS,
    help="Hide a received message this long; extended every third of it while CMD runs.",
)
@duration_option(
    "--wait", "20s", maximum_ms=MAX_WAIT_MS, help="Long-poll each receive up to DURATION."
)
@duration_option(
    "--grace", "30s", help="On SIGTERM or SIGINT, wait DURATION for running commands, then kill."
)
@click.option("--once", "is_once", is_flag=True, help="Process at most one batch, then exit.")
@json_option("one JSON object per finished message on stdout (CMD's stdout goes to stderr)")
@click.pass_obj
def work(client: Client, /, queue: str, argv: tuple[str, ...], **options: Any) -> None:
    """Run CMD for each message of QUEUE: ack it on exit 0, nack it otherwise."""
    if not QUEUE_NAME.fullmatch(queue):
        raise InvalidRequest("QUEUE", f"must match [A-Za-z0-9_.-]{{1,128}}, got {queue!r}")
    if options["is_shell"] and argv:
        raise InvalidRequest("CMD", "give either --shell or a command, not both")
    if not options["is_shell"] and not argv:
        raise InvalidRequest("CMD", "missing: schedctl work QUEUE -- CMD [ARGS]... (or --shell)")
    if argv and shutil.which(argv[0]) is None:
        raise InvalidRequest("CMD", f"{argv[0]!r} is not an executable file or on PATH")
    log = Log()
    Worker(Settings(queue=queue, argv=argv, **options), Nodes(client, log), log).serve()
