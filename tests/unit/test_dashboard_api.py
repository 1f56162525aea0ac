"""The dashboard's JSON API over a read model folded from built events: the same answers
as the queries over NATS, every parameter bounded, hostile input refused naming the field,
and nothing from the log ever returned as markup."""

import sys
from collections.abc import Sequence

import msgspec
import pytest
from starlette.testclient import TestClient

from allot.bus.codec import encode
from allot.bus.eventlog import Record, make_record
from allot.core import JobRecord
from allot.core.arrays import parse
from allot.proto.events import ArraySubmitted, Event, PendingReason
from allot.proto.queries import QueueQuery
from allot.proto.subjects import subject_for
from allot.services.view.model import ReadModel, owed_report
from allot.services.view.web import MAX_QUERY_CHARS, Dashboard, names_for
from tests import builders as b
from tests.unit.test_read_model import FixedClock, S

HOSTILE = "<img src=x onerror=alert(1)>"


def records_of(*events: Event) -> list[Record]:
    return [make_record(n, subject_for(e), encode(e), {}) for n, e in enumerate(events, 1)]


class InMemoryLog:
    """A job's records picked out of a list, as ``JobLog`` picks them out of the stream."""

    def __init__(self, records: list[Record]):
        self.records = records
        self.asked: list[tuple[str, list[int]]] = []

    async def __call__(self, job: JobRecord, plan_seqs: Sequence[int]) -> list[Record]:
        self.asked.append((job.job_id, list(plan_seqs)))
        own = f"allot.evt.job.{job.job_id}."
        return [r for r in self.records if r.subject.startswith(own) or r.seq in plan_seqs]


EVENTS = (
    b.node("n1", 2),
    b.node("n2", 2),
    b.submitted("held", 2, at=S, account="lab/a", name=HOSTILE),
    b.plan(("held", "n1", [0, 1])),
    b.started("held", "n1", [0, 1]),
    b.submitted("waits", 4, at=2 * S, account="lab/b"),
    msgspec.structs.replace(
        b.plan(), pending=[PendingReason(job_id="waits", code="NO_FIT", params={"need": 4})]
    ),
    b.submitted("done", 1, at=3 * S),
    b.plan(("done", "n2", [0])),
    b.started("done", "n2", [0]),
    b.exited("done", "n2", 0),
)


def dashboard(ready: bool = True) -> tuple[TestClient, ReadModel, InMemoryLog]:
    model = ReadModel(FixedClock(100 * S), refresh_s=1.0)
    records = records_of(*EVENTS)
    for record in records:
        model.fold(model.state, record)
    job_log = InMemoryLog(records)
    app = Dashboard(model, ready=lambda: ready, job_records=job_log).app
    return TestClient(app, raise_server_exceptions=False), model, job_log


def test_the_queue_is_the_read_models_answer() -> None:
    client, model, _ = dashboard()
    answer = client.get("/api/queue").json()
    assert answer == msgspec.to_builtins(model.queue(QueueQuery()))
    assert [row["job_id"] for row in answer["data"]["rows"]] == ["waits"]
    assert answer["seq"] == len(EVENTS)
    paged = client.get("/api/queue", params={"offset": 1}).json()
    assert (paged["data"]["rows"], paged["total"]) == ([], 1)


def test_nodes_accounts_and_jobs_answer_as_over_nats() -> None:
    client, _, _ = dashboard()
    nodes = client.get("/api/nodes").json()["data"]
    assert [n["node_id"] for n in nodes] == ["n1", "n2"]
    assert nodes[0]["allocated"] == {"0": "held", "1": "held"}
    one = client.get("/api/nodes", params={"node_id": "n9"})
    assert one.status_code == 404
    assert one.json()["errors"][0]["field"] == "node_id"

    accounts = client.get("/api/accounts").json()["data"]
    assert {row["account"] for row in accounts["budget"]} >= {"lab/a", "lab/b"}
    assert accounts["owed"] is None  # not computed yet: said, not made up

    jobs = client.get("/api/jobs", params=[("states", "running"), ("states", "succeeded")])
    assert [j["job_id"] for j in jobs.json()["data"]] == ["done", "held"]
    of_b = client.get("/api/jobs", params={"accounts": "lab/b", "limit": 1}).json()
    assert [j["job_id"] for j in of_b["data"]] == ["waits"]


