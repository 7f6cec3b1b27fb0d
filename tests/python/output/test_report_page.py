"""The job report's page (`davincirun report`, report.html) in headless
Chromium: it loads nothing, logs no error, and shows what the record says.

Two kinds of records: the examples of tests/data/job_records (and a made
1,024-rank one, job_records.py), which run wherever Chromium is; and the
record real jobs write (<run>/job.json), which these tests skip, saying so,
while the supervisor writes none.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chromium_page import ChromiumPage, chromium_path
from conftest import REPO, needs_modules
from job_records import example, many_ranks_record, write_run

DAVINCIRUN = shutil.which("davincirun")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(DAVINCIRUN is None, reason="davincirun is not on PATH (pip install . first)"),
    pytest.mark.skipif(chromium_path() is None, reason="no Chromium (scripts/setup.sh installs Debian's chromium)"),
]

SIZE_BUDGET = 2 * 1024 * 1024  # bytes: the page of 1,024 ranks of /bin/true
RENDER_BUDGET_MS = 1000.0  # since navigation began, layout included (data-render-ms)


def report(run_dir):
    """`davincirun report RUN_DIR`: its output, and the page it wrote."""
    proc = subprocess.run([DAVINCIRUN, "report", str(run_dir)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    page = Path(os.path.realpath(str(run_dir))) / "report.html"
    assert "report: %s\n" % page in proc.stdout
    return proc.stdout, page


def load(page_path, tmp_path, width=1280):
    """Opens the page; returns the open ChromiumPage, checked clean."""
    browser = ChromiumPage(tmp_path, width=width)
    browser.start()
    try:
        url = browser.open(page_path)
        assert browser.evaluate("document.body.dataset.renderMs") is not None, "the page's script did not finish"
        assert browser.problems() == []
        assert browser.foreign_requests(url) == []  # nothing but the file itself: no network at all
    except BaseException:
        browser.close()
        raise
    return browser


def lanes(browser):
    """Every rank lane drawn: [{server, rank, role, ended, failed}]."""
    return browser.evaluate("""[...document.querySelectorAll('[data-kind=rank]')].map((g) => ({
        server: g.dataset.server, rank: Number(g.dataset.rank), role: g.dataset.role,
        ended: g.dataset.ended, failed: g.dataset.failed === 'true'}))""")


def check_failure_shown(browser, record):
    """The first failure's lane is marked, and its line crosses the chart."""
    failure = record["first_failure"]
    failed = [lane for lane in lanes(browser) if lane["failed"]]
    assert [(lane["server"], lane["rank"]) for lane in failed] == [(failure["server_id"], failure["rank"])]
    assert browser.evaluate("!!document.getElementById('first-failure-line')")
    cause = browser.evaluate("document.getElementById('cause').textContent")
    for index in record["root_cause"]["highlight"]:
        assert record["root_cause"]["lines"][index] in cause
    marked = browser.evaluate("[...document.querySelectorAll('#cause .hl')].map((e) => e.textContent)")
    assert marked == [record["root_cause"]["lines"][i] for i in record["root_cause"]["highlight"]]


def check_budget(page, browser):
    size = page.stat().st_size
    render_ms = float(browser.evaluate("document.body.dataset.renderMs"))
    print("%s: %d bytes, rendered in %.0f ms" % (page, size, render_ms))  # the figures docs/usage.md quotes
    assert size < SIZE_BUDGET
    assert render_ms < RENDER_BUDGET_MS
    return size, render_ms


# -- example records ---------------------------------------------------------


