"""The `ray up` configs (cluster.yaml on AWS, cluster-onprem.yaml with the local provider)
pass Ray's own offline validation (prepare_config + validate_config: the JSON schema and the
launcher's checks, no network, no cloud account), place one broker per worker through the
`rayka_broker` resource, and start ZooKeeper and rayka with the project's own commands.
A broken copy fails the same validation, so the check is real."""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from click import ClickException
from jsonschema import ValidationError
from ray.autoscaler._private.util import prepare_config, validate_config

from rayka.cli import build_parser

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ["cluster.yaml", "cluster-onprem.yaml"]


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def validated(cfg: dict) -> dict:
    prepared = prepare_config(copy.deepcopy(cfg))
    validate_config(prepared)
    return prepared


HEAD_IP = '$(hostname -I | cut -d" " -f1)'      # what the head's shell substitutes


def rayka_commands(commands) -> list[list[str]]:
    """argv of every `rayka ...` invocation in a list of shell commands (`sh -c` loops
    included), with the head-address substitution done as the shell would."""
    out = []
    for cmd in commands:
        cmd = cmd.replace(HEAD_IP, "10.0.0.1")
        text = " ; ".join(re.findall(r"sh -c '([^']*)'", cmd)) or cmd
        for part in re.split(r";|&&|\|\||\buntil\b|\bdo\b", text):
            words = shlex.split(part)
            if words[:1] == ["rayka"]:
                out.append(words)
    return out


@pytest.mark.parametrize("name", CONFIGS)
def test_config_passes_rays_validation(name):
    prepared = validated(load(name))
    assert prepared["cluster_name"] == "rayka"
    for key in ("setup_commands", "head_start_ray_commands", "worker_start_ray_commands"):
        assert prepared[key], key


def test_aws_config_node_types_and_resources():
    cfg = load("cluster.yaml")
    assert cfg["provider"]["type"] == "aws" and cfg["provider"]["region"] == "us-west-2"
    prepared = validated(cfg)
    types = prepared["available_node_types"]
    head = types[prepared["head_node_type"]]
    broker = types["rayka_broker_node"]
    assert broker["min_workers"] == broker["max_workers"] == 3
    assert broker["resources"] == {"rayka_broker": 1}
    assert head["resources"] == {"rayka_control": 100}
    assert prepared["max_workers"] >= 3


def test_onprem_config_puts_resources_on_ray_start():
    cfg = load("cluster-onprem.yaml")
    assert cfg["provider"]["type"] == "local" and "available_node_types" not in cfg
    assert cfg["provider"]["head_ip"] and len(cfg["provider"]["worker_ips"]) == 3
    prepared = validated(cfg)

    def resources(commands):
        found = [m for c in commands for m in re.findall(r"--resources='([^']*)'", c)]
        assert len(found) == 1, commands
        return json.loads(found[0])                        # valid JSON after YAML parsing
    assert resources(prepared["worker_start_ray_commands"]) == {"rayka_broker": 1}
    assert resources(prepared["head_start_ray_commands"]) == {"rayka_control": 100}
    assert any("--address=$RAY_HEAD_IP:6379" in c for c in prepared["worker_start_ray_commands"])


@pytest.mark.parametrize("name", CONFIGS)
def test_start_commands_run_zookeeper_then_ray_then_rayka(name):
    prepared = validated(load(name))
    head = prepared["head_start_ray_commands"]
    first = lambda needle: next(i for i, c in enumerate(head) if needle in c)   # noqa: E731
    assert first("rayka zookeeper start") < first("ray start --head") < first("rayka start ")
    assert any("--autoscaling-config=~/ray_bootstrap_config.yaml" in c for c in head)

    parser = build_parser()
    calls = rayka_commands(head)
    zk = [c for c in calls if c[1:3] == ["zookeeper", "start"]]
    start = [c for c in calls if c[1:2] == ["start"]]
    assert len(zk) == 1 and len(start) == 1, calls
    # the commands parse with the real CLI (after the shell's substitutions)
    zk_args = parser.parse_args(zk[0][1:])
    assert zk_args.daemon and zk_args.pid_file and zk_args.data_dir and zk_args.bind == "0.0.0.0"
    st = parser.parse_args(start[0][1:])
    assert st.address == "auto" and st.brokers == 3 and st.zookeeper == "10.0.0.1:2181"
    assert st.broker_resource == "rayka_broker" and st.control_resource == "rayka_control"
    # Kafka clients reach every broker on its node's port 9092
    from controller.layout import parse_endpoints
    assert parse_endpoints(st.listeners)[0].port == 9092 and "0.0.0.0" in st.listeners

    setup = " ".join(prepared["setup_commands"])
    assert "apt-get install" in setup and "openjdk-17-jre-headless" in setup and "zookeeper" in setup
    assert "rayka @ git+" in setup or "pip install -e" in setup


JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="broker" password="broker-secret";')


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_server_properties_reach_the_brokers_with_listener_keys_intact(name, listener, tmp_path):
    """The head's `rayka start` reads ~/rayka/server.properties (Kafka's format); a per-listener
    key there, and one given with --config, keeps its listener's "_" all the way to the
    broker's inter-broker credentials."""
    from actors.broker_config import split_broker_config
    from rayka.cli import start_config
    start = next(c for c in rayka_commands(validated(load(name))["head_start_ray_commands"])
                 if c[1:2] == ["start"])
    assert start[start.index("--config-file") + 1] == "~/rayka/server.properties"
    scheme = listener.lower()
    props = tmp_path / "server.properties"
    props.write_text(f"inter.broker.listener.name={listener}\n"
                     f"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
                     f"listener.name.{scheme}.scram-sha-512.sasl.jaas.config={JAAS}\n")
    argv = [str(props) if w == "~/rayka/server.properties" else w for w in start[1:]]
    argv = [a for a in argv if a not in ("--zookeeper-auth-file", "~/rayka/zookeeper.auth")]
    args = build_parser().parse_args(argv + [
        "--listeners", f"PLAINTEXT://0.0.0.0:9092,{listener}://0.0.0.0:9093",
        "--config", f"listener.name.{scheme}.sasl.enabled.mechanisms=SCRAM-SHA-512"])
    config = start_config(args)
    assert config[f"listener.name.{scheme}.scram-sha-512.sasl.jaas.config"] == JAAS
    security = split_broker_config(config).security
    assert security.inter_broker_credentials(listener) == \
        ("SCRAM-SHA-512", "broker", "broker-secret")
    assert security.mechanisms(listener) == ("SCRAM-SHA-512",)


@pytest.mark.parametrize("name", CONFIGS)
def test_commands_are_valid_shell(name):
    cfg = load(name)
    for key in ("setup_commands", "head_setup_commands", "head_start_ray_commands",
                "worker_start_ray_commands"):
        for cmd in cfg.get(key) or []:
            assert subprocess.run(["bash", "-n", "-c", f"true && ({cmd})"]).returncode == 0, cmd
            for inner in re.findall(r"sh -c ('[^']*')", cmd):
                assert subprocess.run(["sh", "-n", "-c", shlex.split(inner)[0]]).returncode == 0


# -- the validation is real: broken copies fail it ----------------------------------------------------------
def test_local_provider_rejects_available_node_types():
    cfg = load("cluster-onprem.yaml")
    cfg["available_node_types"] = {"w": {"resources": {"rayka_broker": 1}, "node_config": {}}}
    with pytest.raises(ClickException, match="available_node_types is not supported"):
        validated(cfg)                          # Ray's cli_logger.abort: a ClickException


@pytest.mark.parametrize("name", CONFIGS)
def test_missing_provider_type_fails(name):
    with pytest.raises(KeyError):               # prepare_config cannot pick the defaults
        without_type = load(name)
        del without_type["provider"]["type"]
        validated(without_type)
    prepared = validated(load(name))            # and the schema itself requires it
    del prepared["provider"]["type"]
    with pytest.raises(ValidationError, match="'type' is a required property"):
        validate_config(prepared)


def test_schema_rejects_a_misspelled_key():
    cfg = load("cluster.yaml")
    cfg["available_node_types"]["rayka_broker_node"]["resourcez"] = {"rayka_broker": 1}
    with pytest.raises(ValidationError, match="resourcez"):
        validated(cfg)


def test_min_workers_above_max_workers_fails():
    cfg = load("cluster.yaml")
    cfg["max_workers"] = 2
    with pytest.raises(ValueError, match="max_workers"):
        validated(cfg)
