"""Draws docs/architecture.png: rayka's rooms, the control path and the data path.

Every module named in the picture is listed in ROOMS, CONTROL and DATA below;
tests/test_docs.py checks that each exists in the tree (or is marked reserved), so the
picture cannot silently drift from the code. Re-draw after a change:

    .venv/bin/python docs/architecture.py
"""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).with_name("architecture.png")

# (room, modules shown, reserved?) top to bottom: an import only ever points down this list
ROOMS = [
    ("bench/  tests/", ["bench/run_all.py", "tests/conftest.py"], False),
    ("pipeline/  (Spark on Ray)", ["pipeline/source.py", "pipeline/reader.py", "pipeline/sink.py"], False),
    ("rayka/  (driver API, CLI, chaos, ops)", ["rayka/cli.py", "rayka/chaos/", "rayka/ops/",
                                               "rayka/cluster.py", "rayka/client/"], False),
    ("actors/  (shells, Ray actors)", ["actors/broker.py", "actors/listener.py",
                                      "actors/fetcher.py", "actors/purgatory.py",
                                      "actors/kafka_api.py"], False),
    ("protocol/  (Kafka wire, sans-I/O)", ["protocol/connection.py", "protocol/codec.py",
                                           "protocol/handlers/", "protocol/api.py"], False),
    ("coordinator/  (consumer groups, pure)", ["coordinator/coordinator.py", "coordinator/group.py",
                                              "coordinator/storage.py", "coordinator/records.py"], False),
    ("controller/zookeeper/  (kazoo, ZooKeeper server)", ["controller/zookeeper/store.py",
                                                         "controller/zookeeper/server.py"], False),
    ("controller/  (pure controller core)", ["controller/controller.py",
                                             "controller/partition_state_machine.py",
                                             "controller/layout.py"], False),
    ("replicas/  (pure storage + replication)", ["replicas/replica_manager.py", "replicas/log.py",
                                                 "replicas/partition_state.py",
                                                 "replicas/cleaner.py"], False),
]
RESERVED_MODULES: set[str] = set()

CONTROL = [
    ("ZooKeeper", "/brokers/ids\n/brokers/topics\n/controller(_epoch)", "(real server)"),
    ("watch → event", "ZkStore watches\nenqueue BrokerChange,\nTopicChange ...",
     "controller/zookeeper/store.py"),
    ("one event thread", "process(event):\nstate machines, elections,\nfenced ZK writes",
     "controller/controller.py"),
    ("request batch", "LeaderAndIsr →\nUpdateMetadata →\nStopReplica per broker",
     "controller/requests.py"),
    ("Ray call", "a sender thread per\nbroker, retried while\nthe broker lives",
     "actors/channel.py"),
    ("broker applies", "become leader or\nfollower, truncate\nby leader epoch",
     "replicas/replica_manager.py"),
]
DATA = [
    ("produce", "Kafka Produce on the\nbroker's event loop\n(native: a Ray call)",
     "actors/listener.py"),
    ("leader append", "check CRC, stamp\noffsets + leader epoch,\nappend to the segment",
     "replicas/log.py"),
    ("follower fetch", "Kafka Fetch on a socket\n+ fetch session; woken\nby the append",
     "actors/fetcher.py"),
    ("HW advances", "every ISR member\ncaught up: the high\nwatermark moves",
     "replicas/partition_state.py"),
    ("ack", "the parked acks=all\nproduce completes,\nanswers in order",
     "actors/produce.py"),
    ("consume", "fetch from the leader,\nonly below the HW;\nparked until data",
     "actors/purgatory.py"),
]


def modules() -> set[str]:
    """Every path the picture names (rooms, control and data path)."""
    out = {m for _, mods, _ in ROOMS for m in mods}
    return out | {m for *_, m in CONTROL + DATA if "/" in m}


