"""The console's scenarios in chromium on three real nodes: sign in, jobs, a job's actions,
tenant isolation, an XSS name, dead letters redriven, the overview's charts."""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.browser.conftest import Console, new_tenant
from tests.servers import ADMIN_TOKEN, NodeProcess, free_ports, http, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
XSS = "<img src=x onerror=alert(1)>"


def create_job(node: NodeProcess, token: str, **fields: Any) -> dict[str, Any]:
    body = {
        "schedule": {"every": "1h"},
        "target": {"type": "queue", "name": "work"},
        **fields,
    }
    status, job, _ = http("POST", f"{node.url}/v1/jobs", body, token=token)
    assert status == 201, job
    return job


def test_a_tenant_signs_in_sees_its_job_pauses_resumes_and_triggers_it(console: Console) -> None:
    tenant = new_tenant(console.node, f"acme-{uuid.uuid4().hex[:6]}")
    name = f"nightly-report-{uuid.uuid4().hex[:6]}"
    job = create_job(console.node, tenant["token"], name=name)
    console.open()
    console.shot("signin")
    console.sign_in(tenant["token"])
    page = console.page
    page.wait_for_selector(f"#jobs tr[data-job='{job['job_id']}']")
    assert page.evaluate("() => Object.keys(sessionStorage)").count("schedd.token") == 1
    assert tenant["token"] not in page.url
    console.shot("jobs")

    page.click(f"tr[data-job='{job['job_id']}'] a.job-name")
    page.wait_for_selector("#upcoming-table tbody tr")
    assert page.text_content("#job-title") == name
    assert page.locator("#upcoming-table tbody tr").count() == 10
    console.shot("job")

    page.click("[data-action=pause]")
    page.wait_for_selector("dialog.confirm")
    console.shot("confirm")
    console.confirm()
    page.wait_for_function("() => document.querySelector('#job-status')?.textContent === 'paused'")
    page.click("[data-action=resume]")
    console.confirm()
    page.wait_for_function("() => document.querySelector('#job-status')?.textContent === 'active'")

    page.click("[data-action=trigger]")
    console.confirm()
    page.wait_for_selector("#runs-table tr[data-run]", timeout=30_000)
    actions = page.locator("#audit-table td.action").all_text_contents()
    assert actions == ["create_jobs", "pause_job", "resume_job", "trigger_job"], actions
    console.shot("job-run")
    status, answer, _ = http(
        "GET", f"{console.node.url}/v1/jobs/{job['job_id']}/runs", token=tenant["token"]
    )
    assert status == 200 and answer["runs"], answer


def test_a_tenant_cannot_open_another_tenants_job_by_url(console: Console) -> None:
    owner = new_tenant(console.node, f"owner-{uuid.uuid4().hex[:6]}")
    other = new_tenant(console.node, f"other-{uuid.uuid4().hex[:6]}")
    job = create_job(console.node, owner["token"], name="private")
    console.sign_in(other["token"])
    console.go(f"#/jobs/{job['job_id']}")
    console.page.wait_for_selector("text=No such job.")
    assert "private" not in console.page.text_content("main")


def test_a_job_named_with_markup_renders_as_text(console: Console) -> None:
    tenant = new_tenant(console.node, f"xss-{uuid.uuid4().hex[:6]}")
    job = create_job(console.node, tenant["token"], name=XSS)
    console.sign_in(tenant["token"])
    page = console.page
    page.wait_for_selector(f"tr[data-job='{job['job_id']}']")
    assert page.text_content(f"tr[data-job='{job['job_id']}'] a.job-name") == XSS
    page.click(f"tr[data-job='{job['job_id']}'] a.job-name")
    page.wait_for_selector("#job-title")
    assert page.text_content("#job-title") == XSS
    assert page.locator("main img").count() == 0
    console.shot("xss")


