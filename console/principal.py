"""Principal: what the console's principal may see, asked over Kafka's protocol each sweep.

Rules:
- With a --command-config (SASL credentials), the console shows only what that principal
  may describe, as Kafka's own answers decide it: the topics a Metadata request for all
  topics returns (DESCRIBE on the topic) and the groups ListGroups returns (DESCRIBE on the
  cluster lists all, else the groups one may describe). The rest is left out of every page
  and a page asked for it directly answers TOPIC_AUTHORIZATION_FAILED (29) or
  GROUP_AUTHORIZATION_FAILED (30), as a Kafka client is told.
- Without credentials the console reads everything (it runs where Ray does: the operator's
  side of the cluster, as `rayka status` reads).
- Two requests a sweep, whatever the partition count; a failure (the brokers unreachable,
  the credentials refused) is the sweep's error and shows nothing rather than everything.
"""

from __future__ import annotations

from typing import Mapping

from rayka.errors import GroupAuthorizationFailed, TopicAuthorizationFailed

TIMEOUT_S = 10.0


class Visibility:
    """What the pages may show: everything (`visible` None: no principal), or the (topics,
    groups) the principal's last sweep found it may describe."""

    def __init__(self):
        self.visible: tuple[set[str], set[str]] | None = None

    def topic_shown(self, name: str | None) -> bool:
        return self.visible is None or name is None or name in self.visible[0]

    def check_topic(self, name: str) -> None:
        """TOPIC_AUTHORIZATION_FAILED (29) for a topic the principal may not describe."""
        if not self.topic_shown(name):
            raise TopicAuthorizationFailed(f"Not authorized to access topics: [{name}]")

    def check_group(self, group: str) -> None:
        """GROUP_AUTHORIZATION_FAILED (30) for a group the principal may not describe."""
        if self.visible is not None and group not in self.visible[1]:
            raise GroupAuthorizationFailed(f"Not authorized to access group: {group}")


class PrincipalView:
    def __init__(self, bootstrap: str, client_config: Mapping[str, str]):
        from confluent_kafka.admin import AdminClient
        self.name = f"User:{client_config.get('sasl.username', 'ANONYMOUS')}"
        self.admin = AdminClient({"bootstrap.servers": bootstrap,
                                  "client.id": "rayka-console-reads", **client_config})

    def visible(self) -> tuple[set[str], set[str]]:
        """(topics, groups) the principal may describe; raises KafkaException on failure."""
        listed_topics = self.admin.list_topics(timeout=TIMEOUT_S).topics
        topics = {name for name, t in listed_topics.items() if t.error is None}
        listed = self.admin.list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        return topics, {g.group_id for g in listed.valid}
