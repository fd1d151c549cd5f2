"""The private Ray head's choices that need no Ray: which ports it asks for, and which failed
`ray start` runs it tries again (with fresh ports) rather than reporting."""

from __future__ import annotations

import pytest

from rayka.ops import ray_head

# what Ray 2.60 prints when a port it was given is taken (its own check, the dashboard's
# bind, a raylet's), and its startup wait on a busy machine
RETRYABLE = [
    "ValueError: Failed to bind to 127.0.0.1:8265 because it's already occupied. You can use "
    "`ray start --dashboard-port ...` or `ray.init(dashboard_port=...)` to select a different "
    "port.",
    "Exception: Failed to find a valid port for dashboard after 0 retries: [Errno 98] error "
    "while attempting to bind on address ('127.0.0.1', 8265): address already in use",
    "OSError: [Errno 98] Address already in use",
    "RuntimeError: The port 41231 is already in use",
    "Exception: The current node timed out during startup. This could happen because some of "
    "the raylet failed to startup or the GCS has become overloaded.",
]
FINAL = [
    "ValueError: --num-cpus must be a non-negative integer",
    "ModuleNotFoundError: No module named 'ray.dashboard'",
    "",
]


@pytest.mark.parametrize("log", RETRYABLE)
def test_a_taken_port_or_a_startup_timeout_is_tried_again(log):
    assert ray_head._retryable("... ray start output ...\n" + log + "\n")


@pytest.mark.parametrize("log", FINAL)
def test_other_failures_are_reported_at_once(log):
    assert not ray_head._retryable(log)


@pytest.mark.parametrize("dashboard", [True, False])
def test_a_head_asks_for_distinct_free_ports(dashboard):
    ports = ray_head.head_ports(dashboard)
    assert ("dashboard-port" in ports) is dashboard
    assert len(set(ports.values())) == len(ports)
