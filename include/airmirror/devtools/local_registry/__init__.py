"""Real schema registries on 127.0.0.1 for tests and the demo: Apicurio Registry, which serves Confluent's Schema
Registry API at ``/apis/ccompat/v7``.

* :func:`install` puts Apicurio Registry (``io.apicurio:apicurio-registry-app``, its Quarkus distribution) from Maven
  Central into the cache ``{jars_cache_root()}/apicurio-registry-{version}`` (``make setup`` calls it); the directory
  appears only by an atomic rename of a fully unpacked one, so a killed install never leaves half of it.
* :func:`start_registry` starts one under ``{home}/registry/{name}`` (storage in memory, unless ``data_dir`` is given:
  then an H2 file there, kept across restarts) with Java 21 or newer, its API on ``127.0.0.1:port`` and its management
  interface (``/health/ready``) on a free port of 127.0.0.1 (Apicurio binds 9000 on every interface by default), and
  returns once it is ready; :func:`stop_registry` stops it (SIGTERM, SIGKILL after a grace period).
* Java 21+ is ``$AIRMIRROR_REGISTRY_JAVA``, else the first JDK of ``/usr/lib/jvm`` whose version is 21 or newer, else
  ``java`` on the PATH when it is new enough; none raises :class:`~airmirror.errors.ReplicationFailure` saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from airmirror.devtools.local_kafka.jars import exclusive_lock, jars_cache_root
from airmirror.devtools.local_kafka.nodes import free_port
from airmirror.errors import InputError, ReplicationFailure

APICURIO_VERSION = "3.3.3"
APICURIO_ARTIFACT = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
MIN_JAVA = 21
READY_TIMEOUT_S = 120.0
STOP_GRACE_S = 20.0
_MAVEN_TIMEOUT_S = 900


@dataclass(frozen=True)
class LocalRegistry:
    """A running local registry: ``url`` is Confluent's API (``.../apis/ccompat/v7``), what a
    ``SchemaRegistryClient`` and ``{alias}.schema.registry.url`` take."""

    name: str
    port: int
    management_port: int
    pid: int
    home: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"


def registry_dir() -> Path:
    """Where :func:`install` puts Apicurio Registry (``quarkus-run.jar`` at its top)."""
    return jars_cache_root() / f"apicurio-registry-{APICURIO_VERSION}"


def install() -> Path:
    """Apicurio Registry's directory, downloaded with Maven and unpacked on the first call (see the module
    docstring); :class:`ReplicationFailure` with Maven's output when Maven is missing or fails."""
    target = registry_dir()
    if (target / "quarkus-run.jar").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target.parent / f".{target.name}.lock"):
        if (target / "quarkus-run.jar").is_file():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            archive = _download(staging)
            with tarfile.open(archive) as tar:
                tar.extractall(staging / "app", filter="data")
            (staging / "app").rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _download(staging: Path) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ReplicationFailure(
            "Maven ('mvn') is needed to download Apicurio Registry; install it (apt install maven)"
        )
    command = [mvn, "-q", "-B", "dependency:copy", f"-Dartifact={APICURIO_ARTIFACT}", f"-DoutputDirectory={staging}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S, cwd=staging)
    archives = list(staging.glob("*.tar.gz"))
    if done.returncode != 0 or len(archives) != 1:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise ReplicationFailure(f"Maven could not download {APICURIO_ARTIFACT}:\n{tail}")
    return archives[0]


def java_home() -> Path:
    """A JDK of Java :data:`MIN_JAVA` or newer (see the module docstring)."""
    configured = os.environ.get("AIRMIRROR_REGISTRY_JAVA")
    candidates = [Path(configured)] if configured else []
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        candidates += sorted((p for p in jvm.iterdir() if (p / "bin" / "java").is_file()), reverse=True)
    on_path = shutil.which("java")
    if on_path is not None:
        candidates.append(Path(on_path).resolve().parent.parent)
    for home in candidates:
        if _java_version(home / "bin" / "java") >= MIN_JAVA:
            return home
    raise ReplicationFailure(
        f"Apicurio Registry needs Java {MIN_JAVA} or newer: none found in /usr/lib/jvm or on the PATH "
        "(set AIRMIRROR_REGISTRY_JAVA to a JDK's directory)"
    )


def _java_version(java: Path) -> int:
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except OSError:
        return 0
    match = re.search(r'version "(\d+)', done.stderr)
    return int(match.group(1)) if match else 0


def _state_dir(name: str, home: Path) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
        raise InputError(f"invalid registry name {name!r}: use letters, digits, '_' and '-'")
    return home / "registry" / name


def start_registry(name: str, port: int, home: Path, data_dir: Path | None = None) -> LocalRegistry:
    """Start registry ``name`` with its API on ``127.0.0.1:port`` and wait until it is ready (see the module
    docstring); a registry of that name already running raises :class:`ReplicationFailure`."""
    state = _state_dir(name, home)
    if (running := _running(state)) is not None:
        raise ReplicationFailure(f"registry '{name}' is already running (pid {running.pid}, port {running.port})")
    state.mkdir(parents=True, exist_ok=True)
    app = install()
    management_port = free_port(avoid=(port,))
    env = {
        **os.environ,
        "QUARKUS_HTTP_HOST": "127.0.0.1",
        "QUARKUS_HTTP_PORT": str(port),
        "QUARKUS_MANAGEMENT_HOST": "127.0.0.1",
        "QUARKUS_MANAGEMENT_PORT": str(management_port),
    }
    if data_dir is not None:
        env["APICURIO_DATASOURCE_URL"] = f"jdbc:h2:file:{data_dir.absolute()}/registry"
    java = java_home() / "bin" / "java"
    with open(state / "registry.log", "ab") as log:
        process = subprocess.Popen(
            [str(java), "-Xmx384m", "-jar", str(app / "quarkus-run.jar")],
            cwd=app,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    registry = LocalRegistry(name, port, management_port, process.pid, home)
    (state / "registry.json").write_text(
        json.dumps({"port": port, "management_port": management_port, "pid": process.pid})
    )
    _wait_ready(registry, process, state)
    return registry


def _wait_ready(registry: LocalRegistry, process: subprocess.Popen[bytes], state: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    ready = f"http://127.0.0.1:{registry.management_port}/health/ready"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ReplicationFailure(f"registry '{registry.name}' exited ({process.returncode}):\n{_log_tail(state)}")
        try:
            with urllib.request.urlopen(ready, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    stop_registry(registry.name, registry.home)
    raise ReplicationFailure(f"registry '{registry.name}' not ready after {READY_TIMEOUT_S:.0f}s:\n{_log_tail(state)}")


def _log_tail(state: Path) -> str:
    try:
        return "\n".join((state / "registry.log").read_text(errors="replace").splitlines()[-30:])
    except FileNotFoundError:
        return "(no log)"


def _running(state: Path) -> LocalRegistry | None:
    try:
        recorded = json.loads((state / "registry.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    pid = int(recorded["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return LocalRegistry(state.name, recorded["port"], recorded["management_port"], pid, state.parent.parent)


def stop_registry(name: str, home: Path) -> bool:
    """Stop registry ``name``; False when it was not running."""
    state = _state_dir(name, home)
    running = _running(state)
    if running is None:
        return False
    os.killpg(running.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and _alive(running.pid):
        time.sleep(0.2)
    if _alive(running.pid):
        os.killpg(running.pid, signal.SIGKILL)
    (state / "registry.json").unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    finished, _ = os.waitpid(pid, os.WNOHANG) if _is_child(pid) else (0, 0)
    return finished == 0


def _is_child(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[3] == str(os.getpid())
    except (FileNotFoundError, IndexError):
        return False