def test_a_failing_http_job_reaches_dead_letters_and_is_redriven(console: Console) -> None:
    tenant = new_tenant(console.node, f"hooks-{uuid.uuid4().hex[:6]}")
    (closed_port,) = free_ports(1)  # nothing listens: every call fails at once
    job = create_job(
        console.node,
        tenant["token"],
        name="failing-hook",
        schedule={"delay": "1s"},
        target={"type": "http", "url": f"http://127.0.0.1:{closed_port}/hook"},
        retry={"max_attempts": 1},
    )
    url = f"{console.node.url}/v1/deadletters"
    dead = wait_for(
        lambda: http("GET", url, token=tenant["token"])[1]["deadletters"], 60, "a dead letter"
    )
    console.sign_in(tenant["token"])
    console.go("#/deadletters")
    page = console.page
    row = f"tr[data-deadletter='{dead[0]['id']}']"
    page.wait_for_selector(row)
    console.shot("deadletters")
    page.check(f"{row} input[type=checkbox]")
    page.click("[data-action=redrive-selected]")
    console.confirm()
    page.wait_for_selector("text=Redriven: 1.")

    def attempts() -> int | None:
        runs = http(
            "GET", f"{console.node.url}/v1/jobs/{job['job_id']}/runs", token=tenant["token"]
        )[1]
        count = len(runs["runs"][0]["attempts"]) if runs["runs"] else 0
        return count if count >= 2 else None

    wait_for(attempts, 60, "the redriven run's second attempt")
    fresh = wait_for(
        lambda: http("GET", url, token=tenant["token"])[1]["deadletters"], 60, "dead again"
    )
    console.go(f"#/deadletters/{fresh[0]['id']}")
    page.wait_for_selector("#dead-run ol.attempts li")
    console.shot("deadletter")
    page.click("[data-action=delete]")
    console.confirm()
    page.wait_for_selector("text=Delete: done.")
    assert http("GET", url, token=tenant["token"])[1]["deadletters"] == []


def test_the_overview_shows_the_nodes_and_a_spike_draining(console: Console) -> None:
    tenant = new_tenant(console.node, f"spike-{uuid.uuid4().hex[:6]}")
    fire_s = int(time.time()) + 3
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fire_s))
    jobs = [{"schedule": {"run_at": at}, "target": {"type": "queue", "name": "spike"}}] * 1000
    for _ in range(3):
        status, answer, _ = http(
            "POST", f"{console.node.url}/v1/jobs:batch", {"jobs": jobs}, token=tenant["token"]
        )
        assert status == 200 and all("job_id" in r for r in answer["results"]), answer
    console.sign_in(ADMIN_TOKEN)
    page = console.page
    page.wait_for_selector("#nodes-table tr[data-node='n3']")
    assert page.locator("#nodes-table tbody tr").count() == 3

    def drained() -> float | None:
        """The spike's peak claims/s on a node, once every node's latest sample is quiet
        again and nothing is left due."""
        reports = http("GET", f"{console.node.url}/v1/stats?scope=cluster")[1]["nodes"]
        latest = [r["samples"][-1] for r in reports if r.get("samples")]
        since = [
            s["claims_per_s"]
            for r in reports
            for s in r.get("samples", [])
            if datetime.fromisoformat(s["at"]).timestamp() > fire_s
        ]
        peak = max(since, default=0)
        quiet = all(s["claims_per_s"] < peak / 4 and s["backlog"] == 0 for s in latest)
        return peak if len(latest) == 3 and peak >= 50 and quiet else None

    receive = f"{console.node.url}/v1/queues/spike/receive"
    for _ in range(5):  # deliveries through this node: the second chart's queue line
        http("POST", receive, {"max": 100, "wait": "5s"}, token=tenant["token"])
    peak = wait_for(drained, 60, "a claims spike on the nodes, then quiet samples")
    # One of the page's next refreshes (every 5 s) draws the spike, its fall (the latest
    # claims/s under an eighth of the scale) and no backlog.
    drawn = """() => {
      const top = document.querySelector("[data-chart=claims] text.axis:nth-of-type(3)");
      const backlog = document.querySelector("[data-chart=backlog] .latest")?.textContent;
      const claims = document.querySelector("[data-chart=claims] .latest")?.textContent ?? "";
      const now = parseFloat(claims.split(" ").pop());
      const label = top?.textContent ?? "0";
      const value = label.endsWith("k") ? parseFloat(label) * 1000 : parseFloat(label);
      return backlog === "runs due, not claimed 0" && now < value / 8 ? value : null;
    }"""
    try:
        page.wait_for_function(f"() => ({drawn})() !== null", timeout=20_000)
    except Exception as exc:
        raise AssertionError(page.text_content("main")) from exc
    top = page.evaluate(drawn)
    assert top >= peak, (top, peak)  # the claims chart's scale holds the spike's peak
    # every node's own figures (through the cluster stats), not only the serving node's
    nodes = page.locator("#nodes-table tbody tr")
    terms = [nodes.nth(i).locator("td").nth(2).text_content() for i in range(3)]
    assert all(t and t.isdigit() for t in terms), terms
    # Beside them, the next 24 hours (read once a minute, and on opening the page): 7 runs in
    # one 15-minute step 20 hours ahead are at least its peak.
    ahead = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(time.time()) + 20 * 3600))
    later = [{"schedule": {"run_at": ahead}, "target": {"type": "queue", "name": "later"}}] * 7
    status, answer, _ = http(
        "POST", f"{console.node.url}/v1/jobs:batch", {"jobs": later}, token=tenant["token"]
    )
    assert status == 200, answer
    forecast = f"{console.node.url}/v1/forecast?step=15m"
    wait_for(lambda: http("GET", forecast)[1]["peak"]["runs"] >= 7, 10, "the runs ahead")
    page.reload()
    caption = page.locator("[data-chart=forecast] .latest")
    caption.wait_for()
    found = re.fullmatch(r"peak (\d+) at \S+Z", caption.text_content() or "")
    assert found and int(found.group(1)) >= 7, caption.text_content()
    assert page.locator("[data-chart=forecast] text.axis", has_text="+24 h").count() == 1
    console.shot("overview")


