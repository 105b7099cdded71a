"""`schedctl apply -f FILE` (make the tenant's jobs match a job file, or show the plan) and
`schedctl export` (write the jobs as such a file). docs/schedules-as-code.md is their guide.
"""

from __future__ import annotations

import json
import sys

import click
from rich.text import Text

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import UnreadableAnswer
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.jobfile import job_table, label_pair, read_job_file, write_job_file
from schedd.cli.ctl.plan import Action, Plan, Step, apply_plan, live_jobs, make_plan, text_of
from schedd.cli.ctl.render import json_option
from schedd.errors import SchedError
from schedd.jsonbody import JSONObject, JSONValue
from schedd.wire.jobs import SET_LABEL

DRIFT_EXIT = 2  # --dry-run --exit-code: the plan is not empty
_MARKS = {
    Action.CREATE: ("+", "green"),
    Action.UPDATE: ("~", "yellow"),
    Action.UNCHANGED: ("=", "dim"),
    Action.DELETE: ("-", "red"),
}
_DONE = {
    Action.CREATE: "created",
    Action.UPDATE: "updated",
    Action.UNCHANGED: "unchanged",
    Action.DELETE: "deleted",
}
MAX_VALUE_CHARS = 200  # a changed value longer than this is cut in the plan (not in --json)


@click.command(
    epilog="""\b
Examples:
  schedctl apply -f jobs.toml --dry-run
  schedctl apply -f jobs.toml
  schedctl apply -f jobs.toml --prune    # and delete the set's jobs not named
  schedctl apply -f jobs.toml --prune --dry-run --exit-code    # CI: 2 on drift
  schedctl export --label team=payments | schedctl apply -f - --dry-run

\b
Exit codes: 0 applied (or, with --dry-run, planned); 1 an invalid file, or a job
the API refuses (nothing applied); 2 with --dry-run --exit-code, the plan is not
empty; 3 cluster unavailable; 4 token.""",
)
@click.option(
    "-f",
    "--file",
    "source",
    required=True,
    metavar="FILE|-",
    help="The job file (TOML: an optional set = NAME, one [[job]] per job), - for stdin.",
)
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--prune",
    is_flag=True,
    help="Also delete the live jobs labelled with the file's set that it no longer names.",
)
@click.option(
    "--exit-code",
    "has_exit_code",
    is_flag=True,
    help="With --dry-run: exit 2 when the plan is not empty, 0 when it is.",
)
@json_option('{"file", "set", "dry_run", "prune", "steps": [...], "counts"}')
@click.pass_obj
def apply(
    client: Client, source: str, dry_run: bool, prune: bool, has_exit_code: bool, as_json: bool
) -> None:
    """Make the jobs match FILE: create, update (by key) and with --prune delete.

    Every job is checked (by the API too) before anything changes; applying the same
    file again changes nothing."""
    if has_exit_code and not dry_run:
        raise click.UsageError("--exit-code applies to --dry-run only")
    plan = make_plan(client, read_job_file(source), prune=prune)
    if dry_run:
        show_plan(plan, as_json=as_json, dry_run=True)
        if has_exit_code and not plan.is_empty:
            sys.exit(DRIFT_EXIT)
        return
    done: list[Step] = []

    def on_step(step: Step) -> None:
        done.append(step)
        if not as_json:
            for line in step_lines(step):
                render.console().print(line)

    try:
        apply_plan(client, plan, on_step=on_step)
    except SchedError:
        if as_json:
            render.print_json(plan_json(plan, done, dry_run=False))
        else:
            render.note(f"stopped after {len(done)} of {len(plan.steps)} jobs: apply again")
        raise
    if as_json:
        render.print_json(plan_json(plan, done, dry_run=False))
    else:
        render.console().print(Text(summary(plan, done, dry_run=False)))


def show_plan(plan: Plan, *, as_json: bool, dry_run: bool) -> None:
    if as_json:
        render.print_json(plan_json(plan, plan.steps, dry_run=dry_run))
        return
    for step in plan.steps:
        for line in step_lines(step):
            render.console().print(line)
    render.console().print(Text(summary(plan, plan.steps, dry_run=dry_run)))


def plan_json(plan: Plan, steps: list[Step], *, dry_run: bool) -> JSONObject:
    counts = {action.value: sum(s.action is action for s in steps) for action in Action}
    return {
        "file": plan.file.name,
        "set": plan.file.set,
        "dry_run": dry_run,
        "prune": plan.is_pruning,
        "steps": [step.as_json() for step in steps],
        "counts": dict(counts),
    }


def step_lines(step: Step) -> list[Text]:
    """A step's line (`+ create  KEY`, done: `+ created  KEY (job_...)`) and, for an update,
    one line per changed field: `FIELD: CURRENT -> PROPOSED` in compact JSON."""
    mark, style = _MARKS[step.action]
    verb = _DONE[step.action] if step.is_done else step.action.value
    who = step.key or step.job_id or "?"
    if step.key and step.job_id:
        who += f" ({step.job_id})"
    if step.key is None and step.name:
        who += f" {json.dumps(step.name, ensure_ascii=False)}"
    lines = [Text(f"{mark} {verb:<9} {who}", style=style)]
    if step.proposed is not None and not step.is_done:
        lines.append(Text(f"    {_what(step.proposed)}"))
    lines.extend(
        Text(f"    {c.field}: {_shown(c.current)} -> {_shown(c.proposed)}") for c in step.changes
    )
    return lines