def test_failed_example_shows_every_rank_the_failure_and_nothing_injected(tmp_path):
    record = example("failed_4_ranks.json")
    out, page = report(write_run(tmp_path / "run", record))
    assert out.startswith("job %s: failed" % record["job_id"])
    browser = load(page, tmp_path)
    try:
        drawn = lanes(browser)
        assert sorted(lane["rank"] for lane in drawn) == sorted(r["rank"] for r in record["ranks"])
        assert {lane["rank"]: lane["ended"] for lane in drawn} == {r["rank"]: r["ended_how"] for r in record["ranks"]}
        check_failure_shown(browser, record)
        # The record's '</script><script>' stayed text: the page has its own two scripts only.
        assert browser.evaluate("document.scripts.length") == 2
        assert record["root_cause"]["exception"] in browser.evaluate("document.getElementById('cause').textContent")
        slow = sum(len(r["slow"]) for r in record["ranks"])
        assert browser.evaluate("document.querySelectorAll('#timeline .slow').length") == slow
        metrics = {name for r in record["ranks"] for name in r["metrics"]}
        drawn_metrics = browser.evaluate("[...document.querySelectorAll('svg.metric')].map((s) => s.dataset.metric)")
        assert set(drawn_metrics) == metrics
        browser.screenshot(tmp_path / "failed_4_ranks.png")
    finally:
        browser.close()


def test_two_servers_example_shows_both_servers_lanes_and_attempts(tmp_path):
    record = example("two_servers_restart.json")
    _, page = report(write_run(tmp_path / "run", record))
    browser = load(page, tmp_path)
    try:
        servers = browser.evaluate("[...document.querySelectorAll('[data-kind=server]')].map((g) => g.dataset.server)")
        assert servers == [s["server_id"] for s in record["servers"]]
        assert sorted((lane["server"], lane["role"], lane["rank"]) for lane in lanes(browser)) == sorted(
            (r["server_id"], r["role"], r["rank"]) for r in record["ranks"])
        assert browser.evaluate("document.querySelectorAll('#timeline .attempt').length") == len(record["attempts"])
        shown = [e for e in record["events"] if e["kind"] != "exit"]
        assert browser.evaluate("document.querySelectorAll('#timeline .event').length") == len(shown)
        browser.screenshot(tmp_path / "two_servers.png")
    finally:
        browser.close()


def test_1024_ranks_one_lane_a_server_the_failing_rank_its_own_within_budget(tmp_path):
    record = many_ranks_record(1024, servers=4, failing=700)
    _, page = report(write_run(tmp_path / "run", record))
    browser = load(page, tmp_path)
    try:
        check_budget(page, browser)
        assert browser.evaluate("document.body.dataset.aggregated") == "true"
        assert browser.evaluate("document.querySelectorAll('[data-kind=server]').length") == 4
        assert [(lane["rank"], lane["failed"]) for lane in lanes(browser)] == [(700, True)]
        # A click on a server shows its ranks; another hides them.
        server = record["ranks"][0]["server_id"]
        click = "document.querySelector('[data-kind=server][data-server=\"%s\"]').dispatchEvent(" \
                "new MouseEvent('click', {bubbles: true}))" % server
        browser.evaluate(click)
        assert len([lane for lane in lanes(browser) if lane["server"] == server]) == sum(
            r["server_id"] == server for r in record["ranks"])
        browser.evaluate(click)
        assert len(lanes(browser)) == 1
        assert browser.problems() == []
        browser.screenshot(tmp_path / "1024_ranks.png")
    finally:
        browser.close()


# -- real jobs -----------------------------------------------------------------

FAILING_RANK = """
import os, sys, time
rank = int(os.environ["RANK"])
for step in range(1, 6):
    print("rank %d step %d/5" % (rank, step), flush=True)
    time.sleep(0.2)
if rank == 2:
    raise ValueError("loss is nan on rank 2")
time.sleep(60)
"""


def real_run(log_dir):
    run = Path(os.path.realpath(str(log_dir / "latest")))
    assert (run / "job.json").is_file(), "the supervisor writes job.json at the end of every job"
    assert (run / "report.html").is_file(), "and its page beside it"
    return run