def test_the_admin_creates_a_tenant_sees_its_token_once_changes_its_quota_and_rotates(
    console: Console,
) -> None:
    console.sign_in(ADMIN_TOKEN)
    console.go("#/tenants")
    page = console.page
    page.wait_for_selector("form#create-tenant", state="attached")
    page.click("details.create summary")
    name = f"console-made-{uuid.uuid4().hex[:6]}"
    page.fill("#create-tenant [name=name]", name)
    page.fill("#create-tenant [name=max_active_jobs]", "")  # the API names the field
    page.click("#create-tenant button[type=submit]")
    page.wait_for_selector("#create-tenant .notice.error:has-text('max_active_jobs')")
    page.fill("#create-tenant [name=max_active_jobs]", "250")
    page.fill("#create-tenant [name=allowed_hosts]", "*.acme.example\nhooks.acme.example")
    page.click("#create-tenant button[type=submit]")
    page.wait_for_selector("section.credentials [data-secret=token]")
    token = page.input_value("section.credentials [data-secret=token]")
    tenant_id = page.input_value("section.credentials [data-secret=tenant_id]")
    assert token.startswith("sk_")
    assert page.input_value("section.credentials [data-secret=signing_secret]").startswith("whsec_")
    stored = page.evaluate("() => JSON.stringify([sessionStorage, localStorage, document.cookie])")
    assert token not in stored and token not in page.url
    page.wait_for_selector(f"#tenants tr[data-tenant='{tenant_id}']")  # the list is re-read
    console.shot("tenant-created")
    assert http("GET", f"{console.node.url}/v1/jobs", token=token)[0] == 200

    page.reload()  # shown once: gone after the page is left
    page.wait_for_selector(f"#tenants tr[data-tenant='{tenant_id}']")
    assert token not in (page.text_content("main") or "")
    assert page.locator("section.credentials").count() == 0
    row = page.text_content(f"#tenants tr[data-tenant='{tenant_id}']") or ""
    assert "0 / 250" in row and "hooks.acme.example" in row
    console.shot("tenants")

    page.click(f"#tenants tr[data-tenant='{tenant_id}'] a.tenant-name")
    page.wait_for_selector("form#edit-tenant")
    page.fill("#edit-tenant [name=dispatch_rate]", "40")
    page.click("#edit-tenant button[type=submit]")
    console.confirm()
    page.wait_for_selector("text=Saved.")
    answer = http("GET", f"{console.node.url}/v1/tenants/{tenant_id}", token=ADMIN_TOKEN)[1]
    assert (answer["dispatch_rate"], answer["max_active_jobs"]) == (40, 250)
    console.shot("tenant")

    page.click("[data-action=rotate]")
    console.confirm()
    page.wait_for_selector("section.credentials [data-secret=token]")
    rotated = page.input_value("section.credentials [data-secret=token]")
    assert rotated != token
    assert http("GET", f"{console.node.url}/v1/jobs", token=rotated)[0] == 200
    assert http("GET", f"{console.node.url}/v1/jobs", token=token)[0] == 401


