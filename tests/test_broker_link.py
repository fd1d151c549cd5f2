"""actors/broker_link.py against a real listener on loopback (the in-memory FakeBrokerApi
behind actors/listener.py; no Ray, no ZooKeeper): a call is answered, a peer that never
answers times the call out and closes the link, and an answered call's timer is gone (no
late failure of the next call)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from actors.broker_link import BrokerLink
from actors.listener import KafkaListener
from controller.layout import Endpoint
from protocol.build import build_request
from tests.fake_broker_api import FakeBrokerApi

pytestmark = pytest.mark.unit


def api_versions():
    return build_request(18, 3, None, client_software_name="rayka-test",
                         client_software_version="1")


@pytest.fixture
def listener():
    api = FakeBrokerApi()
    api.add_broker(1, PLAINTEXT=("127.0.0.1", 0))
    served = KafkaListener(Endpoint("PLAINTEXT", "127.0.0.1", 0), api, 1 << 20, 60_000)
    served.start()
    yield served
    served.stop()


def test_an_answered_call_leaves_no_timer_behind(listener):
    async def run():
        link = BrokerLink("broker-2-fetcher")
        await link.connect(Endpoint("PLAINTEXT", "127.0.0.1", listener.port, "PLAINTEXT"))
        first = await link.call(api_versions(), 0.3)
        await asyncio.sleep(0.5)               # past the first call's timeout
        second = await link.call(api_versions(), 5)
        connected = link.connected
        link.close()
        return first, second, connected

    first, second, connected = asyncio.run(run())
    assert first.error_code.value == 0 and second.error_code.value == 0 and connected


def test_a_peer_that_never_answers_times_the_call_out_and_closes_the_link():
    with socket.socket() as mute:              # accepts (the backlog) and never reads
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        port = mute.getsockname()[1]

        async def run():
            link = BrokerLink("broker-2-fetcher")
            await link.connect(Endpoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"))
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            with pytest.raises(TimeoutError):
                await link.call(api_versions(), 0.2)
            return loop.time() - t0, link.connected

        waited_s, connected = asyncio.run(run())
    assert 0.2 <= waited_s < 5 and not connected


def test_send_hears_its_answer_inside_the_data_callback_and_a_timeout_closes(listener):
    with socket.socket() as mute:              # accepts (the backlog) and never reads
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)

        async def run():
            loop = asyncio.get_running_loop()
            heard = []
            link = BrokerLink("broker-2-fetcher")
            await link.connect(Endpoint("PLAINTEXT", "127.0.0.1", listener.port, "PLAINTEXT"))
            answered = loop.create_future()

            def on_done(answer, exc):
                heard.append((asyncio.current_task(), answer, exc))
                answered.set_result(None)
            link.send(api_versions(), 5, on_done)
            await answered
            await link.connect(Endpoint("PLAINTEXT", "127.0.0.1", mute.getsockname()[1],
                                        "PLAINTEXT"))
            timed_out = loop.create_future()
            link.send(api_versions(), 0.2, lambda answer, exc: timed_out.set_result(exc))
            return heard, await timed_out, link.connected

        heard, exc, connected = asyncio.run(run())
    [(task, answer, error)] = heard
    assert task is None and error is None and answer.error_code.value == 0
    assert isinstance(exc, TimeoutError) and not connected
