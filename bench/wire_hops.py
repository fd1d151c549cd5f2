"""Where an acks=all produce's time goes between the brokers, read off the wire: every
Kafka frame on the loopback interface, timed by the kernel, while bench/wire_bench.py's
paced run loads a settled system (bench/systems.py: rayka or Kafka 3.9, same client).

Rules:
1. Capture (root only: an AF_PACKET socket on `lo`): each TCP segment once, as it leaves
   its sender (PACKET_OUTGOING), with the kernel's receive timestamp (SO_TIMESTAMPNS), and
   only segments to or from the brokers' listening ports; the kernel keeps RCVBUF_B for
   the reading thread and counts what it drops (`dropped`).
2. Frames: a connection's segments in sequence order make its byte stream; a Kafka frame
   (4-byte size, then the body) is timed by the segment holding its first byte (`start`)
   and the one holding its last (`end`). A capture that begins inside a frame, or goes on
   after a hole (segments dropped), skips to the next segment that starts a plausible one
   (the first frame taken must end where a segment does). A request's header names its API, version,
   correlation id and client id; an answer is paired with its request by correlation id.
3. Hops of one Produce (from a client that is no broker) to leader L, in ms:
   - `to_first_follower`, `to_last_follower`: from the Produce's end to the start of the
     first answer to each follower's Fetch on L that carries records (at least RECORDS_B:
     the workload's values are 100 B);
   - `follower_turn`: from such an answer's end to that follower's next Fetch's end (the
     follower appends and asks again: its new end offset is what moves L's HW);
   - `last_fetch_to_ack`: from the later of those next Fetches to the Produce answer's start;
   - `leader_total`: from the Produce's end to its answer's start.
   A Produce whose hops cannot all be found (an answer the heuristic misses, a leader
   that was busy with another record) is counted as unmatched, not guessed.
4. Out (`--out`, and a line per run; `--keep DIR` keeps each run's packets): per run and
   system the p10/p50/p90 of each hop (nearest rank: a time some Produce took), how many
   Produces matched out of how many, and the paced window's own facts as the settle
   windows give them (bench/settle.py window_facts: ack p50/p99, broker CPU per record,
   the machine's busy share).

Example: `.venv/bin/python bench/wire_hops.py --systems rayka,kafka --rate 200 --runs 3`
(`--linger 2`: the producer's linger.ms, 0 unless said).
"""

from __future__ import annotations

import argparse
import bisect
import json
import pickle
import re
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ETH_P_ALL, PACKET_OUTGOING, SO_TIMESTAMPNS, SO_RCVBUFFORCE = 0x0003, 4, 35, 33
SOL_PACKET, PACKET_STATISTICS = 263, 6
RCVBUF_B = 64 << 20             # the kernel keeps this much capture for the reading thread
PRODUCE, FETCH = 0, 1
RECORDS_B = 200                 # an answer with a batch of one 100 B value is at least this big;
#                                 one with only marks (HW, log start) of 2 partitions is smaller
FETCHER = re.compile(r"broker-\d+-fetcher(-\d+)?")   # rayka's, Kafka's (thread 0)
HOPS = ("to_first_follower", "to_last_follower", "follower_turn", "last_fetch_to_ack",
        "leader_total")


@dataclass
class Frame:
    start: float                # s, kernel time of the segment with its first byte
    end: float                  # s, of the segment with its last byte
    size: int
    body: bytes                 # the first bytes of the body: enough for a request header


@dataclass
class Exchange:
    """A request and its answer on one connection (`server` is the broker's port)."""
    conn: tuple
    server: int
    api_key: int
    client_id: str
    request: Frame
    answer: Frame | None = None


@dataclass
class Stream:
    segments: list = field(default_factory=list)      # (seq, ts, payload)


class Sniffer:
    """Rule 1: `start()`, then `stop()` returns [(ts, src, dst, seq, payload)]."""

    def __init__(self, ports: set[int], iface: str = "lo"):
        self.ports = ports
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_B)
        self.sock.bind((iface, 0))
        self.sock.settimeout(0.2)
        self.packets: list = []
        self.dropped = 0                # what the kernel could not keep (rule 2's holes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wire-hops", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list:
        self._stop.set()
        self._thread.join()
        _packets, self.dropped = struct.unpack("II", self.sock.getsockopt(
            SOL_PACKET, PACKET_STATISTICS, 8))
        self.sock.close()
        return self.packets

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data, anc, _flags, addr = self.sock.recvmsg(1 << 17, 64)
            except socket.timeout:
                continue
            if addr[2] != PACKET_OUTGOING:
                continue
            got = parse_packet(data, self.ports)
            if got is None:
                continue
            ts = None
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    ts = sec + nsec / 1e9
            if ts is not None:
                self.packets.append((ts, *got))