def test_the_jobs_list_filters_by_target_host_name_and_next_run(console: Console) -> None:
    tenant = new_tenant(console.node, f"filters-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]

    def days(n: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + n * 86400))

    soon, later = days(3), days(5)
    hook = {"type": "http", "url": "https://hooks.example.com/in"}
    made = {
        "billing-queue": create_job(console.node, token, name="billing-queue"),
        "billing-hook": create_job(console.node, token, name="Billing-Hook", target=hook),
        "other-hook": create_job(
            console.node, token, name="other-hook", target=hook, schedule={"run_at": later}
        ),
        "soon": create_job(console.node, token, name="soon", schedule={"run_at": soon}),
    }
    console.sign_in(token)
    page = console.page
    page.wait_for_selector("#jobs tr[data-job]")

    def shown() -> set[str]:
        page.wait_for_selector("#jobs, main .notice")
        return set(page.locator("#jobs a.job-name").all_text_contents())

    page.select_option("#filter-target_type", "http")
    page.fill("#filter-name", "billing")
    page.click("#job-filters button[type=submit]")
    page.wait_for_function("() => location.hash.includes('target_type=http')")
    page.wait_for_function("() => document.querySelectorAll('#jobs tr[data-job]').length === 1")
    assert shown() == {"Billing-Hook"}
    console.shot("jobs-filtered")

    console.go("#/jobs?host=HOOKS.example.com")
    page.wait_for_function("() => document.querySelectorAll('#jobs tr[data-job]').length === 2")
    assert shown() == {"Billing-Hook", "other-hook"}
    console.go("#/jobs?queue=work")
    page.wait_for_function("() => document.querySelectorAll('#jobs tr[data-job]').length === 2")
    assert shown() == {"billing-queue", "soon"}
    console.go(f"#/jobs?next_run_after={days(2)}&next_run_before={days(4)}")
    page.wait_for_selector(f"#jobs tr[data-job='{made['soon']['job_id']}']")
    assert shown() == {"soon"}  # the hourly jobs run within the hour, other-hook in 5 days
    console.go("#/jobs?name=no-such-name")
    page.wait_for_selector("text=No job matches.")