def test_a_job_comes_with_its_explanation_and_its_trace_from_its_own_records() -> None:
    client, _, job_log = dashboard()
    answer = client.get("/api/jobs/waits").json()
    assert answer["job"]["status"] == "pending"
    assert answer["explain"]["position"] == 1
    assert [step["what"] for step in answer["explain"]["trail"]] == ["submitted", "waiting"]
    assert answer["processes"] == []  # placed nowhere: no output to ask any node for

    trace = client.get("/api/jobs/done/trace").json()["trace"]
    assert trace["status"] == "succeeded"
    assert trace["ended"] is True
    assert [span["name"] for span in trace["spans"]] == ["job done", "queued", "run 0"]
    assert all(span["end"] is not None for span in trace["spans"])
    # Only the job's records and the plan that admitted it were asked for.
    assert job_log.asked == [("done", [9])]
    points = [p["name"] for span in trace["spans"] for p in span["points"]]
    assert "admitted to n2 [0]" in points

    waiting = client.get("/api/jobs/waits/trace").json()["trace"]
    assert waiting["status"] == "pending"
    assert waiting["spans"][0]["end"] is None


def test_owed_and_delivered_are_answered_once_computed() -> None:
    client, model, _ = dashboard()
    model.owed = owed_report(records_of(*EVENTS), 100 * S, 7 * 86400 * S)
    owed = client.get("/api/accounts").json()["data"]["owed"]
    assert owed["seq"] == len(EVENTS)
    assert {row["account"] for row in owed["rows"]} >= {"lab", "lab/a", "lab/b"}


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/queue", {"limit": "0"}, "limit"),
        ("/api/queue", {"limit": "100000"}, "limit"),
        ("/api/queue", {"limit": "ten"}, "limit"),
        ("/api/queue", {"offset": "-1"}, "offset"),
        ("/api/queue", {"offset": "9" * 5000}, "query"),
        ("/api/queue", {"colour": "blue"}, "colour"),
        ("/api/queue", [("limit", "1"), ("limit", "2")], "limit"),
        ("/api/queue", {"accounts": HOSTILE}, "accounts[0]"),
        ("/api/jobs", {"states": "sleeping"}, "states[0]"),
        ("/api/jobs", {"before": "0"}, "before"),
        ("/api/jobs", [("users", "u")] * 65, "users"),
        ("/api/accounts", {"window_ns": "1"}, "window_ns"),
        ("/api/nodes", {"node_id": "x" * 200}, "node_id"),
        ("/api/jobs/waits", {"x": "1"}, "query"),
    ],
)
def test_hostile_parameters_are_refused_naming_the_field(
    path: str, params: object, field: str
) -> None:
    client, _, _ = dashboard()
    refused = client.get(path, params=params)  # type: ignore[arg-type]
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/json"
    [error] = refused.json()["errors"]
    assert error["field"] == field
    assert len(error["value"]) <= MAX_QUERY_CHARS
    assert "Traceback" not in refused.text


def test_what_is_not_there_is_a_404_naming_it_and_nothing_is_markup() -> None:
    client, _, _ = dashboard()
    for path in ("/api/jobs/" + "%3Cscript%3E", "/api/jobs/nope/trace"):
        missing = client.get(path)
        assert missing.status_code == 404, path
        assert missing.json()["errors"][0]["field"] == "job_id"
    too_long = client.get("/api/jobs/" + "j" * 500)
    assert too_long.status_code == 400
    assert too_long.json()["errors"][0]["field"] == "job_id"
    # Names from the log come back as JSON strings, never into a page's markup.
    page = client.get("/jobs/held")
    assert page.status_code == 200
    assert HOSTILE not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/api/jobs/held").json()["job"]["spec"]["name"] == HOSTILE


