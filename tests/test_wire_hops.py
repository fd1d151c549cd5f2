"""bench/wire_hops.py's reading of captured segments (no capture, no broker): frames
reassembled and timed, requests paired with answers, and a Produce's hops between the
brokers found, against a hand-made timeline."""

import struct

import pytest

from bench.wire_hops import exchanges, frames_of, produce_hops, summary

LEADER = ("127.0.0.1", 9092)


def request(api_key: int, corr: int, client_id: str, pad: int = 20) -> bytes:
    body = struct.pack("!hhih", api_key, 12, corr, len(client_id)) + client_id.encode() + bytes(pad)
    return struct.pack("!i", len(body)) + body


def answer(corr: int, size: int) -> bytes:
    return struct.pack("!ii", size, corr) + bytes(size - 4)


class Wire:
    """Segments as the sniffer keeps them: (ts, src, dst, seq, payload)."""

    def __init__(self):
        self.packets, self.seq = [], {}

    def send(self, ts: float, src, dst, data: bytes, split: int = 0):
        at = self.seq.setdefault((src, dst), 1000)
        parts = [data[:split], data[split:]] if split else [data]
        for i, part in enumerate(parts):
            self.packets.append((ts + i * 0.0001, src, dst, at, part))
            at += len(part)
        self.seq[(src, dst)] = at

    def fetches(self, port: int, client_id: str, timeline):
        """timeline: (request end, answer start, answer size) per fetch."""
        me = ("127.0.0.1", port)
        for corr, (t_req, t_ans, size) in enumerate(timeline):
            self.send(t_req, me, LEADER, request(1, corr, client_id))
            self.send(t_ans, LEADER, me, answer(corr, size))


def test_frames_are_timed_by_their_first_and_last_segment_and_a_mid_frame_start_is_skipped():
    one, two = request(0, 1, "rdkafka", pad=300), request(0, 2, "rdkafka")
    segments = [(100, 0.5, b"tail of a frame begun before the capture"),
                (100 + 40, 1.0, one[:100]), (100 + 140, 1.2, one[100:]),
                (100 + 140, 1.2, one[100:]),                # a retransmission
                (100 + 40 + len(one), 2.0, two)]
    got = frames_of(segments)
    assert [(f.start, f.end, f.size) for f in got] == [(1.0, 1.2, len(one) - 4),
                                                       (2.0, 2.0, len(two) - 4)]


def test_no_frame_spans_a_hole_the_capture_left():
    one, two, three = (request(0, i, "rdkafka") for i in (1, 2, 3))
    lost = len(two) // 2                                   # the capture missed two's middle
    segments = [(100, 1.0, one), (100 + len(one), 2.0, two[:lost]),
                (100 + len(one) + len(two), 3.0, three)]
    got = frames_of(segments)
    assert [(f.start, f.size) for f in got] == [(1.0, len(one) - 4), (3.0, len(three) - 4)]


def test_a_produce_hops_follow_the_follower_fetches_of_its_leader():
    w = Wire()
    # rayka's and Kafka's fetcher client ids; an empty answer (20 B), then the record's
    w.fetches(5001, "broker-2-fetcher", [(0.0, 0.001, 20), (0.0012, 1.0006, 240),
                                         (1.0010, 1.5, 20)])
    w.fetches(5002, "broker-3-fetcher-0", [(0.0, 0.001, 20), (0.0013, 1.0007, 240),
                                           (1.0012, 1.5, 20)])
    producer = ("127.0.0.1", 6000)
    w.send(1.0000, producer, LEADER, request(0, 7, "rdkafka"), split=10)
    w.send(1.0015, LEADER, producer, answer(7, 30))
    ex = exchanges(w.packets, {LEADER[1]})
    assert sorted((e.api_key, e.client_id, e.answer is not None) for e in ex)[0] == \
        (0, "rdkafka", True)
    hops, produces = produce_hops(ex)
    assert produces == 1 and len(hops) == 1
    h = hops[0]
    assert h["to_first_follower"] == pytest.approx(0.0005)      # from the produce's end
    assert h["to_last_follower"] == pytest.approx(0.0006)
    assert h["follower_turn"] == pytest.approx([0.0004, 0.0005])
    assert h["last_fetch_to_ack"] == pytest.approx(0.0003)
    assert h["leader_total"] == pytest.approx(0.0014)
    s = summary(hops, produces)
    assert s["matched"] == 1 and s["follower_turn"]["p50"] == pytest.approx(0.5)


def test_a_produce_whose_follower_answer_carries_no_records_is_not_matched():
    w = Wire()
    for port, cid in ((5001, "broker-2-fetcher"), (5002, "broker-3-fetcher")):
        w.fetches(port, cid, [(0.0, 0.001, 20), (0.0012, 1.0006, 40), (1.0010, 1.5, 20)])
    producer = ("127.0.0.1", 6000)
    w.send(1.0000, producer, LEADER, request(0, 7, "rdkafka"))
    w.send(1.0015, LEADER, producer, answer(7, 30))
    assert produce_hops(exchanges(w.packets, {LEADER[1]})) == ([], 1)
