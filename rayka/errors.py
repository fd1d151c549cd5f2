"""rayka's typed errors: Kafka's names and codes (DESIGN §9).

Defined in `replicas.errors` (the lowest layer, importable by the pure core) and
re-exported here for users: `from rayka.errors import NotEnoughReplicas`.
"""

from replicas.errors import *  # noqa: F401,F403
from replicas.errors import ERRORS_BY_CODE, KafkaError, error_for_code  # noqa: F401
