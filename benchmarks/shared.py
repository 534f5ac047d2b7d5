"""What the bench (``bench.py`` and its ``case_*.py`` modules) and the soak (``soak.py``) share: their two local
clusters, their temporary home and results, their log lines, the usage of a copier's process tree, the machine's
facts and the ratio of two figures.

Like the rest of ``benchmarks/``, nothing here imports the product's replication code: only its development tools
(local Kafka clusters).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

import psutil
from kafka_io import warm_up_cluster

from airmirror.devtools.local_kafka import (
    KAFKA_VERSION,
    LocalBroker,
    consecutive_free_ports,
    free_port,
    start_broker,
    stop_broker,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
"""Where the bench and the soak write their results documents by default."""
SPARK_SHUTDOWN_S = 60.0
"""How long a copier's leftover processes (a Spark JVM finishing its shutdown) may take to exit by themselves."""


@dataclass(frozen=True)
class Clusters:
    """The two local clusters a run copies between."""

    source: LocalBroker
    target: LocalBroker


@contextmanager
def local_clusters(
    names: tuple[str, str],
    home: Path,
    *,
    source_nodes: int = 1,
    broker_config: Mapping[str, str] | None = None,
) -> Iterator[Clusters]:
    """Start local clusters ``names`` (source, target) under ``home`` on free ports, the source of ``source_nodes``
    nodes and the target of one, each node with ``broker_config``; warm both up
    (:func:`kafka_io.warm_up_cluster`) and yield them.  Both are stopped on the way out, whatever happened (a
    cluster that never started is no error); their data stays in ``home``."""
    try:
        source = start_broker(
            names[0],
            consecutive_free_ports(source_nodes),
            brokers=source_nodes,
            home=home,
            broker_config=broker_config,
        )
        target = start_broker(names[1], free_port(), home=home, broker_config=broker_config)
        for broker in (source, target):
            warm_up_cluster(broker.bootstrap)
        yield Clusters(source, target)
    finally:
        for name in names:
            stop_broker(name, home=home)


def fresh_home(kind: str) -> Path:
    """A new temporary directory ``airmirror-{kind}-*``, made ``AIRMIRROR_HOME`` of this process and of every
    process it starts from now on; the caller removes it."""
    home = Path(tempfile.mkdtemp(prefix=f"airmirror-{kind}-"))
    os.environ["AIRMIRROR_HOME"] = str(home)
    return home


def utc_stamp() -> str:
    """The time now in UTC as a results file names it (``20261203T111438Z``)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def log(message: str, tag: str | None = None) -> None:
    """``message`` as one line on stderr, after the local time (and ``tag``, naming the program), at once."""
    now = time.strftime("%H:%M:%S")
    print(f"[{now if tag is None else f'{tag} {now}'}] {message}", file=sys.stderr, flush=True)


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, to two decimals, as every ratio of the results is given."""
    return round(numerator / denominator, 2)


class Machine(TypedDict):
    """The machine a bench ran on (``machine`` of a results document)."""

    nproc: int | None
    cpu: str
    ram_gb: float
    load_avg_at_start: list[float]
    os: str
    python: str
    java: str
    kafka: str
    git_commit: str
    git_dirty: bool
    """Whether ``include/`` (the product's code) differs from the commit."""


def machine_facts() -> Machine:
    """The machine now: cores, CPU model, RAM, load, OS, Python, Java and Kafka versions, and the checkout's commit."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
        "kafka": KAFKA_VERSION,
        "git_commit": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "git_dirty": bool(
            subprocess.run(
                ["git", "-C", str(REPO), "status", "--porcelain", "--", "include"], capture_output=True, text=True
            ).stdout.strip()
        ),
    }


def visit_tree(root: int | psutil.Process, visit: Callable[[psutil.Process], None]) -> None:
    """Call ``visit`` on process ``root`` (a pid or a process) and on each of its descendants now, each call inside
    the process's ``oneshot`` (one read of ``/proc`` per file); a process that ends meanwhile (any ``psutil.Error``)
    ends its own call there and the others go on, and a root that already ended is visited not at all."""
    try:
        process = root if isinstance(root, psutil.Process) else psutil.Process(root)
        processes = [process, *process.children(recursive=True)]
    except psutil.Error:
        return
    for each in processes:
        try:
            with each.oneshot():
                visit(each)
        except psutil.Error:
            continue


@dataclass
class TreePeaks:
    """The peaks, over the samples taken, of a process tree's summed RSS (MiB), threads and open descriptors."""

    rss_mb: float = 0.0
    threads: int = 0
    fds: int = 0

    def sample(self, pid: int) -> None:
        """Add one sample of process ``pid`` and all its descendants (:func:`visit_tree`)."""
        rss = threads = fds = 0

        def add(process: psutil.Process) -> None:
            nonlocal rss, threads, fds
            rss += process.memory_info().rss
            threads += process.num_threads()
            fds += process.num_fds()

        visit_tree(pid, add)
        self.rss_mb = max(self.rss_mb, round(rss / 2**20, 1))
        self.threads = max(self.threads, threads)
        self.fds = max(self.fds, fds)


