"""A Spark standalone cluster on 127.0.0.1 for tests: one master and N one-core workers, started from the
installed pyspark's own ``spark-class``, and what a finished application's event log says about where its
tasks ran."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pyspark

from airmirror.devtools.local_kafka import free_port
from airmirror.devtools.processes import stop_process_group

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
LOOPBACK = {"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1"}


@dataclass(frozen=True)
class SparkCluster:
    master_url: str
    master_ui: str
    worker_ui_ports: tuple[int, ...]
    event_log_dir: Path

    def job_conf(self) -> dict[str, str]:
        """Settings that make an application use every worker (one executor of one core each, all registered
        before the first task) and write an uncompressed event log this helper can read."""
        return {
            "spark.executor.cores": "1",
            "spark.cores.max": str(len(self.worker_ui_ports)),
            "spark.executor.memory": "512m",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.event_log_dir.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
        }


def spark_process(args: list[str], log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(SPARK_CLASS), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **LOOPBACK},
            start_new_session=True,
        )


@contextmanager
def spark_standalone(home: Path, workers: int = 2) -> Iterator[SparkCluster]:
    """Start a master and ``workers`` one-core workers; yield once the master lists every worker ALIVE."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "events").mkdir(exist_ok=True)
    port, ui = free_port(), free_port()
    worker_ports = tuple(free_port() for _ in range(workers))
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}", worker_ports, home / "events")
    with ExitStack() as stack:
        master = spark_process(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            home / "master.log",
        )
        stack.callback(stop_process_group, master)
        for n, web_port in enumerate(worker_ports):
            work_dir = home / f"worker-{n}"
            worker = spark_process(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(web_port),
                    "--work-dir",
                    str(work_dir),
                ],
                home / f"worker-{n}.log",
            )
            stack.callback(stop_process_group, worker)
        wait_for_workers(cluster, workers, home)
        yield cluster


def wait_for_workers(cluster: SparkCluster, workers: int, home: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = httpx.get(f"{cluster.master_ui}/json/", timeout=5).json()
            if sum(w["state"] == "ALIVE" for w in state["workers"]) == workers:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(1)
    logs = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in sorted(home.glob("*.log")))
    raise AssertionError(f"the Spark master did not list {workers} alive workers within {timeout}s\n{logs}")


def tasks_per_worker(only: Iterable[Path]) -> Counter[int | None]:
    """Successful tasks of the applications whose event logs are ``only``, per worker (its web UI port, which the
    executors' log URLs name)."""
    worker_of: dict[tuple[str, str], int | None] = {}
    done: Counter[int | None] = Counter()
    for log in sorted(only):
        events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for event in events:
            if event["Event"] == "SparkListenerExecutorAdded":
                stdout_url = event["Executor Info"]["Log Urls"]["stdout"]
                worker_of[(log.name, event["Executor ID"])] = urlsplit(stdout_url).port
        for event in events:
            if event["Event"] == "SparkListenerTaskEnd" and event["Task End Reason"]["Reason"] == "Success":
                done[worker_of[(log.name, event["Task Info"]["Executor ID"])]] += 1
    return done
