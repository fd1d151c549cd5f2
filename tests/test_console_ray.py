"""The console in a real browser against a real cluster: headless Chromium (Debian's) driven
by Selenium opens every page as a user would; a killed broker shows on the Cluster page;
records produced move the Topics plot; a group's offsets reset through the page (writes
allowed, sent over Kafka's protocol) change its lag; bad input shows Kafka's error and the
console keeps serving. The console runs as its own process (`rayka console`, started the
way start_local(console=True) starts it) on the shared cluster."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import ray

from rayka.client.admin import wait_for
from rayka.console_process import start_console
from tests.console_browser import Browser
from tests.ray_cluster import cluster, ray_session  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray

TIMEOUT_S = 60
INTERVAL_S = 1.0
PAGES = {"/cluster": "Cluster", "/topics": "Topics", "/groups": "Groups",
         "/controller": "Controller", "/transactions": "Transactions",
         "/pipelines": "Pipelines", "/chaos": "Chaos"}


@pytest.fixture(scope="module")
def console(cluster):  # noqa: F811
    proc = start_console(cluster.name, ray.get_runtime_context().gcs_address,
                         extra_args=("--allow-writes", "--interval-s", str(INTERVAL_S)))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def browser(console):
    b = Browser(console.url)
    yield b
    b.close()


def produce(cluster, topic: str, n: int) -> None:  # noqa: F811
    p = cluster.producer()
    for i in range(n):
        p.send(topic, value=b"v%d" % i, key=b"k%d" % (i % 17))
    p.flush()
    p.close()


def plot_max(b: Browser, css: str) -> list:
    """The largest value of each of a plot's columns, as the page drew them (console.js)."""
    return json.loads(b.attr(css, "data-max") or "[]") or [None]


def test_every_page_opens_light_and_without_error(browser):
    for path, title in PAGES.items():
        browser.open(path)
        browser.wait(lambda b: b.text("h1").startswith(title), TIMEOUT_S, f"{path}'s title")
        assert not browser.driver.find_elements("css selector", "#error"), path
        assert browser.page_bytes() < 1_000_000, path
        nav = browser.attr(f"#nav-{path.strip('/')}", "class")
        assert nav == "here", (path, nav)


def test_produced_records_move_the_topic_plot(cluster, browser):  # noqa: F811
    topic = f"console-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 3, 3)
    browser.open(f"/topics/{topic}")
    # a rate needs a sample before the records: wait for the plot's first point (0/s)
    browser.wait(lambda b: b.attr("#topic-plot", "data-state") == "ok"
                 and int(b.attr("#topic-plot", "data-points") or 0) >= 1, TIMEOUT_S,
                 "the topic's plot drawn with a first rate")
    produce(cluster, topic, 3000)
    # the plot's produced column (records/s) shows the burst; the table the end offsets
    browser.wait(lambda b: (plot_max(b, "#topic-plot")[0] or 0) > 0, TIMEOUT_S,
                 "a produce rate above 0 on the topic's plot")
    browser.wait(lambda b: sum(int(x) for x in b.all_text("#partitions td.end")) == 3000,
                 TIMEOUT_S, "the partitions' log end offsets summing to 3000")
    # the brokers' per-topic bytes in (Kafka's BytesInPerSec) on the second plot
    browser.wait(lambda b: (plot_max(b, "#topic-bytes-plot")[0] or 0) > 0, TIMEOUT_S,
                 "bytes in per second above 0 on the topic's bytes plot")
    browser.open("/topics")
    browser.wait(lambda b: topic in b.text("#topics"), TIMEOUT_S, "the topic listed")
    cluster.admin().delete_topic(topic)


def test_reset_offsets_through_the_page_changes_the_lag(cluster, browser):  # noqa: F811
    topic, group = f"console-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    cluster.admin().create_topic(topic, 2, 3)
    produce(cluster, topic, 500)
    consumer = cluster.consumer(group_id=group)
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < 500 and time.monotonic() < deadline:
        got += len(consumer.poll(1.0) or [])
    consumer.commit()
    consumer.close()
    assert got == 500
    browser.open(f"/groups/{group}")
    browser.wait(lambda b: b.text("#lag-total td.lag") == "0", TIMEOUT_S, "lag 0 after reading all")
    browser.select("#reset-topic", topic)
    browser.fill("#reset-to", "earliest")
    browser.click("#reset-submit")
    browser.wait(lambda b: "reset to earliest" in b.text("#outcome"), TIMEOUT_S,
                 "the reset's outcome")
    browser.wait(lambda b: b.text("#lag-total td.lag") == "500", TIMEOUT_S, "lag 500 after reset")
    assert cluster.admin().committed_offsets(group) == {(topic, 0): 0, (topic, 1): 0}
    # a malformed form: Kafka's error on the page, nothing changed, the console serves on
    browser.fill("#reset-to", "yesterday")
    browser.click("#reset-submit")
    browser.wait(lambda b: "INVALID_REQUEST (42)" in b.text("#outcome"), TIMEOUT_S,
                 "INVALID_REQUEST for a malformed reset")
    assert cluster.admin().committed_offsets(group) == {(topic, 0): 0, (topic, 1): 0}
    cluster.admin().delete_topic(topic)


