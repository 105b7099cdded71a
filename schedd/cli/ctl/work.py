"""`schedctl work`: a competing consumer that runs a command for each message of one queue.

The receiving, extending, failover and draining are schedd.worker's (the one receive loop of the
project); the handler is processes.py's (shell.py decides what --shell runs, as whom); this
module is the command line, the log lines and the --json results. It never touches the store,
raft or the node.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any, TypeVar

import click

from schedd.cli.ctl import render
from schedd.cli.ctl.client import Client, parse_urls
from schedd.cli.ctl.processes import KILL_AFTER_S, Commands, Log, Settings, exit_text
from schedd.cli.ctl.render import json_option
from schedd.errors import (
    ClusterUnavailable,
    InvalidRequest,
    QuotaExceeded,
    SchedError,
    Unauthorized,
    error_of_answer,
)
from schedd.jsonbody import JSONValue
from schedd.timeformat import format_duration, parse_duration
from schedd.worker import (
    Busy,
    Events,
    Message,
    Outcome,
    Refused,
    Unavailable,
    Worker,
    WorkerError,
)
from schedd.worker.protocol import MAX_RECEIVE, MAX_VISIBILITY_S, MAX_WAIT_S
from schedd.worker.settings import QUEUE_NAME

MAX_WAIT_MS = int(MAX_WAIT_S * 1000)  # the server's longest long poll
MAX_VISIBILITY_MS = int(MAX_VISIBILITY_S * 1000)
STOP_WAIT_S = KILL_AFTER_S + 2.0  # past the grace period: the commands are killed, then nacked
F = TypeVar("F", bound=Callable[..., Any])


class WorkLog(Events):
    """schedd.worker's events as `schedctl work` tells them: a line on stderr each, and with
    --json one JSON object per finished message on stdout."""

    def __init__(self, settings: Settings, log: Log, commands: Commands) -> None:
        self._s = settings
        self._log = log
        self._commands = commands

    def receiving(self, queue: str, concurrency: int, node: str) -> None:
        self._log.line(f"receiving queue={queue} concurrency={concurrency} node={node}")

    def cells(self, nodes: dict[str, str], revision: int) -> None:
        shown = " ".join(f"{cell}={node}" for cell, node in nodes.items())
        self._log.line(f"receiving from {len(nodes)} cells revision={revision} {shown}")

    def switched(self, failed: str, reason: str, node: str) -> None:
        self._log.line(f"node {failed} failed ({reason}); switching to {node}")

    def receive_failed(self, reason: str, retry_in_s: float) -> None:
        self._log.line(f"{reason}; trying again in {retry_in_s:g}s")

    def started(self, message: Message) -> None:
        self._log.line(f"started {message.facts} scheduled_at={message.scheduled_at}")

    def settled(
        self, message: Message, outcome: Outcome, error: str | None, duration_s: float
    ) -> None:
        exit_code = self._commands.exit_code(message)
        shown = exit_text(exit_code)
        facts = f"{message.facts} exit={shown} duration={duration_s:.2f}s"
        self._log.line(f"finished {facts} {outcome}")
        if self._s.as_json:
            result: dict[str, JSONValue] = {
                "job_id": message.job_id,
                "scheduled_at": message.scheduled_at,
                "attempt": message.attempt,
            }
            result |= {"exit_code": exit_code, "duration_s": round(duration_s, 3)}
            render.print_json(result | {"outcome": str(outcome), "error": error})

    def settle_failed(self, message: Message, action: str, reason: str) -> None:
        self._log.line(f"cannot {action} {message.facts}: {reason}")

    def extend_failed(self, count: int, reason: str) -> None:
        self._log.line(f"cannot extend {count} message(s): {reason}")

    def stopping(self, reason: str, running: int, grace_s: float) -> None:
        grace = format_duration(self._s.grace_ms)
        self._log.line(
            f"{reason}: receiving no more; waiting up to {grace} for {running} running command(s)"
        )

    def grace_cut(self, reason: str) -> None:
        self._log.line(f"{reason} again: ending the grace period now")

    def grace_over(self, running: int) -> None:
        self._log.line(f"grace period over: killing {running} running command(s)")

    def failed(self, error: Exception) -> None:
        self._log.line(f"stopping: {error}")

    def stopped(self) -> None:
        self._log.line("stopped")


def consume(client: Client, settings: Settings) -> None:
    """Run the worker until it stops (after one batch with --once); raise a SchedError for what
    stopped it early (its exit code: 3 no node, 4 token refused, 1 otherwise)."""
    log = Log()
    urls = parse_urls(client.url)
    worker = Worker(
        urls,
        client.token,
        settings.queue,
        concurrency=settings.concurrency,
        visibility_timeout_s=settings.visibility_timeout_ms / 1000,
        wait_s=settings.wait_ms / 1000,
        grace_s=settings.grace_ms / 1000,
        stop_wait_s=STOP_WAIT_S,
        request_timeout_s=client.timeout_s,
        headers={} if client.tenant is None else {"X-Tenant": client.tenant},
        ssl_context=next((client.tls_for(url) for url in urls if url.startswith("https:")), None),
    )
    commands = Commands(settings, log, worker.grace_over)
    worker.events = WorkLog(settings, log, commands)
    worker.handler(commands)
    try:
        if settings.is_once:
            worker.run_batch()
        else:
            worker.run()
    except WorkerError as exc:
        raise _sched_error(exc, client) from None


def _sched_error(exc: WorkerError, client: Client) -> SchedError:
    """The schedctl error (and so the exit code) of what stopped the worker."""
    if isinstance(exc, Unavailable):
        if "the TLS certificate" not in str(exc):
            return ClusterUnavailable(str(exc))
        ca = "give the CA certificate that signed it with --cacert FILE or SCHEDCTL_CACERT"
        return ClusterUnavailable(f"{exc}; {ca}")
    if isinstance(exc, Busy):
        return QuotaExceeded(str(exc))
    if not isinstance(exc, Refused):
        return SchedError(str(exc))
    error = error_of_answer(exc.status, exc.code, exc.detail)
    if isinstance(error, Unauthorized) and not client.token:
        error.args = (f"{error}: give a token with --token or SCHEDCTL_TOKEN",)
    elif isinstance(error, Unauthorized):
        error.args = (f"{error} (the token from {client.token_source})",)
    return error


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
SCHEDD_IDEMPOTENCY_KEY and SCHEDD_QUEUE in its environment (and work's own, without its
SCHEDCTL_* variables). Exit 0 acks the message; anything else nacks it with the end of CMD's
stderr, and the job's retry policy decides what follows. What CMD prints (stdout and stderr,
its first and last 4,096 characters) is kept with the attempt: schedctl runs JOB_ID --output.

\b
With --shell, whoever holds the tenant's token can run any command as the allowed users on this
host: give each host a tenant or a queue of its own.""",
)
@click.argument("queue")
@click.argument("argv", nargs=-1, metavar="-- CMD [ARGS]...")
@click.option(
    "--shell",
    "is_shell",
    is_flag=True,
    help="Instead of CMD, run each message's payload.command as cron would (the jobs "
    "`schedctl import-crontab` makes): with $SHELL -c as the payload's user (when root; "
    "refused otherwise), in cron's environment, the % text on stdin.",
)
@click.option(
    "--allow-user",
    "allowed_users",
    multiple=True,
    metavar="NAME",
    help="With --shell, run lines as NAME (repeat it; '*': any user of this machine); a line "
    "for another user is nacked, not run. Required as root.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_RECEIVE),
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
    if options["allowed_users"] and not options["is_shell"]:
        raise click.UsageError("--allow-user is for --shell")
    if options["is_shell"] and not options["allowed_users"] and os.geteuid() == 0:
        raise click.UsageError(
            "--shell as root needs --allow-user NAME (or '*'): whoever holds the tenant's token "
            "can run commands as the users it allows, root included"
        )
    if argv and shutil.which(argv[0]) is None:
        raise InvalidRequest("CMD", f"{argv[0]!r} is not an executable file or on PATH")
    consume(client, Settings(queue=queue, argv=argv, **options))
