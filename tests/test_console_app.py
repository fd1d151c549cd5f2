"""The console's web application (console/app.py) over a hand-built Snapshot: pages, live
fragments, plot data, refused actions and errors with Kafka's names, and the size of a page
at 10,000 partitions. Starlette's in-process TestClient, a fake sampler and a fake Admin (the
approach of tests/test_console_chaos.py); no Ray, no cluster, no socket."""

from __future__ import annotations

import threading
import time

import pytest
from starlette.testclient import TestClient

from console.actions import Actions, Outcome
from console.app import PAGE_ROWS, Console, build_app
from console.history import History
from console.pages import Pages
from console.principal import Visibility
from console.source import PartitionView, Snapshot
from rayka.errors import CoordinatorNotAvailable, UnknownTopicOrPartition

pytestmark = pytest.mark.unit

NODE = "a1" * 20
GROUP = "clicks-app"
TOPIC = "orders"


class FakeAdmin:
    """What the pages ask of rayka's Admin when opened."""

    def __init__(self, topics: dict, groups: dict, transactions: list, described: dict):
        self.topics, self.groups = topics, groups
        self.transactions, self.described = transactions, described
        self.calls: list[tuple] = []

    def topic_config(self, name: str) -> dict:
        self.calls.append(("topic_config", name))
        if name not in self.topics:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        return dict(self.topics[name])

    def describe_topic(self, name: str) -> list:
        if name not in self.topics:
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        return []

    def describe_group(self, group: str) -> dict:
        got = self.groups.get(group)
        if isinstance(got, Exception):
            raise got
        if got is None:                   # Kafka's DescribeGroups of an unknown id: Dead
            return {"group": group, "type": "classic", "state": "Dead", "protocol_type": "",
                    "protocol": "", "members": [], "partitions": []}
        return got

    def find_hanging_transactions(self, topics=None, max_transaction_timeout_ms=900_000) -> list:
        self.hanging_asked = (topics, max_transaction_timeout_ms)
        return [{"topic": TOPIC, "partition": 1, "producer_id": 9, "producer_epoch": 0,
                 "coordinator_epoch": 3, "start_offset": 42, "last_timestamp_ms": 0,
                 "duration_ms": 7_200_000, "transactional_id": None}]

    def list_transactions(self) -> list:
        return list(self.transactions)

    def describe_transaction(self, transactional_id: str) -> dict:
        return self.described[transactional_id]


class FakeCluster:
    """The extra pages' reads (console/timeline.py, console/pipelines.py)."""

    def controller_journal(self, after=None) -> list:
        return []

    def pipeline_reads(self, limit: int = 50) -> list:
        return []


class FakeSource:
    def __init__(self, admin: FakeAdmin):
        self.admin, self.cluster = admin, FakeCluster()
        self.access = Visibility()      # no principal: every page shown


class FakeSampler:
    """What Console and the pages read of console/sampler.py's Sampler."""

    def __init__(self, snap: Snapshot, admin: FakeAdmin):
        self.latest = snap
        self.history = History()
        self.lock = threading.Lock()
        self.source = FakeSource(admin)
        self.sweeps = 0

    def sweep_once(self) -> Snapshot:
        self.sweeps += 1
        return self.latest


class RecordingActions:
    """Writes on, every create answered ok: shows whether an action ran at all."""

    allowed = True

    def __init__(self):
        self.created: list[tuple] = []

    def create_topic(self, name, partitions, replication_factor, configs="") -> Outcome:
        self.created.append((name, partitions, replication_factor, configs))
        return Outcome(True, f"created topic {name}")


def pv(topic, p, leader=1, replicas=(1,), isr=None, end=0) -> PartitionView:
    return PartitionView(topic, p, leader, 4, tuple(replicas),
                         tuple(replicas if isr is None else isr), log_start=0, log_end=end,
                         high_watermark=end, size_bytes=end * 100)


def brokers() -> list[dict]:
    return [{"id": 1, "alive": True, "node_id": NODE, "endpoints": ["PLAINTEXT://10.0.0.1:9092"],
             "rack": None, "epoch": 1, "host": "10.0.0.1"},
            {"id": 2, "alive": False, "node_id": None, "endpoints": [], "rack": None,
             "epoch": None, "host": None}]