def parse_packet(data: bytes, ports: set[int]):
    """(src, dst, seq, payload) of an IPv4 TCP segment with a payload touching `ports`."""
    if len(data) < 54 or data[12:14] != b"\x08\x00" or data[23] != socket.IPPROTO_TCP:
        return None
    ihl = (data[14] & 0x0F) * 4
    total = struct.unpack_from("!H", data, 16)[0]
    tcp = 14 + ihl
    sport, dport, seq = struct.unpack_from("!HHI", data, tcp)
    if sport not in ports and dport not in ports:
        return None
    payload = data[tcp + (data[tcp + 12] >> 4) * 4:14 + total]
    if not payload:
        return None
    src, dst = (socket.inet_ntoa(data[26:30]), sport), (socket.inet_ntoa(data[30:34]), dport)
    return src, dst, seq, bytes(payload)


def frames_of(segments: list) -> list[Frame]:
    """Rule 2's frames of one direction of a connection: segments [(seq, ts, payload)]. A
    hole (segments the capture lost) is a new start: no frame spans it."""
    segments = sorted(segments, key=lambda s: (s[0] - segments[0][0]) % (1 << 32))
    base = segments[0][0]
    stream, marks, holes, done = bytearray(), [], [], 0   # marks: (stream end, ts)
    for seq, ts, payload in segments:
        at = (seq - base) % (1 << 32)                     # done: the sequence offset reached
        if at + len(payload) <= done:
            continue                                      # a retransmission
        if at > done:
            holes.append(len(stream))
        stream += payload[done - at:] if at < done else payload
        done = at + len(payload)
        marks.append((len(stream), ts))
    out, pos, m, fresh = [], 0, 0, True                   # fresh: the first frame of a run
    starts = sorted({0} | {end for end, _ in marks[:-1]})
    ends = {end for end, _ in marks}
    while pos + 4 <= len(stream):
        size = struct.unpack_from("!i", stream, pos)[0]
        last = pos + 4 + size - 1
        hole = next((h for h in holes if pos < h <= last), None) if 0 < size < 1 << 27 else None
        if hole is not None:
            pos, fresh = hole, True
            continue
        if not 0 < size < 1 << 27 or (fresh and last + 1 not in ends):
            # mid-frame (a run's first frame must end where a write did): the next segment
            pos = next((st for st in starts if st > pos), len(stream))
            continue
        if last >= len(stream):
            break
        while marks[m][0] <= pos:
            m += 1
        first_mark = m
        while marks[m][0] <= last:
            m += 1
        out.append(Frame(marks[first_mark][1], marks[m][1], size,
                         bytes(stream[pos + 4:pos + 4 + min(size, 64)])))
        pos, fresh = last + 1, False
    return out


def exchanges(packets: list, ports: set[int]) -> list[Exchange]:
    """Rule 2's pairs, every connection's, in request order."""
    streams: dict[tuple, Stream] = {}
    for ts, src, dst, seq, payload in packets:
        streams.setdefault((src, dst), Stream()).segments.append((seq, ts, payload))
    out = []
    for (src, dst), stream in streams.items():
        if dst[1] not in ports or src[1] in ports:
            continue                                      # not client → broker
        asked = {}
        for f in frames_of(stream.segments):
            if len(f.body) < 10:
                continue
            api_key, _version, corr, n = struct.unpack_from("!hhih", f.body, 0)
            client_id = f.body[10:10 + max(n, 0)].decode("latin-1")
            asked[corr] = Exchange((src, dst), dst[1], api_key, client_id, f)
        back = streams.get((dst, src))
        for f in frames_of(back.segments) if back else ():
            got = asked.get(struct.unpack_from("!i", f.body, 0)[0]) if len(f.body) >= 4 else None
            if got is not None and got.answer is None:
                got.answer = f
        out += asked.values()
    return sorted(out, key=lambda e: e.request.end)


