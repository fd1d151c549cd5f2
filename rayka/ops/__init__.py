"""rayka/ops/: operating a cluster from the command line.

- ray_head: where the `rayka` command finds Ray — a given address, or a private
  `ray start --head --block` it owns and stops by pid, on free ports, with a token of its own;
- properties: Kafka's server.properties format (`rayka start --config-file`);
- zookeeper_service: `rayka zookeeper start|stop|status`, one ensemble member of a deployment
  (the server itself is controller.zookeeper.server);
- zookeeper_cli, groups_cli, transactions_cli, security_cli, quotas_cli, features_cli: the
  `rayka zookeeper`, `rayka groups`, `rayka transactions`, `rayka users|acls`, `rayka
  quotas` and `rayka features` subcommands;
- procs: processes by pid: `pid_alive`, the one answer to "is this pid still running",
  `family` (a pid's process tree) and `stop_pids` (SIGTERM, grace, SIGKILL);
- demo: the log demo (`rayka demo --log-only`) and `local_cluster`, shared with the Spark demo;
  `main_job()` finds the main demo through the `rayka.demos` entry point.

May import: rayka (cluster, client, errors), actors/, controller/, replicas/. Never
rayka.cli or rayka.chaos (above), never pipeline/.

Rules: processes are addressed by pid, never by name; nothing here runs `ray stop` or
pkill; every failure a user can cause is one typed error.
"""