def snapshot() -> Snapshot:
    parts = [pv(TOPIC, 0, end=10), pv(TOPIC, 1, replicas=(1, 2), isr=(1,), end=4),
             pv(TOPIC, 2, end=0)]
    return Snapshot(time_s=time.time(), took_s=0.05, brokers=brokers(),
                    nodes=[{"node_id": NODE, "address": "10.0.0.1", "alive": True}],
                    controller={"id": 100, "epoch": 3},
                    zookeeper={"connect": "127.0.0.1:2181", "chroot": "/rayka/test"},
                    partitions={(p.topic, p.partition): p for p in parts},
                    groups=[{"group": GROUP, "type": "classic", "state": "Stable",
                             "protocol_type": "consumer"}],
                    committed={GROUP: {(TOPIC, 0): 5, (TOPIC, 1): 2}})


def admin() -> FakeAdmin:
    now_ms = time.time() * 1000
    return FakeAdmin(
        topics={TOPIC: {"retention.ms": "86400000", "cleanup.policy": "delete"}},
        groups={GROUP: {"group": GROUP, "type": "classic", "state": "Stable",
                        "protocol_type": "consumer", "protocol": "range",
                        "members": [{"member_id": "m-1", "client_id": "c", "host": "/10.0.0.9",
                                     "partitions": [(TOPIC, 0), (TOPIC, 1)]}],
                        "partitions": [{"topic": TOPIC, "partition": 0, "committed": 5,
                                        "end": 10, "lag": 5, "owner": "m-1"},
                                       {"topic": TOPIC, "partition": 1, "committed": 2,
                                        "end": 4, "lag": 2, "owner": "m-1"}]},
                "moving": CoordinatorNotAvailable("the coordinator is moving")},
        transactions=[
            {"transactional_id": "tx-hung", "producer_id": 7, "state": "Ongoing",
             "coordinator": 1},
            {"transactional_id": "tx-fresh", "producer_id": 8, "state": "Ongoing",
             "coordinator": 1},
            {"transactional_id": "tx-done", "producer_id": 9, "state": "CompleteCommit",
             "coordinator": 1}],
        described={
            "tx-hung": {"transactional_id": "tx-hung", "state": "Ongoing", "producer_id": 7,
                        "producer_epoch": 0, "transaction_timeout_ms": 60_000,
                        "transaction_start_time_ms": now_ms - 600_000,
                        "partitions": [[TOPIC, 0]]},
            "tx-fresh": {"transactional_id": "tx-fresh", "state": "Ongoing", "producer_id": 8,
                         "producer_epoch": 0, "transaction_timeout_ms": 60_000,
                         "transaction_start_time_ms": now_ms - 1_000,
                         "partitions": [[TOPIC, 1]]}})


def console_for(snap: Snapshot, actions=None) -> Console:
    console = Console("test", FakeSampler(snap, admin()), actions or Actions(None),
                      refresh_s=1.0)
    console.extra = Pages(console)
    return console


@pytest.fixture
def console() -> Console:
    return console_for(snapshot())


@pytest.fixture
def client(console) -> TestClient:
    return TestClient(build_app(console))


def table(html: str, table_id: str) -> str:
    return html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]


def rows_of(html: str, table_id: str) -> list[str]:
    return table(html, table_id).split("<tr")[2:]          # past the header row


