"""`rayka demo` (storage stage): three replicas of one partition on real files.

What it shows, end to end, with the pieces that exist today:
- a real ZooKeeper server started from the Debian jars on loopback (and stopped by pid);
- a leader appending acks=all batches, two followers pulling whole batches, the pure
  replication state machine moving the HW and completing the acks=all produces;
- the leader dying with an unacknowledged batch and a torn write at its log's tail;
- a new leader in a new epoch; the old one restarting: crash recovery cuts the torn
  tail, leader-epoch truncation drops the unacknowledged batch, it catches up and
  rejoins the ISR;
- a check that every acknowledged record is present and all three logs are
  byte-identical up to the HW.
The Ray broker actors and the controller replace the hand-driven steps in later stages.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from rayka.zookeeper import ZooKeeperServer
from replicas import partition_state as ps
from replicas import records
from replicas.checkpoints import recovery_point_checkpoint
from replicas.epoch_cache import UNDEFINED_EPOCH, follower_truncation
from replicas.log import Log, LogConfig

TOPIC, PARTITION = "clicks", 0
BROKERS = (1, 2, 3)
CONFIG = LogConfig(segment_bytes=8 << 20)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class Broker:
    id: int
    data_dir: Path
    log: Log = field(init=False)
    state: ps.PartitionState = field(init=False)

    def __post_init__(self):
        self.open()

    def open(self) -> None:
        rp = recovery_point_checkpoint(self.data_dir).read().get((TOPIC, PARTITION), 0)
        self.log = Log(self.data_dir / f"{TOPIC}-{PARTITION}", CONFIG, recovery_point=rp)
        self.state = ps.PartitionState(TOPIC, PARTITION, self.id, ps.PartitionConfig(
            min_insync_replicas=2, replica_lag_time_max_ms=10_000))

    def checkpoint(self) -> None:
        self.log.flush()
        recovery_point_checkpoint(self.data_dir).write({(TOPIC, PARTITION): self.log.recovery_point})


class Demo:
    def __init__(self, data_dir: Path):
        self.brokers = {b: Broker(b, data_dir / f"broker-{b}") for b in BROKERS}
        self.leader, self.epoch, self.isr = 1, 0, [1, 2, 3]
        self.acked: dict[int, bytes] = {}      # offset -> value of acknowledged records
        self.pending: dict[int, list[bytes]] = {}
        self.request_ids = itertools.count()

    def elect(self, leader: int, isr: list[int], epoch: int) -> None:
        self.leader, self.isr, self.epoch = leader, isr, epoch
        lead = self.brokers[leader]
        lead.log.epoch_cache.assign(self.epoch, lead.log.log_end_offset)
        lead.state.process(ps.BecomeLeader(list(BROKERS), isr, self.epoch, self.epoch,
                                           lead.log.log_end_offset, lead.state.high_watermark,
                                           now_ms()))
        for b in isr:
            if b != leader:
                self.become_follower(b)

    def become_follower(self, b: int) -> int:
        f, lead = self.brokers[b], self.brokers[self.leader]
        f.state.process(ps.BecomeFollower(self.leader, self.epoch, self.epoch, list(BROKERS),
                                          self.isr, f.log.log_end_offset, f.state.high_watermark,
                                          now_ms()))
        dropped = 0
        while f.log.latest_epoch != UNDEFINED_EPOCH:       # KIP-279: ask, truncate, repeat
            epoch, end = lead.log.epoch_cache.end_offset_for(f.log.latest_epoch,
                                                             lead.log.log_end_offset)
            decision = follower_truncation(f.log.epoch_cache, f.log.log_end_offset, epoch, end,
                                           f.state.high_watermark)
            before = f.log.log_end_offset
            f.log.truncate_to(decision.offset)
            dropped += before - f.log.log_end_offset
            if decision.completed:
                break
        f.state.process(ps.TruncationCompleted(f.log.log_end_offset))
        return dropped

    def produce(self, values: list[bytes], replicate_to: list[int]) -> None:
        lead = self.brokers[self.leader]
        if lead.state.check_append(ps.ACKS_ALL) != ps.NONE:
            raise RuntimeError("not enough in-sync replicas")
        info = lead.log.append_as_leader(records.build_batch(values, timestamps_ms=now_ms()),
                                         self.epoch)
        request = next(self.request_ids)
        self.pending[request] = (info.first_offset, values)
        self.apply(lead.state.process(ps.LeaderAppended(lead.log.log_end_offset, now_ms())))
        self.apply(lead.state.process(ps.DelayedProduce(request, info.last_offset + 1,
                                                        now_ms() + 30_000)))
        for b in replicate_to:
            self.fetch(b)

    def fetch(self, b: int) -> None:
        f, lead = self.brokers[b], self.brokers[self.leader]
        data = lead.log.read(f.log.log_end_offset, 4 << 20)
        if data:
            f.log.append_as_follower(data)
        effects = lead.state.process(ps.FollowerFetched(b, f.log.log_end_offset, now_ms()))
        self.apply(effects)
        f.state.process(ps.FollowerFetchResponse(f.log.log_end_offset, lead.state.high_watermark))

    def apply(self, effects) -> None:
        """Carry out the leader's effects: completions, and the controller's ISR answer."""
        lead = self.brokers[self.leader]
        for effect in effects:
            if isinstance(effect, ps.ProduceCompleted) and effect.error == ps.NONE:
                first, values = self.pending.pop(effect.request_id)
                self.acked.update(zip(range(first, first + len(values)), values))
            elif isinstance(effect, ps.ProposeIsr):
                self.isr = list(effect.isr)
                self.apply(lead.state.process(ps.AlterPartitionResponse(
                    effect.isr, effect.leader_epoch, effect.partition_epoch + 1)))


def run(records_total: int = 300_000, batch_records: int = 5_000, console: Console | None = None,
        keep: bool = False) -> dict:
    console = console or Console()
    base = Path(tempfile.mkdtemp(prefix="rayka-demo-"))
    zk = ZooKeeperServer().start()
    try:
        console.print(f"ZooKeeper {zk.mode()} at {zk.connect_string} (pid {zk.pid}); data in {base}")
        demo = Demo(base)
        demo.elect(1, [1, 2, 3], epoch=0)
        value = lambda i: (b"click-%09d|" % i).ljust(100, b".")  # noqa: E731
        n_batches = records_total // batch_records
        crash_at = n_batches * 2 // 3
        counter = itertools.count()
        started = time.perf_counter()
        for i in tqdm(range(n_batches), desc="produce acks=all", unit="batch"):
            if i == crash_at:
                # broker 1 appends a batch nobody fetches, then dies mid-write
                demo.produce([value(next(counter)) for _ in range(batch_records)], replicate_to=[])
                demo.brokers[1].checkpoint()
                unacked_on_1 = demo.brokers[1].log.log_end_offset - max(demo.acked) - 1
                demo.brokers[1].log.close()
                segment = sorted((base / "broker-1" / f"{TOPIC}-{PARTITION}").glob("*.log"))[-1]
                with open(segment, "ab") as torn:
                    torn.write(bytes(records.build_batch([b"torn"] * 50, timestamps_ms=0))[:400])
                demo.elect(2, [2, 3], epoch=1)
            demo.produce([value(next(counter)) for _ in range(batch_records)],
                         replicate_to=[3] if i >= crash_at else [2, 3])
        elapsed = time.perf_counter() - started
        # broker 1 restarts: recovery from disk, epoch truncation, catch-up, ISR rejoin
        demo.brokers[1].open()
        recovery = demo.brokers[1].log.recovery
        dropped = demo.become_follower(1)
        for _ in range(1000):
            demo.fetch(1)
            if demo.brokers[1].log.log_end_offset == demo.brokers[2].log.log_end_offset and 1 in demo.isr:
                break
        demo.fetch(3)
        hw = demo.brokers[demo.leader].state.high_watermark
        leader_log = demo.brokers[demo.leader].log
        stored = {r.offset: r.value for chunk in leader_log.iter_reads(0, hw)
                  for r in records.decode_records(chunk)}
        lost = sum(1 for o, v in demo.acked.items() if stored.get(o) != v)
        identical = len({b"".join(demo.brokers[b].log.iter_reads(0, hw)) for b in BROKERS}) == 1
        summary = {
            "records_acknowledged": len(demo.acked), "high_watermark": hw,
            "lost": lost, "replicas_identical_to_hw": identical,
            "torn_bytes_cut_on_recovery": recovery.truncated_bytes,
            "recovery_found": recovery.reason,
            "unacked_records_dropped_by_epoch_truncation": dropped,
            "unacked_records_on_dead_leader": unacked_on_1,
            "isr": sorted(demo.isr), "leader": demo.leader, "leader_epoch": demo.epoch,
            "produce_records_per_s": round(len(demo.acked) / elapsed),
        }
        table = Table(title="rayka storage demo: clicks-0, RF 3, min ISR 2")
        table.add_column("measure")
        table.add_column("value", justify="right")
        for k, v in summary.items():
            table.add_row(k.replace("_", " "), str(v))
        console.print(table)
        if lost or not identical or dropped != unacked_on_1 or recovery.truncated_bytes != 400:
            raise SystemExit("demo check FAILED: " + str(summary))
        console.print("[bold green]OK[/]: every acknowledged record survived; replicas identical to the HW")
        return summary
    finally:
        zk.stop()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