def test_real_failed_4_rank_job(tmp_path, job_env):
    script = tmp_path / "train.py"
    script.write_text(FAILING_RANK)
    logs = tmp_path / "log"
    proc = subprocess.run([DAVINCIRUN, "--nproc", "4", "-l", str(logs), sys.executable, str(script)],
                          env=dict(os.environ, **job_env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    run = real_run(logs)
    record = json.loads((run / "job.json").read_text())
    out, page = report(run)
    assert "rank 2" in out and "ValueError: loss is nan on rank 2" in out
    browser = load(page, tmp_path)
    try:
        assert sorted(lane["rank"] for lane in lanes(browser)) == [0, 1, 2, 3]
        assert record["first_failure"]["rank"] == 2
        check_failure_shown(browser, record)
        assert "ValueError: loss is nan on rank 2" in browser.evaluate("document.getElementById('cause').textContent")
        browser.screenshot(tmp_path / "real_failed.png")
    finally:
        browser.close()


@needs_modules("torch", "sklearn")
def test_real_failed_4_rank_digits_training(tmp_path, job_env):
    """The digits example (PyTorch DDP on gloo) with rank 1 made to fail at
    its second epoch: the page marks rank 1 first, quotes its exception, and
    every lane shows the progress its epoch lines reported."""
    examples = os.path.join(REPO, "examples")
    logs = tmp_path / "log"
    command = [DAVINCIRUN, "-r", os.path.join(examples, "rank_table_4p.json"), "-l", str(logs), sys.executable,
               "train_digits.py", "--epochs", "4", "--fail-at-epoch", "2", "--fail-rank", "1"]
    proc = subprocess.run(command, cwd=examples, env=dict(os.environ, **job_env), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    run = real_run(logs)
    record = json.loads((run / "job.json").read_text())
    assert record["first_failure"]["rank"] == 1
    assert "injected failure at epoch 2" in record["root_cause"]["exception"]
    assert all(r["progress"] for r in record["ranks"]), "every rank printed its epochs"
    out, page = report(run)
    assert "injected failure at epoch 2" in out
    browser = load(page, tmp_path)
    try:
        assert sorted(lane["rank"] for lane in lanes(browser)) == [0, 1, 2, 3]
        check_failure_shown(browser, record)
        browser.screenshot(tmp_path / "digits_failed.png")
        assert (tmp_path / "digits_failed.png").stat().st_size > 0
    finally:
        browser.close()


def test_real_1024_ranks_of_true_within_budget(tmp_path, rank_table, job_env):
    logs = tmp_path / "log"
    proc = subprocess.run([DAVINCIRUN, "-r", rank_table(1024), "-l", str(logs), "/bin/true"],
                          env=dict(os.environ, **job_env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = real_run(logs)
    started = time.monotonic()
    _, page = report(run)
    assert time.monotonic() - started < 10
    browser = load(page, tmp_path)
    try:
        check_budget(page, browser)
        assert browser.evaluate("document.body.dataset.aggregated") == "true"
        assert lanes(browser) == []  # nothing failed: one lane for the server only
    finally:
        browser.close()


@pytest.mark.multihost
def test_real_two_host_job_shows_both_servers(netns_hosts, tmp_path):
    hosts = netns_hosts.hosts[:2]
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=2)
    command = ["-r", table, "--", "/bin/sh", "-c", "echo rank $RANK; sleep 0.5"]
    procs = [host.start_davincirun(command, cwd=host.root) for host in hosts]
    for host, proc in zip(hosts, procs):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (host.name, err[-3000:])
    run = real_run(Path(hosts[0].log_dir))  # the job's record is written on rank 0's server
    record = json.loads((run / "job.json").read_text())
    # Both servers' ranks and events on one time line (rank 0's server's clock).
    assert [s["server_id"] for s in record["servers"]] == [h.address for h in hosts]
    assert record["missing_servers"] == []
    assert {r["rank"]: r["server_id"] for r in record["ranks"]} == {0: hosts[0].address, 1: hosts[0].address,
                                                                   2: hosts[1].address, 3: hosts[1].address}
    times = [e["time"] for e in record["events"]]
    assert times == sorted(times)
    assert {e["server_id"] for e in record["events"] if e["kind"] == "exit"} == {h.address for h in hosts}
    member = record["servers"][1]
    assert member["clock_error_s"] is not None and 0 <= member["clock_error_s"] < 0.5
    assert abs(member["clock_offset_s"]) <= member["clock_error_s"] + 0.05  # one machine: one clock
    assert "heartbeats" in record["clock"]["method"]
    # The other server's run directory holds the same record: rank 0's server sent it back.
    other_run = real_run(Path(hosts[1].log_dir))
    other = json.loads((other_run / "job.json").read_text())
    assert other == record
    assert (other_run / "report.html").is_file()
    other_summary, _ = report(other_run)
    assert "%s (2 rank(s)), %s (2 rank(s))" % (hosts[0].address, hosts[1].address) in other_summary
    _, page = report(run)
    browser = load(page, tmp_path)
    try:
        servers = browser.evaluate("[...document.querySelectorAll('[data-kind=server]')].map((g) => g.dataset.server)")
        assert len(servers) == 2 and servers == [s["server_id"] for s in record["servers"]]
        assert sorted(lane["rank"] for lane in lanes(browser)) == [0, 1, 2, 3]
        assert {lane["server"] for lane in lanes(browser)} == set(servers)
    finally:
        browser.close()


@pytest.mark.multihost
def test_real_two_host_failure_is_found_on_the_other_server(netns_hosts, tmp_path):
    """Rank 2 fails on the second server: the record on rank 0's server names
    it first, quotes its log, and holds both servers' stops."""
    hosts = netns_hosts.hosts[:2]
    table = netns_hosts.rank_table(tmp_path / "table.json", hosts, devices=2)
    script = tmp_path / "train.py"
    script.write_text(FAILING_RANK)
    command = ["-r", table, "--", sys.executable, str(script)]
    procs = [host.start_davincirun(command, cwd=host.root) for host in hosts]
    for host, proc in zip(hosts, procs):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode != 0, (host.name, err[-3000:])
    run = real_run(Path(hosts[0].log_dir))
    record = json.loads((run / "job.json").read_text())
    assert record["missing_servers"] == []
    assert record["first_failure"]["rank"] == 2 and record["first_failure"]["server_id"] == hosts[1].address
    assert record["root_cause"]["server_id"] == hosts[1].address
    assert "ValueError: loss is nan on rank 2" in record["root_cause"]["exception"]
    ended = {r["rank"]: r["ended_how"] for r in record["ranks"]}
    assert ended[2] == "failed" and {ended[0], ended[1], ended[3]} <= {"stopped", "killed"}
    stops = {e["server_id"] for e in record["events"] if e["kind"] == "stop"}
    assert stops == {h.address for h in hosts}
    # The server where it failed has the whole record too.
    assert json.loads((real_run(Path(hosts[1].log_dir)) / "job.json").read_text()) == record
    out, page = report(run)
    assert "ValueError: loss is nan on rank 2" in out
    browser = load(page, tmp_path)
    try:
        check_failure_shown(browser, record)
        assert "ValueError: loss is nan on rank 2" in browser.evaluate("document.getElementById('cause').textContent")
    finally:
        browser.close()


def test_nulls_wherever_the_schema_allows_them_draw_without_errors(tmp_path):
    record = example("failed_4_ranks.json")
    for key in ("stop_detail", "first_failure", "root_cause", "exit_code"):
        record[key] = None
    record["success"] = False
    running = record["ranks"][0]
    running.update(ended=None, exit_code=None, signal=None, ended_how="running", pid=None, physical_device_id=None)
    record["ranks"][1]["slow"] = [{"from": record["started"], "to": None, "detail": ""}]
    record["ranks"][2]["metrics"] = {"loss": [[None, 1.0, record["started"] + 1], [None, 0.5, record["started"] + 2]]}
    record["ranks"][3]["progress"] = []
    for event in record["events"]:
        event.update(role=None, rank=None)
    _, page = report(write_run(tmp_path / "run", record))
    browser = load(page, tmp_path)
    try:
        assert {lane["rank"]: lane["ended"] for lane in lanes(browser)}[running["rank"]] == "running"
        assert not browser.evaluate("!!document.getElementById('first-failure-line')")
        # One chart a name; a rank without steps puts every line of it on the time axis.
        assert browser.evaluate("document.querySelectorAll('svg.metric').length") == 1
        with_loss = sum(1 for r in record["ranks"] if r["metrics"].get("loss"))
        assert browser.evaluate("document.querySelectorAll('svg.metric polyline').length") == with_loss
    finally:
        browser.close()