# -- pages ---------------------------------------------------------------------------------------
def test_the_cluster_page_shows_the_dead_broker_and_the_under_replicated_partition(client):
    r = client.get("/cluster")
    assert r.status_code == 200
    row1 = r.text.split('id="broker-row-1"', 1)[1].split("</tr>", 1)[0]
    row2 = r.text.split('id="broker-row-2"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="state">alive</td>' in row1
    assert '<td class="state">down</td>' in row2
    assert "<td>3</td><td>0</td>" in row1                   # leads 3, follows none
    assert "<td>0</td><td>1</td>" in row2                   # leads none, follows orders-1
    assert 'id="under-count">Under-replicated <b>1</b>' in r.text
    assert 'id="offline-count">Offline <b>0</b>' in r.text
    under = rows_of(r.text, "under")
    assert len(under) == 1
    assert f'<a href="/topics/{TOPIC}">{TOPIC}</a>-1</td><td>1</td><td>1,2</td><td>1</td>' \
        in under[0]
    assert '<p id="offline">none</p>' in r.text


def test_a_dead_leader_makes_its_partition_offline_on_the_cluster_page():
    snap = snapshot()
    snap.partitions[(TOPIC, 2)].leader = 2                 # broker 2 is down
    r = TestClient(build_app(console_for(snap))).get("/cluster")
    assert 'id="offline-count">Offline <b>1</b>' in r.text
    offline = rows_of(r.text, "offline")
    assert len(offline) == 1 and f"<td>{TOPIC}-2</td><td>2</td>" in offline[0]


def test_the_topics_page_lists_the_topic(client):
    r = client.get("/topics")
    assert r.status_code == 200
    row = r.text.split(f'id="topic-{TOPIC}"', 1)[1].split("</tr>", 1)[0]
    # 3 partitions, RF 2 (the widest), 1 under-replicated, 14 records, 1.4 KiB
    assert f'<a href="/topics/{TOPIC}">{TOPIC}</a></td><td>3</td><td>2</td>' \
           '<td class="alarm">1</td>' in row
    assert "<td>14</td><td>1.4 KiB</td>" in row


def test_a_topic_page_renders_its_partitions_and_configs(client):
    r = client.get(f"/topics/{TOPIC}")
    assert r.status_code == 200
    parts = rows_of(r.text, "partitions")
    assert [p.split('id="p-', 1)[1].split('"', 1)[0] for p in parts] == ["0", "1", "2"]
    assert 'class="alarm"' in parts[1] and 'class="alarm"' not in parts[0]
    assert '<td class="isr">1</td>' in parts[1] and '<td class="end">10</td>' in parts[0]
    configs = table(r.text, "configs")
    assert '<td class="mono">retention.ms</td><td class="mono">86400000</td>' in configs
    assert '<td class="mono">cleanup.policy</td><td class="mono">delete</td>' in configs


@pytest.mark.parametrize("query, message", [
    ("?page=2", "INVALID_REQUEST (42): page 2 of topic orders does not exist (1..1)"),
    ("?page=0", "INVALID_REQUEST (42): page 0 of topic orders does not exist (1..1)"),
    ("?page=x", "INVALID_REQUEST (42): page must be a whole number, not &#39;x&#39;"),
])
def test_a_page_out_of_range_or_malformed_is_a_400(client, query, message):
    r = client.get(f"/topics/{TOPIC}{query}")
    assert r.status_code == 400
    assert f'<p class="error" id="error">{message}</p>' in r.text


def test_an_unknown_topic_is_a_404_with_kafkas_error(client):
    r = client.get("/topics/nope")
    assert r.status_code == 404
    assert "UNKNOWN_TOPIC_OR_PARTITION (3): Topic &#39;nope&#39; does not exist." in r.text


def test_a_group_page_shows_its_members_and_lag(client):
    r = client.get(f"/groups/{GROUP}")
    assert r.status_code == 200
    assert 'id="group-state">Stable<' in r.text
    assert f'id="lag-{TOPIC}-0"' in r.text
    assert '<tr id="lag-total"><td>total</td><td></td><td></td><td class="lag">7</td>' in r.text


@pytest.mark.parametrize("group", ["unknown-group", "moving"])
def test_an_unknown_group_is_a_404_group_id_not_found(client, group):
    """Whether the coordinator answers Dead or an error, a group not listed is not found."""
    r = client.get(f"/groups/{group}")
    assert r.status_code == 404
    assert f"GROUP_ID_NOT_FOUND (69): The group id {group} was not found." in r.text


def test_a_listed_group_whose_coordinator_fails_shows_that_error():
    snap = snapshot()
    snap.groups.append({"group": "moving", "type": "classic", "state": "Stable"})
    r = TestClient(build_app(console_for(snap))).get("/groups/moving")
    assert r.status_code == 400
    assert "COORDINATOR_NOT_AVAILABLE (15): the coordinator is moving" in r.text


def test_the_groups_page_sums_the_lag(client):
    r = client.get("/groups")
    row = r.text.split(f'id="group-{GROUP}"', 1)[1].split("</tr>", 1)[0]
    assert f"<td>{TOPIC}</td><td>2</td><td class=\"lag\">7</td>" in row   # 5 + 2


def test_find_hanging_runs_on_demand_and_lists_what_no_coordinator_will_finish(client, console):
    r = client.get("/transactions")
    assert 'id="hanging"' not in r.text and not hasattr(console.admin, "hanging_asked")
    r = client.get("/transactions?find_hanging=1&max_minutes=30")
    assert r.status_code == 200
    assert console.admin.hanging_asked == (None, 30 * 60_000)
    row = table(r.text, "hanging")
    assert f"{TOPIC}-1" in row and "<td>42</td>" in row and "(none holds this producer id)" in row
    assert "--start-offset N" in r.text
    for bad in ("-1", "soon"):
        bad_page = client.get(f"/transactions?find_hanging=1&max_minutes={bad}")
        assert bad_page.status_code == 400 and "INVALID_REQUEST (42)" in bad_page.text


def test_an_ongoing_transaction_past_its_timeout_is_hanging(client):
    r = client.get("/transactions")
    assert r.status_code == 200
    assert 'id="ongoing-count">2<' in r.text
    assert 'id="hanging-count">1<' in r.text
    rows = rows_of(r.text, "transactions")
    hung = [x for x in rows if "tx-hung" in x]
    fresh = [x for x in rows if "tx-fresh" in x]
    assert len(rows) == 3 and 'class="alarm"' in hung[0] and 'class="alarm"' not in fresh[0]


@pytest.mark.parametrize("path", ["/cluster", "/topics", f"/topics/{TOPIC}", "/groups",
                                  f"/groups/{GROUP}", "/transactions", "/controller",
                                  "/pipelines"])
def test_an_htmx_refresh_answers_the_live_fragment_only(client, path):
    full = client.get(path)
    assert full.status_code == 200 and "<html" in full.text and '<div id="live"' in full.text
    fragment = client.get(path, headers={"HX-Request": "true", "HX-Target": "live"})
    assert fragment.status_code == 200
    assert fragment.text.startswith('<div id="live"') and "<html" not in fragment.text
    assert 'hx-trigger="every 1000ms"' in fragment.text
    other = client.get(path, headers={"HX-Request": "true", "HX-Target": "elsewhere"})
    assert "<html" in other.text                        # another target: the whole page


# -- plot data -----------------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["", "?series=", "?series=,,",
                                   "?series=" + ",".join(f"s{i}" for i in range(33))])
