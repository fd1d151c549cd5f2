"""bench/profile_brokers.py's pure parts: collapsed stacks to shares, thread groups, the
jcmd command that carries async-profiler's options; and a failed window's clean-up, with a
logged sampler and a system of one topic."""

import pytest

from bench.profile_brokers import agent_command, summarize, thread_group

pytestmark = pytest.mark.unit

KAFKA = """\
[data-plane-kafka-request-handler-3 tid=4242];java/lang/Thread.run;kafka/server/KafkaRequestHandler.run;kafka/server/KafkaApis.handleFetchRequest;writev 6
[data-plane-kafka-request-handler-5 tid=4250];java/lang/Thread.run;kafka/server/KafkaRequestHandler.run;java/util/HashMap.getNode 2
[ReplicaFetcherThread-0-2 tid=4300];kafka/server/AbstractFetcherThread.processFetchRequest;epoll_wait 2
"""
RAYKA = """\
thread (29231): network;_run_once (uvloop.py:1);data_received (actors/listener.py:405);fetch (protocol/handlers/data.py:260) 3
thread (29232): network;_run_once (uvloop.py:1);data_received (actors/listener.py:405) 1
"""


@pytest.mark.parametrize("frame, group", [
    ("[data-plane-kafka-request-handler-3 tid=4242]", "[data-plane-kafka-request-handler-#]"),
    ("[ReplicaFetcherThread-0-2 tid=17]", "[ReplicaFetcherThread-#-#]"),
    ("thread (29231): MainThread", "MainThread"),
    ("thread (1): worker-12", "worker-#"),
])
def test_thread_groups_drop_numbers(frame, group):
    assert thread_group(frame) == group


def test_kafka_shares():
    got = summarize(KAFKA.splitlines(), ("KafkaRequestHandler.run", "handleFetchRequest",
                                         "processFetchRequest", "Absent.method"))
    assert got["samples"] == 10
    assert got["threads"] == {"[data-plane-kafka-request-handler-#]": 80.0,
                              "[ReplicaFetcherThread-#-#]": 20.0}
    assert got["leaves"] == {"writev": 60.0, "java/util/HashMap.getNode": 20.0,
                             "epoll_wait": 20.0}
    assert got["inclusive"] == {"KafkaRequestHandler.run": 80.0, "handleFetchRequest": 60.0,
                                "processFetchRequest": 20.0, "Absent.method": 0.0}


def test_rayka_shares_and_top():
    got = summarize(RAYKA.splitlines() + [""], ("data_received (", "handlers/data.py:"), top=1)
    assert got["samples"] == 4
    assert got["threads"] == {"network": 100.0}
    assert got["leaves"] == {"fetch (protocol/handlers/data.py:260)": 75.0}
    assert got["inclusive"] == {"data_received (": 100.0, "handlers/data.py:": 75.0}


def test_no_samples_is_zero_shares():
    assert summarize([], ("x",)) == {"samples": 0, "threads": {}, "leaves": {},
                                     "inclusive": {"x": 0.0}}


@pytest.mark.parametrize("line", ["no count here", "frames;only 1.5", " 3"])
def test_a_line_that_is_not_a_collapsed_stack_is_refused(line):
    with pytest.raises(ValueError):
        summarize([line])


def test_agent_options_are_quoted_inside_jcmds_argument():
    cmd = agent_command(77, "/x/libasyncProfiler.so", "start,event=ctimer,interval=1ms")
    assert cmd == ["jcmd", "77", "JVMTI.agent_load", "/x/libasyncProfiler.so",
                   '"start,event=ctimer,interval=1ms"']


class LoggedSampler:
    """A sampler that records what the window asked of it."""
    log: list = []

    def __init__(self, pids, out):
        self.log.append(("new", tuple(pids)))

    def start(self, seconds):
        self.log.append(("start", seconds))

    def stop(self):
        self.log.append(("stop",))
        return []

    def abandon(self):
        self.log.append(("abandon",))


class OneTopicSystem:
    """Just what profile_window asks of a system."""
    name = "rayka"

    def __init__(self):
        self.deleted = []

    def broker_pids(self):
        return {1: 101}

    def fresh_topic(self, prefix, partitions, timeout_s):
        return f"{prefix}-x"

    def bootstrap_servers(self):
        return "127.0.0.1:9"

    def delete_topic(self, name):
        self.deleted.append(name)


def test_a_window_that_fails_stops_its_sampler_and_deletes_its_topic(tmp_path):
    from bench.profile_brokers import profile_window

    def paced(*args, **kw):
        raise TimeoutError("no acknowledgement")
    LoggedSampler.log = []
    system = OneTopicSystem()
    with pytest.raises(TimeoutError):
        profile_window(system, LoggedSampler, 200, 1.0, tmp_path, paced=paced)
    assert LoggedSampler.log == [("new", (1,)), ("start", 1.0), ("abandon",)]
    assert system.deleted == ["vs-profile-x"]
