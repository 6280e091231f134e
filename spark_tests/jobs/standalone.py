"""A Spark standalone cluster on this machine, as teams run one on theirs: a master and N
workers, each a JVM of its own started with pyspark's own `spark-class` (Spark's standalone
cluster manager ships in the pyspark package; the sbin/ scripts that start it elsewhere do
not), on 127.0.0.1 and on ports the OS picks. A job reaches it with `--master
spark://127.0.0.1:PORT`; every application gets its executors, JVMs of their own, from the
workers.

    python -m spark_tests.jobs.standalone --workers 2       # prints the master URL; Ctrl-C stops it

    with StandaloneCluster(workdir, workers=2) as cluster:
        run_a_job(master=cluster.master_url)         # spark://127.0.0.1:PORT
        cluster.kill_worker(1)                       # a machine lost: SIGKILL, executors too

Everything it runs writes under `workdir`, which outlives it (logs are what a failure leaves
to read): `master.log`, `worker-N.log`, and `worker-N/app-*/EXECUTOR/stderr` for each
executor a worker ran.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import pyspark

from nullbroker.app.launcher import ServerError, ServerProcess

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120.0
"""How long a master or a worker may take to be ready: a JVM with Spark's few hundred jars
takes 3 s here on an idle machine and over 10 s with two of them starting on two busy cores."""
POLL_S = 0.1
MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
MASTER_ALIVE = re.compile(r"I have been elected leader! New state: ALIVE")
WORKER_REGISTERED = re.compile(r"Successfully registered with master")
EXECUTOR_BACKEND = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
# Spark's master opens a REST server for spark-submit on port 6066 unless told not: a fixed
# port that a second cluster on the machine could not have.
PROPERTIES = "spark.master.rest.enabled false\n"


def spark_class() -> Path:
    """pyspark's own bin/spark-class: runs a Spark class with pyspark's jars."""
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


class StandaloneCluster:
    """A master and `workers` workers of `cores` cores and `memory` each, started and
    registered (a ServerError, with the log's tail, if one is not within START_TIMEOUT_S);
    stopped, executors and all, by `stop` or on leaving the `with` block."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        # Absolute: every JVM runs in this folder and is given paths into it.
        self.workdir = workdir.resolve()
        self.cores = cores
        self.memory = memory
        self.workers: list[ServerProcess] = []
        properties = self.workdir / "spark-defaults.conf"
        properties.write_text(PROPERTIES)
        self.master = self._start("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", "0")
        try:
            found = wait_for_log(self.master, MASTER_URL, "where it listens")
            self.master_url = found[1]
            """`spark://127.0.0.1:PORT`, for --master."""
            wait_for_log(self.master, MASTER_ALIVE, "that it is the master")
            for _ in range(workers):
                self.add_worker(wait=False)
            for worker in self.workers:
                wait_for_log(worker, WORKER_REGISTERED, "that it registered with the master")
        except BaseException:
            self.stop()
            raise

    def add_worker(self, wait: bool = True) -> ServerProcess:
        """One more worker, registered with the master unless `wait` is false."""
        index = len(self.workers)
        scratch = self.workdir / f"worker-{index}"
        scratch.mkdir()
        worker = self._start(
            f"worker-{index}",
            WORKER_CLASS,
            *("--host", "127.0.0.1", "--port", "0"),
            *("--cores", str(self.cores), "--memory", self.memory),
            *("--work-dir", str(scratch), self.master_url),
            local_dirs=scratch / "local",
        )
        self.workers.append(worker)
        if wait:
            wait_for_log(worker, WORKER_REGISTERED, "that it registered with the master")
        return worker

    def _start(
        self, name: str, main_class: str, *args: str, local_dirs: Path | None = None
    ) -> ServerProcess:
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            # Executors run the driver's Python for Python code (pykafka, UDFs): this venv's.
            "PYSPARK_PYTHON": sys.executable,
        }
        if local_dirs is not None:
            env["SPARK_LOCAL_DIRS"] = str(local_dirs)  # the executors' scratch space
        command = [
            str(spark_class()),
            main_class,
            *args,
            "--webui-port",
            "0",
            "--properties-file",
            str(self.workdir / "spark-defaults.conf"),
        ]
        return ServerProcess(name, command, self.workdir / f"{name}.log", cwd=self.workdir, env=env)

    def ensure_workers(self, count: int) -> None:
        """At least `count` workers alive and registered: new ones for any lost."""
        for _ in range(count - sum(1 for worker in self.workers if worker.running)):
            self.add_worker()

    def executors(self, worker: int) -> list[int]:
        """The pids of the executor JVMs worker `worker` runs now."""
        return [
            pid
            for pid in descendants(self.workers[worker].pid)
            if EXECUTOR_BACKEND in _command_line(pid)
        ]

    def executor_logs(self, worker: int) -> list[Path]:
        """The log (stderr) of every executor worker `worker` has run."""
        return sorted((self.workdir / f"worker-{worker}").glob("app-*/*/stderr"))

    def kill_worker(self, worker: int) -> None:
        """Lose worker `worker` as a machine is lost: it, its executors and their Python
        workers all killed (SIGKILL) at once."""
        process = self.workers[worker]
        tree = descendants(process.pid)
        process.kill()
        for pid in tree:
            _kill(pid)

    def stop(self) -> None:
        """SIGTERM to every worker (each stops its executors), then the master; whatever
        has not exited within the launcher's stop timeout is killed."""
        for worker in self.workers:
            tree = descendants(worker.pid) if worker.running else []
            worker.end()
            for pid in tree:
                _kill(pid)
        self.master.end()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exception: object) -> None:
        self.stop()


def wait_for_log(
    process: ServerProcess, pattern: re.Pattern[str], what: str, timeout: float = START_TIMEOUT_S
) -> re.Match[str]:
    """The first match of `pattern` in the log `process` writes (its stderr, where Spark's
    log4j writes); a ServerError naming `what`, with the log's tail, when the process exits
    first or none comes within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = pattern.search(process.stderr_text())
        if found:
            return found
        if not process.running:
            why = f"exited with {process.process.returncode}"
        elif time.monotonic() > deadline:
            why = f"said nothing of it in {timeout:g} s"
        else:
            time.sleep(POLL_S)
            continue
        raise ServerError(
            f"Spark's {process.name} did not say {what}: it {why}; "
            f"its log ({process.stderr_path}) ends: {process.stderr_tail()}"
        )


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, children before their own children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue  # it exited while we looked
            children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    level = children.get(pid, [])
    for _ in range(16):  # process trees are shallow; the bound guards against pid reuse loops
        if not level:
            break
        found.extend(level)
        level = [child for parent in level for child in children.get(parent, [])]
    return found


def _command_line(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m spark_tests.jobs.standalone",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    parser.add_argument("--workdir", type=Path, help="logs and scratch (default: a new temp dir)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="spark-standalone-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with StandaloneCluster(workdir, args.workers, args.cores, args.memory) as cluster:
        print(f"spark master at {cluster.master_url}", flush=True)
        print(f"{args.workers} workers of {args.cores} cores, {args.memory}; logs in {workdir}")
        _until_stopped()
    return 0


def _until_stopped() -> None:
    """Until Ctrl-C or SIGTERM; either unwinds the caller's `with`, which stops the cluster."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