def test_plot_wants_1_to_32_series(client, query):
    r = client.get(f"/api/plot{query}")
    assert r.status_code == 400
    assert r.json() == {"error": "INVALID_REQUEST (42): give 1 to 32 series"}


def test_plot_of_32_series_is_answered(client):
    r = client.get("/api/plot?series=" + ",".join(f"s{i}" for i in range(32)))
    assert r.status_code == 200 and len(r.json()["names"]) == 32


def test_plot_answers_the_columnar_history(console, client):
    now = time.time()
    h = console.sampler.history
    for dt, v in [(-600, 10), (-20, 30), (-10, 70)]:
        h.add(f"topic:{TOPIC}:end", now + dt, v)
    h.add("cluster:offline", now - 10, 1)
    r = client.get(f"/api/plot?series=topic:{TOPIC}:end,cluster:offline")
    assert r.status_code == 200
    body = r.json()
    assert body["names"] == [f"topic:{TOPIC}:end", "cluster:offline"]
    assert body["data"] == [[now - 600, now - 20, now - 10], [10, 30, 70], [None, None, 1]]
    narrow = client.get(f"/api/plot?series=topic:{TOPIC}:end&window_s=60&rate=1").json()
    assert narrow["data"][0] == [now - 20, now - 10]
    assert narrow["data"][1] == pytest.approx([20 / 580, 4.0])


@pytest.mark.parametrize("window", ["abc", "1.5", ""])
def test_plot_with_a_malformed_window_is_a_400(client, window):
    r = client.get(f"/api/plot?series=cluster:offline&window_s={window}")
    assert r.status_code == 400
    assert "INVALID_REQUEST (42): window_s must be a whole number" in r.text


# -- actions -------------------------------------------------------------------------------------
def test_a_write_with_writes_off_is_refused_on_the_page(client):
    r = client.post("/topics", data={"name": "new", "partitions": "3",
                                     "replication_factor": "1"})
    assert r.status_code == 403
    assert '<p class="outcome failed" id="outcome">CLUSTER_AUTHORIZATION_FAILED (31): ' \
           'writes are off' in r.text
    assert f'id="topic-{TOPIC}"' in r.text                   # the topics page, still served


