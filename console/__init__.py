"""The web console: a cluster's brokers, topics, groups, controller, transactions, Spark
pipelines and chaos runs as pages with live plots (`rayka console`).

The top room of the house: it reads through `rayka/` (Cluster, Admin) and Ray's node table,
and nothing below imports it.

May import: `rayka/` and below, ray, starlette, uvicorn, jinja2, confluent-kafka and
kafka-python (its writes); never `pipeline/`, pyspark or raydp: the console runs where no
Spark is, and reads the pipelines' placements from the cluster host.

Modules:
- history: bounded series of sampled figures and the rates drawn from them (pure).
- source: one sweep of the cluster into a Snapshot, a fixed number of calls per sweep.
- sampler: the background sweep every interval, feeding the history.
- principal: what the console's principal may describe (with credentials), asked over
  Kafka's protocol each sweep.
- actions: the writes (create/delete topic, alter configs, reset offsets, elections,
  reassignment) over Kafka's protocol with real Kafka clients, as the console's principal.
- app: the Starlette application: pages, live fragments, plot data, actions.
- pages: the extra pages' registry.
- timeline: the Controller page (the controllers' journals).
- pipelines: the Pipelines page (Spark tasks, partitions, leaders' nodes, where tasks ran).
- chaos_runs: the Chaos page (a run's faults, acknowledged and read counts, the verdict).
- serve: `rayka console`: bind, print the URL, run until stopped.
- __main__: `python -m console` is `rayka console`.
"""
