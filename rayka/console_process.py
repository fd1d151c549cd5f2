"""The web console as a child process of a driver: `start_local(console=True)`.

Rules:
- The console is its own process, `python -m rayka.cli console ...` (rayka never imports
  console/, which sits above it): it joins the driver's Ray at its GCS address with the
  driver's environment (so a private head's token comes along), reads the cluster by name,
  and stops by itself when the driver's pid is gone (--parent-pid).
- Started with --port 0 unless a port is given; the URL is known when the child wrote its
  --url-file (a poll with a deadline, the project's wait_for: the child is another
  process, no event reaches us).
  A child that exits before, or a URL not written within `timeout_s`, raises
  BrokerNotAvailable with the tail of the child's log.
- Its URL file and log live in a temporary directory of its own, removed when it is
  stopped (kept when it failed to start: the error names the log).
- Stopped through its Popen (SIGTERM, a grace period, SIGKILL), never by name: it is this
  process's own child, as the ZooKeeper server is the launcher's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from rayka.client.admin import wait_for
from replicas.errors import BrokerNotAvailable, RequestTimedOut

_POLL_S = 0.1


class ConsoleProcess:
    def __init__(self, proc: subprocess.Popen, url: str, log_file: str):
        self.proc, self.url, self.log_file = proc, url, log_file
        self.workdir = os.path.dirname(log_file)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, grace_s: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_console(name: str, ray_address: str, port: int = 0, host: str = "127.0.0.1",
                  extra_args=(), timeout_s: float = 60.0) -> ConsoleProcess:
    workdir = tempfile.mkdtemp(prefix=f"rayka-console-{name}-")
    url_file = os.path.join(workdir, "url")
    log_file = os.path.join(workdir, "console.log")
    args = [sys.executable, "-m", "rayka.cli", "console", "--name", name,
            "--address", ray_address, "--host", host, "--port", str(port),
            "--url-file", url_file, "--parent-pid", str(os.getpid()), *extra_args]
    with open(log_file, "w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(url_file) or proc.poll() is not None, timeout_s,
                 "the console's URL", poll_s=_POLL_S)
    except RequestTimedOut:
        pass
    if not os.path.exists(url_file):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        with open(log_file, errors="replace") as f:
            tail = f.read()[-2000:]
        raise BrokerNotAvailable(f"the console did not start (exit {proc.poll()}; log "
                                 f"{log_file}): {tail}")
    with open(url_file) as f:
        return ConsoleProcess(proc, f.read().strip(), log_file)