def test_a_write_from_another_origin_is_refused_before_it_runs():
    actions = RecordingActions()
    console = console_for(snapshot(), actions)
    client = TestClient(build_app(console))
    form = {"name": "new", "partitions": "3", "replication_factor": "1"}
    r = client.post("/topics", data=form, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403
    assert "INVALID_REQUEST (42): a write must come from the console&#39;s own pages" in r.text
    assert actions.created == [] and console.sampler.sweeps == 0
    # the console's own origin (and a form without one) runs the action, then sweeps
    for headers in ({"Origin": "http://testserver"}, {}):
        ok = client.post("/topics", data=form, headers=headers)
        assert ok.status_code == 200 and 'class="outcome ok"' in ok.text
    assert actions.created == [("new", "3", "1", "")] * 2 and console.sampler.sweeps == 2


# -- the rest ------------------------------------------------------------------------------------
def test_healthz_and_static_files(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.text == "ok"
    js = client.get("/static/console.js")
    assert js.status_code == 200 and "/api/plot" in js.text
    assert "javascript" in js.headers["content-type"]
    assert client.get("/static/nothing-here.js").status_code == 404


def test_the_status_json(client):
    body = client.get("/api/status").json()
    assert body["cluster"] == "test"
    assert body["under_replicated"] == [[TOPIC, 1]] and body["offline"] == []
    assert body["leaders"] == {f"{TOPIC}-0": 1, f"{TOPIC}-1": 1, f"{TOPIC}-2": 1}


# -- 10,000 partitions ---------------------------------------------------------------------------
BIG = 10_000


def big_snapshot() -> Snapshot:
    snap = snapshot()
    snap.partitions = {("big", p): pv("big", p, replicas=(1, 2), isr=(1,), end=p)
                       for p in range(BIG)}
    return snap


@pytest.fixture(scope="module")
def big_client() -> TestClient:
    console = console_for(big_snapshot())
    console.sampler.source.admin.topics["big"] = {"retention.ms": "1"}
    console.sampler.latest.groups.append({"group": "big-readers", "state": "Empty",
                                          "protocol_type": "consumer", "type": "classic"})
    console.sampler.source.admin.groups["big-readers"] = {
        "group": "big-readers", "type": "classic", "state": "Empty", "protocol_type": "consumer",
        "protocol": "", "members": [],
        "partitions": [{"topic": "big", "partition": p, "committed": 0, "end": p,
                        "owner": None, "lag": p} for p in range(BIG)]}
    return TestClient(build_app(console))


def test_an_offline_log_directory_is_named_on_the_cluster_page():
    snap = snapshot()
    snap.log_dirs = {1: [{"path": "/data/a", "online": True, "error": None, "partitions": 3,
                          "offline_partitions": 0},
                         {"path": "/data/b", "online": False, "error": "ENOSPC: disk full",
                          "partitions": 0, "offline_partitions": 4}]}
    r = TestClient(build_app(console_for(snap))).get("/cluster")
    assert r.status_code == 200
    offline = table(r.text.replace("<ul", "<table", 1).replace("</ul>", "</table>", 1),
                    "offline-dirs")
    assert "broker 1 /data/b: ENOSPC: disk full (4 replicas lost there)" in offline
    assert "/data/a" not in offline


def test_a_group_of_10000_partitions_is_paged_with_the_whole_lag(big_client):
    r = big_client.get("/groups/big-readers")
    assert r.status_code == 200
    assert len(r.content) < 200_000, len(r.content)
    assert len(rows_of(r.text, "lag")) == PAGE_ROWS + 1          # and the total's row
    assert f"({BIG} partitions), page 1 of {BIG // PAGE_ROWS}" in r.text
    assert f'<td class="lag">{sum(range(BIG))}</td>' in r.text   # the total over every page
    last = big_client.get(f"/groups/big-readers?page={BIG // PAGE_ROWS}")
    assert last.status_code == 200 and 'id="lag-big-9999"' in last.text
    assert big_client.get(f"/groups/big-readers?page={BIG // PAGE_ROWS + 1}").status_code == 400


def test_a_topic_of_10000_partitions_is_paged(big_client):
    r = big_client.get("/topics/big")
    assert r.status_code == 200
    assert len(r.content) < 200_000, len(r.content)
    assert len(rows_of(r.text, "partitions")) == PAGE_ROWS
    assert f"Partitions ({BIG}), page 1 of {BIG // PAGE_ROWS}" in r.text
    last = big_client.get(f"/topics/big?page={BIG // PAGE_ROWS}")
    assert last.status_code == 200 and 'id="p-9999"' in last.text and 'id="p-9799"' not in \
        last.text
    assert big_client.get(f"/topics/big?page={BIG // PAGE_ROWS + 1}").status_code == 400


def test_the_cluster_page_at_10000_under_replicated_partitions_is_capped(big_client):
    r = big_client.get("/cluster")
    assert r.status_code == 200
    assert len(r.content) < 1_000_000, len(r.content)
    assert f'id="under-count">Under-replicated <b>{BIG}</b>' in r.text
    assert len(rows_of(r.text, "under")) == 200
    assert f"<p>and {BIG - 200} more</p>" in r.text