def test_queues_show_the_oldest_message_and_consumers_seen_on_any_node(
    console: Console, cluster: list[NodeProcess]
) -> None:
    tenant = new_tenant(console.node, f"queues-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    for _ in range(2):
        create_job(
            console.node, token, schedule={"delay": "1s"}, target={"type": "queue", "name": "mail"}
        )
    messages = f"{console.node.url}/v1/queues"
    wait_for(
        lambda: [q for q in http("GET", messages, token=token)[1]["queues"] if q["ready"] == 2],
        60,
        "two ready messages",
    )
    receive = f"{cluster[1].url}/v1/queues/mail/receive"  # another node than the console's
    status, got, _ = http("POST", receive, {"max": 1, "consumer": "mailer-7"}, token=token)
    assert status == 200 and len(got["messages"]) == 1, got
    console.sign_in(token)
    console.go("#/queues")
    page = console.page
    row = "#queues tr[data-queue='mail']"
    page.wait_for_selector(f"{row} td.consumers li")
    assert "mailer-7" in (page.text_content(f"{row} td.consumers") or "")
    assert "n2" in (page.text_content(f"{row} td.consumers") or "")
    assert page.text_content(f"{row} td.oldest") not in ("", "—")
    console.shot("queues")


def test_a_rare_match_beyond_the_first_stretch_is_found_by_asking_on(console: Console) -> None:
    tenant = new_tenant(console.node, f"many-{uuid.uuid4().hex[:6]}")
    far = {"run_at": "2031-01-01T00:00:00Z"}
    bulk = [{"schedule": far, "target": {"type": "queue", "name": "bulk"}}] * 1000
    for _ in range(11):  # more than one server-side stretch (10,000 jobs at most)
        status, answer, _ = http(
            "POST", f"{console.node.url}/v1/jobs:batch", {"jobs": bulk}, token=tenant["token"]
        )
        assert status == 200 and all("job_id" in r for r in answer["results"]), answer
    needle = create_job(console.node, tenant["token"], name="the-needle", schedule=far)
    first = http("GET", f"{console.node.url}/v1/jobs?name=needle", token=tenant["token"])[1]
    assert first["jobs"] == [] and first["next_cursor"], "the first stretch should not reach it"
    console.sign_in(tenant["token"])
    console.go("#/jobs?name=needle")
    page = console.page
    page.wait_for_selector(f"#jobs tr[data-job='{needle['job_id']}']")
    assert page.locator("#jobs tr[data-job]").count() == 1


COMBINE = """async () => {
  const { combined } = await import("./pages/overview.js");
  const t0 = Date.UTC(2026, 11, 2, 8, 0, 0);
  const node = (id, offsetsMs, v) => ({
    node_id: id,
    samples: offsetsMs.map((ms) => ({ at: new Date(t0 + ms).toISOString(), v })),
  });
  const reports = [
    node("n1", [0, 5000, 10000, 15000], 100),
    node("n2", [10, 5010, 10010], 100),
    node("n3", [1700, 6700, 11700], 50),
  ];
  const sum = (values) => values.reduce((a, b) => a + b, 0);
  const series = combined(reports, 5, (s) => s.v, sum);
  return series.map(([ms, v]) => [(ms - t0) / 1000, v]);
}"""


def test_the_overview_adds_up_nodes_by_tick_and_leaves_out_a_tick_not_all_have(
    console: Console,
) -> None:
    console.sign_in(ADMIN_TOKEN)
    series = console.page.evaluate(COMBINE)
    # n1's sample at 15 s has no n2 or n3 beside it yet: left out, not drawn as a drop to 100
    assert series == [[0, 250], [5, 250], [10, 250]], series


def test_a_job_whose_only_run_died_shows_the_last_result_and_what_version_means(
    console: Console,
) -> None:
    tenant = new_tenant(console.node, f"died-{uuid.uuid4().hex[:6]}")
    (closed_port,) = free_ports(1)  # nothing listens: the one attempt fails at once
    job = create_job(
        console.node,
        tenant["token"],
        name="dies-once",
        schedule={"delay": "1s"},
        target={"type": "http", "url": f"http://127.0.0.1:{closed_port}/hook"},
        retry={"max_attempts": 1},
    )
    url = f"{console.node.url}/v1/jobs/{job['job_id']}"

    def settled() -> bool | None:
        runs = http("GET", f"{url}/runs", token=tenant["token"])[1]["runs"]
        done = http("GET", url, token=tenant["token"])[1]["status"] == "completed"
        return True if done and runs and runs[0]["status"] == "dead" else None

    wait_for(settled, 60, "the job completed and its only run dead")
    console.sign_in(tenant["token"])
    console.go(f"#/jobs/{job['job_id']}")
    page = console.page
    page.wait_for_selector("#job-last-run")
    assert page.text_content("#job-status") == "completed"
    assert page.text_content("#job-last-run") == "last run dead"
    label = page.locator("#job-version-label")
    assert label.text_content() == "Claim fence"
    assert "does not mean the spec changed" in (label.get_attribute("title") or "")
    console.shot("job-last-run-dead")


PALETTE = """async () => {
  const { lineChart, legend } = await import("./chart.js");
  const { kindStyles } = await import("./pages/overview.js");
  const names = ["nats", "redis_stream", "http", "queue", "rabbitmq"];
  names.push("a", "b", "c", "d", "e", "f");
  const series = kindStyles(names).map(
    ({ kind, style }) => ({ name: kind, style, points: [[1, 1], [2, 2]] }),
  );
  const box = document.createElement("div");
  box.append(lineChart({ title: "t", series, fromMs: 0, toMs: 3 }), legend(series));
  document.body.append(box);
  const drawn = [...box.querySelectorAll("path.line")].map((p) => ({
    name: p.dataset.series,
    stroke: getComputedStyle(p).stroke,
    dash: p.getAttribute("stroke-dasharray") ?? "",
  }));
  const items = [...box.querySelectorAll("ul.legend li")];
  const legendColours = items.map((li) => getComputedStyle(li).color);
  box.remove();
  const styleOf = (kinds, kind) => kindStyles(kinds).find((k) => k.kind === kind).style;
  const stable = [["nats"], ["queue", "http", "nats"], ["nats", "zz"]].map(
    (kinds) => styleOf(kinds, "nats"),
  );
  return { drawn, legendColours, stable };
}"""


def test_every_series_of_a_chart_is_drawn_apart_and_a_kind_keeps_its_colour(
    console: Console,
) -> None:
    console.sign_in(ADMIN_TOKEN)
    result = console.page.evaluate(PALETTE)
    drawn = result["drawn"]
    assert len(drawn) == 11
    # the first 8 (every target kind among them) in 8 different colours, no dashes
    assert len({d["stroke"] for d in drawn[:8]}) == 8, drawn
    assert all(d["dash"] == "" for d in drawn[:8]), drawn
    # past the palette's 8 colours, a dash pattern keeps each series apart
    assert len({(d["stroke"], d["dash"]) for d in drawn}) == 11, drawn
    strokes = {d["name"]: d["stroke"] for d in drawn}
    assert strokes["redis_stream"] != strokes["nats"]
    assert result["legendColours"] == [d["stroke"] for d in drawn]
    assert len(set(result["stable"])) == 1, result["stable"]