def _what(spec: JSONObject) -> str:
    """A new job in one line: its schedule and its target."""
    schedule, target = spec.get("schedule"), spec.get("target")
    if not isinstance(schedule, dict) or not isinstance(target, dict):
        return ""
    shown = {k: v for k, v in schedule.items() if isinstance(v, str) or k == "after"}
    return f"{render.describe_schedule(shown)} -> {render.describe_target(target)}"


def summary(plan: Plan, steps: list[Step], *, dry_run: bool) -> str:
    counts = {action: sum(s.action is action for s in steps) for action in Action}
    where = plan.file.name + (f", set {plan.file.set}" if plan.file.set else "")
    if not steps:
        return f"No jobs in {where}: nothing to do."
    if dry_run:
        todo = [
            f"{counts[action]} to {action.value}"
            for action in (Action.CREATE, Action.UPDATE, Action.DELETE)
            if counts[action]
        ]
        unchanged = [f"{counts[Action.UNCHANGED]} unchanged"] if counts[Action.UNCHANGED] else []
        plan_text = ", ".join([*todo, *unchanged])
        return f"Plan for {where}: {plan_text}. Dry run: nothing changed."
    order = (Action.CREATE, Action.UPDATE, Action.DELETE, Action.UNCHANGED)
    done = ", ".join(f"{counts[action]} {_DONE[action]}" for action in order if counts[action])
    return f"Applied {where}: {done}."


def _shown(value: JSONValue) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


# ---------------------------------------------------------------- export


@click.command(
    epilog="""\b
Examples:
  schedctl export > jobs.toml
  schedctl export --label schedd.set=payments-prod > payments.toml
  schedctl export --label team=payments --label env=prod

\b
Writes the active and paused jobs that have a key (cancelled and completed ones
are history; one without a key is named on stderr and left out), sorted by key.
When every job written carries the same schedd.set label, the file says
set = NAME instead. A payload holding a JSON null is written as payload_json.""",
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="NAME=VALUE",
    help="Only jobs with this label; repeat for more (a job must have them all).",
)
@click.pass_obj
def export(client: Client, labels: tuple[str, ...]) -> None:
    """Write the tenant's jobs as a job file (TOML) on stdout, for `schedctl apply -f`."""
    wanted = dict(label_pair(text) for text in labels)
    jobs = [
        job
        for job in live_jobs(client, [f"{name}={value}" for name, value in wanted.items()])
        if _has_labels(job, wanted)
    ]
    keyless = [job for job in jobs if not text_of(job, "key")]
    if keyless:
        names = ", ".join(_described(job) for job in keyless)
        render.note(f"left out {len(keyless)} job(s) without a key: {names}")
    keyed = sorted((job for job in jobs if text_of(job, "key")), key=lambda j: str(j["key"]))
    set_name = _common_set(keyed)
    keys = {str(job["job_id"]): str(job["key"]) for job in keyed}  # an after names these by key
    tables = [job_table(job, set_name=set_name, keys=keys) for job in keyed]
    filters = "".join(f" --label {text}" for text in labels)
    header = (
        f"schedctl export{filters}: {len(tables)} job(s)\n"
        "Check with: schedctl apply -f FILE --dry-run"
    )
    try:
        text = write_job_file(tables, set_name=set_name, header=header)
    except (TypeError, ValueError) as exc:  # a null in a list of a spec field, say
        raise UnreadableAnswer(f"a job the node listed cannot be written as TOML: {exc}") from None
    click.echo(text, nl=False)


def _has_labels(job: JSONObject, wanted: dict[str, str]) -> bool:
    labels = job.get("labels")
    has = labels if isinstance(labels, dict) else {}
    return all(has.get(name) == value for name, value in wanted.items())


def _common_set(jobs: list[JSONObject]) -> str | None:
    """The set every job carries (then the file says `set = NAME`), or None: with jobs of
    several sets (or none) each keeps its own label, and a note says how to export one set."""
    sets = {_set_label(job) for job in jobs}
    if len(sets) == 1:
        return sets.pop()
    named = sorted(s for s in sets if s is not None)
    if named:
        render.note(
            f"the jobs belong to several sets ({', '.join(named)}"
            f"{', and none' if None in sets else ''}): no top-level set written; to manage one "
            f"with --prune, export it alone: --label {SET_LABEL}=NAME"
        )
    return None


def _set_label(job: JSONObject) -> str | None:
    labels = job.get("labels")
    found = labels.get(SET_LABEL) if isinstance(labels, dict) else None
    return found if isinstance(found, str) else None


def _described(job: JSONObject) -> str:
    name = text_of(job, "name")
    return f"{job.get('job_id')}" + (f" ({name})" if name else "")


COMMANDS = (apply, export)