def test_nothing_is_answered_from_a_log_half_read() -> None:
    client, _, _ = dashboard(ready=False)
    for path in ("/api/queue", "/api/nodes", "/api/accounts", "/api/jobs", "/api/jobs/held"):
        waiting = client.get(path)
        assert waiting.status_code == 503, path
        assert waiting.json()["errors"][0]["field"] == "log"
    assert client.get("/").status_code == 200  # the page itself says it is reading


def test_the_pages_and_their_script_are_served() -> None:
    client, _, _ = dashboard()
    for path in ("/", "/nodes", "/accounts", "/jobs/held"):
        shown = client.get(path)
        assert shown.status_code == 200
        assert '<script src="/static/dashboard.js"' in shown.text
    script = client.get("/static/dashboard.js")
    assert script.status_code == 200
    assert "innerHTML" not in script.text  # everything from the log goes in as text
    assert client.get("/static/../web.py").status_code == 404
    assert client.post("/api/queue").status_code == 405  # read-only


def test_a_server_on_this_machine_answers_only_to_its_names() -> None:
    model = ReadModel(FixedClock(100 * S))
    hosts = names_for("127.0.0.1")
    assert hosts == names_for("::1") == names_for("localhost")
    assert names_for("0.0.0.0") is None  # served to others: they name it as they know it
    app = Dashboard(model, ready=lambda: True, hosts=hosts).app
    client = TestClient(app, base_url="http://127.0.0.1:8265")
    assert client.get("/api/nodes").status_code == 200
    assert client.get("/api/nodes", headers={"host": "localhost:8265"}).status_code == 200
    assert client.get("/api/nodes", headers={"host": "[::1]:8265"}).status_code == 200
    # A page elsewhere that pointed a name of its own at this machine reads nothing.
    rebound = client.get("/api/nodes", headers={"host": "attacker.example:8265"})
    assert rebound.status_code == 400
    assert rebound.json()["errors"][0]["field"] == "host"


def test_a_page_learns_where_its_user_reaches_nats_and_which_node_runs_each_worker() -> None:
    model = ReadModel(FixedClock(100 * S))
    for record in records_of(*EVENTS):
        model.fold(model.state, record)
    socket = "ws://127.0.0.1:4223"
    acting = TestClient(Dashboard(model, ready=lambda: True, websocket=socket).app)
    assert acting.get("/api/config").json() == {"websocket": socket}
    # The pages may connect there, and nowhere else.
    policy = acting.get("/api/config").headers["content-security-policy"]
    assert f"connect-src 'self' {socket};" in policy
    [process] = acting.get("/api/jobs/held").json()["processes"]
    assert (process["node_id"], process["ranks"], process["started"]) == ("n1", "0", True)

    without = TestClient(Dashboard(model, ready=lambda: True).app)
    assert without.get("/api/config").json() == {"websocket": None}
    assert "connect-src" not in without.get("/api/config").headers["content-security-policy"]
    untraced = without.get("/api/jobs/held/trace")
    assert untraced.status_code == 503
    assert untraced.json()["errors"][0]["field"] == "job_id"


def test_the_jobs_api_pages_inside_an_array_and_shows_an_array_at_a_glance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    array = ArraySubmitted(meta=b.meta(), job_id="a", spec=b.spec(), array=parse("0-5"))
    monkeypatch.setattr(sys.modules[__name__], "EVENTS", (b.node("n1", 2), b.submitted("p"), array))
    client, _, _ = dashboard()
    seen, cursor = [], {}
    while True:
        page = client.get("/api/jobs", params={"limit": 2, **cursor}).json()
        seen += [job["job_id"] for job in page["data"]]
        if not page["more"]:
            break
        cursor = {"before": page["next_before"], "before_index": page["next_before_index"],
                  "before_id": page["next_before_id"]}  # fmt: skip
    assert seen == ["a_5", "a_4", "a_3", "a_2", "a_1", "a_0", "p"]
    tasks = client.get("/api/jobs", params={"array": "a"}).json()["data"]
    assert [job["array_index"] for job in tasks] == [5, 4, 3, 2, 1, 0]
    glance = client.get("/api/jobs/a").json()["errors"][0]["message"]
    assert glance == "a job array: its tasks are jobs (a_0…)"
