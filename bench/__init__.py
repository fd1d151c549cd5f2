"""bench/: benchmarks, each runnable alone and through run_all.py; JSON out, PNG plots.

The suite: run_all (command line and runner: each bench in its own process), report (the
JSON: targets, ratios), plots (the PNGs), summary (the terminal tables); common (what every
<name>_bench.py shares).

The benches: log_bench (the segmented log alone), controller_bench (the controller over a
real ZooKeeper), produce_bench (native produce and consume, throughput and latency),
wire_bench (Kafka clients on the sockets: librdkafka, kafka-python), failover_bench
(leader kill, controller failover, controlled shutdown), scale_bench (thousands of
partitions), rolling_restart_bench, group_bench (consumer-group rebalances, classic and KIP-848, and commits), txn_bench
(transactions per second, commit latency, visibility after commit), share_bench (Ray
workers as a share group: records/s, a worker killed with every record accepted once),
lifecycle_bench (retention, the cleaner, codecs), disk_bench (flush policies: their cost,
and what a power loss of one broker or of all takes from acks=all), security_bench (TLS and SASL costs),
quota_bench (client byte-rate quotas: measured rate against the quota; runs alone, not in
the suite),
pipeline_bench (Spark on Ray reads and writes), peers_bench (NATS JetStream and
ray.util.queue beside rayka), console_bench (the web console's cost at 100 to 10,000
partitions: sweep time, its CPU and memory, the brokers' extra CPU, page bytes and answer times).

rayka beside Apache Kafka 3.9.2: kafka_bench runs the workload families versus_data (the
data path), versus_groups (groups and transactions), versus_scale (10,000 partitions),
versus_tools (Kafka's perf tools) and versus_failover (kills, a frozen leader, a rolling
restart) against both systems of systems (rayka, Kafka in ZooKeeper mode), each family
recording on a versus Sheet, each fresh system warmed by settle until a JVM's compilers are
quiet; versus_compare tells which ratios of two such runs reproduce; profile_brokers samples
both systems' brokers through the same paced windows (async-profiler on Kafka, py-spy on
rayka); inplace_cpu times chosen entry points of three in-process rayka brokers with thread
CPU under a paced load (no profiler's inflation); wire_hops reads an acks=all produce's hops
between the brokers (leader to followers, the followers' turn, the last fetch to the ack)
off the loopback interface, timed by the kernel, on both systems; cold_cache times one
record's steps on three in-process replica managers with warm caches and after a cache
sweep (what a running cluster's steps cost against what they cost in a loop); ab_versions
runs two commits of the product in alternation on fresh clusters and reports each pair's
difference (a before/after on a host whose pace drifts).

May import anything in the project. Figures are medians of runs, with min/max and the
target; never asserted by timed unit tests.
"""