def test_topic_actions_through_the_pages(cluster, browser):  # noqa: F811
    """Alter a config, reassign a partition, elect preferred leaders, delete: each through
    its form, each seen on the page and in the cluster."""
    topic = f"console-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()
    admin.create_topic(topic, 2, 2)
    browser.open(f"/topics/{topic}")
    browser.fill("#alter-input", "retention.ms=3600000")
    browser.click("#alter-submit")
    browser.wait(lambda b: "altered retention.ms" in b.text("#outcome"), TIMEOUT_S, "the alter")
    assert "3600000" in browser.text("#configs")
    assert admin.topic_config(topic)["retention.ms"] == "3600000"

    replicas = list(admin.describe_topic(topic)[0].replicas)
    moved = [b for b in (1, 2, 3) if b not in replicas][:1] + replicas[:1]   # a new preferred leader
    browser.fill("#reassign-partition", "0")
    browser.fill("#reassign-replicas", ",".join(map(str, moved)))
    browser.click("#reassign-submit")
    browser.wait(lambda b: "reassigning" in b.text("#outcome"), TIMEOUT_S, "the reassignment")
    wait_for(lambda: list(admin.describe_topic(topic)[0].replicas) == moved
             and not admin.list_reassignments(), TIMEOUT_S, f"partition 0 on {moved}")
    browser.fill("#elect-partitions", "0")
    browser.click("#elect-submit")
    browser.wait(lambda b: "preferred leaders of" in b.text("#outcome"), TIMEOUT_S, "the election")
    browser.wait(lambda b: b.text("#p-0 td.leader") == str(moved[0]), TIMEOUT_S,
                 f"partition 0 led by its preferred replica {moved[0]}")

    browser.click("#delete-submit")
    browser.driver.switch_to.alert.accept()
    browser.wait(lambda b: f"deleted topic {topic}" in b.text("#outcome"), TIMEOUT_S, "the delete")
    wait_for(lambda: topic not in admin.list_topics(), TIMEOUT_S, f"{topic} gone")


def test_bad_input_shows_kafka_errors_and_the_console_keeps_serving(cluster, browser):  # noqa: F811
    browser.open("/topics/no-such-topic")
    browser.wait(lambda b: "UNKNOWN_TOPIC_OR_PARTITION (3)" in b.text("#error"), TIMEOUT_S,
                 "unknown topic error")
    browser.open("/groups/no-such-group")
    browser.wait(lambda b: "GROUP_ID_NOT_FOUND (69)" in b.text("#error"), TIMEOUT_S,
                 "unknown group error")
    browser.open("/topics")
    browser.fill("#create-name", "bad partitions")
    browser.fill("#create-partitions", "many")
    browser.click("#create-submit")
    browser.wait(lambda b: "INVALID_PARTITIONS (37)" in b.text("#outcome"), TIMEOUT_S,
                 "INVALID_PARTITIONS for a malformed count")
    browser.fill("#create-name", "bad/name")
    browser.fill("#create-partitions", "1")
    browser.fill("#create-rf", "1")
    browser.click("#create-submit")
    browser.wait(lambda b: "INVALID_TOPIC_EXCEPTION (17)" in b.text("#outcome"), TIMEOUT_S,
                 "the brokers' INVALID_TOPIC_EXCEPTION for a bad name")
    browser.open("/cluster")
    browser.wait(lambda b: b.text("h1") == "Cluster", TIMEOUT_S, "the console still serving")


def test_a_killed_broker_shows_on_the_cluster_page(cluster, browser):  # noqa: F811
    topic = f"console-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()
    admin.create_topic(topic, 3, 3)
    victim = admin.describe_topic(topic)[0].leader
    browser.open("/cluster")
    browser.wait(lambda b: b.text(f"#broker-row-{victim} td.state") == "alive", TIMEOUT_S,
                 f"broker {victim} alive")
    browser.wait(lambda b: b.text("#under-count b") == "0", TIMEOUT_S, "nothing under-replicated")
    killed = time.monotonic()
    cluster.kill_broker(victim, restart=False)
    browser.wait(lambda b: b.text(f"#broker-row-{victim} td.state") == "down"
                 and int(b.text("#under-count b")) > 0, TIMEOUT_S,
                 f"broker {victim} down and partitions under-replicated")
    shown_s = time.monotonic() - killed
    print(f"broker {victim} killed: down and under-replicated on the page after {shown_s:.2f} s")
    browser.open(f"/topics/{topic}")
    browser.wait(lambda b: b.text("#p-0 td.leader") not in ("", str(victim)), TIMEOUT_S,
                 "partition 0's new leader")
    # the broker's ZooKeeper session (3 s) must expire before anyone knows; the console adds
    # at most a sweep and a refresh (2 x 1 s) on top
    assert shown_s < 3 + 5, shown_s
    cluster.ensure_actors()
    browser.open("/cluster")
    browser.wait(lambda b: b.text(f"#broker-row-{victim} td.state") == "alive"
                 and b.text("#under-count b") == "0", 120, "the broker back, ISRs full")
    admin.delete_topic(topic)


def test_the_controller_page_shows_the_elections(cluster, browser):  # noqa: F811
    browser.open("/controller")
    browser.wait(lambda b: int(b.text("#election-count")) > 0, TIMEOUT_S,
                 "elections in the controller's journal")
    assert wait_for(lambda: browser.attr("#timeline-plot", "data-state") == "ok", TIMEOUT_S,
                    "the timeline plot")