def draw(path: Path = OUT) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig = plt.figure(figsize=(17, 10.5), dpi=100)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 170)
    ax.set_ylim(0, 105)
    ax.axis("off")
    ax.text(2, 101.5, "rayka: rooms, control path, data path", fontsize=17, weight="bold")

    # -- rooms (left) -------------------------------------------------------------------------
    ax.text(2, 96.5, "Rooms (top → bottom: imports only point down)", fontsize=12, weight="bold")
    top, h, gap = 93, 9.3, 0.9
    for i, (room, mods, reserved) in enumerate(ROOMS):
        y = top - (i + 1) * h - i * gap + gap
        style = dict(boxstyle="round,pad=0.3", linewidth=1.4,
                     edgecolor="#777" if reserved else "#2b5797",
                     facecolor="#f4f4f4" if reserved else "#e8f0fb",
                     linestyle="--" if reserved else "-")
        ax.add_patch(FancyBboxPatch((2, y), 62, h - 0.6, **style))
        ax.text(3.5, y + h - 3.0, room + ("   — reserved" if reserved else ""), fontsize=10.5,
                weight="bold", color="#555" if reserved else "#1d3d6b")
        shown = "  ".join(m.split("/", 1)[1] or m for m in mods if m not in RESERVED_MODULES)
        shown += "".join(f"  [{m.split('/', 1)[1]} reserved]" for m in mods if m in RESERVED_MODULES)
        ax.text(3.5, y + 1.3, shown, fontsize=8.2, family="monospace", color="#333")

    # -- a path of steps (right) --------------------------------------------------------------
    def path_row(steps, y, title, color):
        ax.text(70, y + 15.5, title, fontsize=12, weight="bold", color=color)
        w, x0 = 15.0, 70
        for i, (name, what, module) in enumerate(steps):
            x = x0 + i * (w + 1.6)
            ax.add_patch(FancyBboxPatch((x, y), w, 13, boxstyle="round,pad=0.3",
                                        linewidth=1.4, edgecolor=color, facecolor="white"))
            ax.text(x + w / 2, y + 10.8, name, ha="center", fontsize=10, weight="bold", color=color)
            ax.text(x + w / 2, y + 6.2, what, ha="center", va="center", fontsize=7.4, linespacing=1.25)
            ax.text(x + w / 2, y + 0.9, module.replace("/", "/\n", 1) if len(module) > 24 else module,
                    ha="center", fontsize=7.0, family="monospace", color="#444")
            if i:
                ax.add_patch(FancyArrowPatch((x - 1.6, y + 6.5), (x - 0.2, y + 6.5),
                                             arrowstyle="-|>", mutation_scale=14, color=color))

    path_row(CONTROL, 70, "Control path: ZooKeeper → controller → LeaderAndIsr → brokers "
             "(Ray calls)", "#a0522d")
    path_row(DATA, 38, "Data path (sockets, Kafka's protocol): produce → append → follower "
             "fetch → HW → ack → consume", "#2e7d32")

    notes = [
        "• Only controller/zookeeper/ imports kazoo; replicas/, controller/, protocol/, "
        "coordinator/ never import ray and take a clock.",
        "• Shells (actors/) perform the effects the pure core returns: persist before send.",
        "• Leadership is fenced by ZooKeeper epochs (controller epoch, leader epoch), never by "
        "Ray liveness.",
        "• One event loop per broker (actors/listener.py) carries clients, follower fetchers and",
        "   timers; protocol/ turns frames into calls on the broker (actors/kafka_api.py).",
        "• A group's coordinator is the broker leading its __consumer_offsets partition",
        "   (actors/group_host.py runs coordinator/); commits are acks=all records there.",
        "• Spark tasks (pipeline/reader.py) fetch from the leader on their own node; "
        "rayka demo finds pipeline.demo via an entry point.",
    ]
    for i, line in enumerate(notes):
        ax.text(70, 29 - i * 3.3, line, fontsize=9.4)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


if __name__ == "__main__":
    draw()
    print(f"wrote {OUT}")
