"""rayka's typed errors: Kafka's names and codes.

Defined in `replicas.errors` (the lowest layer, importable by the pure core) and
re-exported here for users: `from rayka.errors import NotEnoughReplicas`.
"""

from replicas.errors import *  # noqa: F401,F403
from replicas.errors import ERRORS_BY_CODE, KafkaError, error_for_code  # noqa: F401


class RayUnavailable(ConnectionError):
    """Ray could not be reached at the address given, in RAY_ADDRESS or recorded by
    `ray start` (not a Kafka error: rayka's own, raised before any broker is involved)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else type(self).__name__