def produce_hops(ex: list[Exchange]) -> tuple[list[dict], int]:
    """Rule 3: the hops of every matched Produce, and how many Produces there were."""
    follower_fetches: dict[int, dict[tuple, list]] = {}
    for e in ex:
        if e.api_key == FETCH and FETCHER.fullmatch(e.client_id) and e.answer is not None:
            follower_fetches.setdefault(e.server, {}).setdefault(e.conn, []).append(e)
    produces = [e for e in ex if e.api_key == PRODUCE and not FETCHER.fullmatch(e.client_id)
                and not e.client_id.startswith("broker-") and e.answer is not None]
    # per connection, its answers' start times (in request order, so ascending)
    starts = {conn: [f.answer.start for f in fs]
              for by_conn in follower_fetches.values() for conn, fs in by_conn.items()}
    out = []
    for p in produces:
        t_in, t_out = p.request.end, p.answer.start
        answers, nexts = [], []
        for conn, fs in follower_fetches.get(p.server, {}).items():
            i = next((i for i in range(bisect.bisect_right(starts[conn], t_in), len(fs))
                      if fs[i].answer.size >= RECORDS_B), None)
            if i is None or i + 1 >= len(fs) or fs[i].answer.start > t_out:
                continue                      # a connection of no follower of this record
            answers.append(fs[i].answer)
            nexts.append(fs[i + 1].request)
        if len(answers) < 2:
            continue
        last_fetch = max(n.end for n in nexts)
        if last_fetch > t_out:
            continue
        first, last = min(a.start for a in answers), max(a.start for a in answers)
        out.append({"to_first_follower": first - t_in, "to_last_follower": last - t_in,
                    "follower_turn": [n.end - a.end for a, n in zip(answers, nexts)],
                    "last_fetch_to_ack": t_out - last_fetch, "leader_total": t_out - t_in})
    return out, len(produces)


def summary(hops: list[dict], produces: int) -> dict:
    def pct(xs, q):
        xs = sorted(xs)
        return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 3) if xs else None
    out = {"produces": produces, "matched": len(hops)}
    for name in HOPS:
        xs = [x for h in hops for x in (h[name] if isinstance(h[name], list) else [h[name]])]
        out[name] = {"p10": pct(xs, 0.1), "p50": pct(xs, 0.5), "p90": pct(xs, 0.9)}
    return out


def listening_ports(pids) -> set[int]:
    import psutil
    return {c.laddr.port for pid in pids for c in psutil.Process(pid).net_connections("tcp")
            if c.status == psutil.CONN_LISTEN}


def measure(system, rate: int, duration_s: float, keep: Path | None = None,
            linger_ms: float = 0) -> dict:
    from bench.settle import window_facts
    from bench.versus_data import PARTITIONS, TIMEOUT_S, latency_once
    ports = listening_ports(system.broker_pids().values())
    topic = system.fresh_topic("vs-hops", PARTITIONS, TIMEOUT_S)
    sniffer = Sniffer(ports)
    sniffer.start()
    try:
        got = latency_once(system, topic, rate, duration_s, linger_ms)
    finally:
        packets = sniffer.stop()
        system.delete_topic(topic)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        with open(keep / f"{system.name}-{time.time():.0f}.pkl", "wb") as f:
            pickle.dump({"ports": ports, "packets": packets}, f)
    hops, produces = produce_hops(exchanges(packets, ports))
    return {**summary(hops, produces), **window_facts(got), "packets": len(packets),
            "dropped": sniffer.dropped}


def main(argv=None) -> None:
    from bench.settle import settle
    from bench.systems import open_system
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="rayka,kafka")
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--linger", type=float, default=0.0, help="the producer's linger.ms")
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--settle-s", type=float, default=240.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", type=Path, help="a directory for each run's packets (pickle)")
    args = ap.parse_args(argv)
    results = {}
    for name in args.systems.split(","):
        with open_system(name) as system:
            settle(system, max_s=args.settle_s)
            results[name] = []
            for _ in range(args.runs):
                results[name].append(measure(system, args.rate, args.duration, args.keep,
                                             args.linger))
                print(name, json.dumps(results[name][-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"rate": args.rate, "linger_ms": args.linger,
                                        "duration_s": args.duration,
                                        "runs": results}, indent=1))


if __name__ == "__main__":
    main()