class TreeUsage:
    """Samples a process and all its descendants every ``interval`` s: the peak of their summed RSS, and the CPU
    seconds (user + system) they used since this object was created.

    CPU: each process counts with its last sample, so a process that ends between two samples loses at most
    ``interval`` s of its CPU; processes already running at creation count from their first sample.

    RSS: also keeps the peak of each role's sum (``cli``: the root process; ``jvm``: Java processes, for airmirror
    the Spark driver JVM; ``python``: other Python descendants, for airmirror the Spark Python workers and
    their daemon; ``other``: anything else, such as launcher shells) and, every ``timeline_s`` seconds, a row
    ``[seconds since start, total, cli, jvm, python, other]`` in MiB: which process grows, and when.
    """

    ROLES = ("cli", "jvm", "python", "other")

    def __init__(self, pid: int, interval: float = 0.1, timeline_s: float = 1.0) -> None:
        self.root = psutil.Process(pid)
        self.interval = interval
        self.timeline_s = timeline_s
        self.peak = 0
        self.role_peaks = dict.fromkeys(self.ROLES, 0)
        self.timeline: list[list[float]] = []
        self._roles: dict[int, str] = {}
        self._cpu: dict[int, float] = {}
        self._started = time.monotonic()
        self._note_peaks(self._sample())
        self._cpu_start = dict(self._cpu)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _role(self, process: psutil.Process) -> str:
        role = self._roles.get(process.pid)
        if role is None:
            if process.pid == self.root.pid:
                role = "cli"
            else:
                name = process.name().lower()
                role = "jvm" if name.startswith("java") else "python" if name.startswith("python") else "other"
            if role != "other":  # a launcher shell may exec java later: classify it again
                self._roles[process.pid] = role
        return role

    def _sample(self) -> dict[str, int]:
        """RSS by role now; notes each process's CPU seconds on the way."""
        by_role = dict.fromkeys(self.ROLES, 0)

        def add(process: psutil.Process) -> None:
            times = process.cpu_times()
            by_role[self._role(process)] += process.memory_info().rss
            self._cpu[process.pid] = times.user + times.system

        visit_tree(self.root, add)
        return by_role

    def _run(self) -> None:
        next_row = 0.0
        while not self._stop.is_set():
            by_role = self._sample()
            total = self._note_peaks(by_role)
            elapsed = time.monotonic() - self._started
            if total and elapsed >= next_row:
                self.timeline.append([round(elapsed, 1), *(round(x / 2**20) for x in (total, *by_role.values()))])
                next_row = elapsed + self.timeline_s
            self._stop.wait(self.interval)

    def _note_peaks(self, by_role: dict[str, int]) -> int:
        """Count one sample's RSS towards the peaks; returns its total."""
        total = sum(by_role.values())
        self.peak = max(self.peak, total)
        for role, rss in by_role.items():
            self.role_peaks[role] = max(self.role_peaks[role], rss)
        return total

    def stop(self) -> float:
        """Stop sampling (one last sample first); returns the peak RSS in MiB.  Every sample counts towards the
        peaks, the first and the last too: a copier shorter than a few sampling intervals on a loaded machine may
        get no other."""
        self._stop.set()
        self._thread.join()
        self._note_peaks(self._sample())
        return self.peak / 2**20

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the tree used from creation to the last sample."""
        return sum(used - self._cpu_start.get(pid, 0.0) for pid, used in self._cpu.items())

    def cpu_s_by_role(self) -> dict[str, float]:
        """:meth:`cpu_s` split by role (see the class docstring): for airmirror, ``python`` is its copy tasks'."""
        by_role = dict.fromkeys(self.ROLES, 0.0)
        for pid, used in self._cpu.items():
            by_role[self._roles.get(pid, "other")] += used - self._cpu_start.get(pid, 0.0)
        return {role: round(seconds, 2) for role, seconds in by_role.items() if seconds}

    def role_peaks_mb(self) -> dict[str, float]:
        """Each role's peak RSS in MiB, rounded; roles never seen are left out."""
        return {role: round(peak / 2**20) for role, peak in self.role_peaks.items() if peak}
