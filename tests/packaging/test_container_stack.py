"""The container stack (docker-compose.yaml, Dockerfile, deploy/) is consistent with the project.

Docker is not available where these tests run, so the stack is checked by reading it: the compose file is
parsed and cross-checked against the project's pins (the Airflow version of constraints.txt, the Kafka version
of the local clusters), the Dockerfile against the shared install script, and the stack's MM2 file is validated
by airmirror's own config loader and matched against the compose services and the postgres init script.
Nothing here starts a container, a broker, Spark or Airflow.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from airmirror.config import load_config
from airmirror.config.mirror_config import BATCH_LOG_REPLICATION_FACTOR_KEY
from airmirror.devtools.demo.sample_data import CUSTOMERS_TOPIC, ORDERS_TOPIC
from airmirror.devtools.local_kafka.jars import KAFKA_VERSION

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "Dockerfile"

AIRFLOW_SERVICES = (
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
)
KAFKA_SERVICES = ("kafka-source", "kafka-target")
SPARK_SERVICES = ("spark-master", "spark-worker")
PRODUCER = "sample-producer"
REQUIRED_SERVICES = ("postgres", *AIRFLOW_SERVICES, *KAFKA_SERVICES, *SPARK_SERVICES, PRODUCER)
ONE_SHOT_SERVICES = ("airflow-init", PRODUCER)  # they exit or just produce: nothing to probe
IMAGE_SERVICES = (*AIRFLOW_SERVICES, *SPARK_SERVICES, PRODUCER)  # run the project's own image
REPLICATION_FACTOR_KEYS = (
    "replication.factor",
    "heartbeats.topic.replication.factor",
    "checkpoints.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    BATCH_LOG_REPLICATION_FACTOR_KEY,
)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def dockerfile() -> str:
    # one logical line per instruction: backslash continuations joined
    return re.sub(r"\\\n", " ", DOCKERFILE.read_text())


def env_of(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {key: str(value) for key, value in environment.items()}


def command_text(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return command if isinstance(command, str) else " ".join(str(part) for part in command)


def healthcheck_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(test)


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> host path (in the checkout) of the service's bind mounts of repository folders."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            mounts[target] = (REPO / source).resolve()
    return mounts


def host_path_of(service: dict[str, Any], container_path: str) -> Path | None:
    """The checkout file a container path shows, through the service's bind mounts (longest mount first)."""
    for target, source in sorted(bind_mounts(service).items(), key=lambda item: -len(item[0])):
        if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
            return source / container_path[len(target) :].lstrip("/")
    return None


def advertised_addresses(service: dict[str, Any]) -> set[str]:
    """host:port of every advertised listener of a Kafka service."""
    listeners = env_of(service)["KAFKA_ADVERTISED_LISTENERS"].split(",")
    return {listener.split("://", 1)[1] for listener in listeners}


def airflow_pin() -> str:
    pins = dict(line.split("==", 1) for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line)
    return pins["apache-airflow"]


def stack_config_path(services: dict[str, dict[str, Any]]) -> Path:
    scheduler = services["airflow-scheduler"]
    path = host_path_of(scheduler, env_of(scheduler)["AIRMIRROR_CONFIG"])
    assert path is not None, "AIRMIRROR_CONFIG is not inside a folder the compose file mounts from the checkout"
    return path


# --- docker-compose.yaml ---------------------------------------------------------------------------------------


def test_compose_defines_every_service_of_the_stack(services):
    missing = [name for name in REQUIRED_SERVICES if name not in services]
    assert not missing, f"docker-compose.yaml lacks the services {missing}"


def test_project_services_run_the_image_built_from_the_checkout(compose, services):
    common = compose["x-airflow-common"]
    assert common.get("build") in (".", {"context": "."}), "x-airflow-common must build the image from '.'"
    for name in IMAGE_SERVICES:
        service = services[name]
        assert service.get("build") == common["build"], f"{name} does not build the project's Dockerfile"
        assert service.get("image") == common["image"], f"{name} runs {service.get('image')!r}, not {common['image']!r}"


def test_kafka_clusters_run_the_kafka_version_of_the_local_clusters(services):
    for name in KAFKA_SERVICES:
        assert services[name]["image"] == f"apache/kafka:{KAFKA_VERSION}", (
            f"{name} runs {services[name]['image']!r}; the local clusters (local_kafka/jars.py) run "
            f"Kafka {KAFKA_VERSION}"
        )


def test_kafka_clusters_are_single_node_kraft_with_one_replica_internal_topics(services):
    for name in KAFKA_SERVICES:
        env = env_of(services[name])
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller", f"{name} is not a combined KRaft node"
        assert f"{name}:9092" in advertised_addresses(services[name]), f"{name} does not advertise {name}:9092"
        for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"):
            assert env[key] == "1", f"{name}: {key} must be 1 on a single broker"


def test_every_long_running_service_has_a_healthcheck(services):
    lacking = [
        name
        for name, service in services.items()
        if name not in ONE_SHOT_SERVICES and not (service.get("healthcheck") or {}).get("test")
    ]
    assert not lacking, f"services without a healthcheck: {lacking}"


def test_airflow_healthchecks_probe_each_component(services):
    expected = {
        "airflow-apiserver": "http://localhost:8080/api/v2/version",
        "airflow-scheduler": "http://localhost:8974/health",
        "airflow-dag-processor": 'airflow jobs check --job-type DagProcessorJob --hostname "$${HOSTNAME}"',
        "airflow-triggerer": 'airflow jobs check --job-type TriggererJob --hostname "$${HOSTNAME}"',
    }
    for name, probe in expected.items():
        assert probe in healthcheck_text(services[name]), f"{name}'s healthcheck does not run {probe!r}"


def test_airflow_components_run_their_airflow_commands(services):
    commands = {
        "airflow-apiserver": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
    }
    for name, command in commands.items():
        assert command_text(services[name]) == command, f"{name} runs {command_text(services[name])!r}"
    assert "8080:8080" in services["airflow-apiserver"].get("ports", []), "the UI is not published on port 8080"
    init = command_text(services["airflow-init"])
    assert "airflow db migrate" in init, "airflow-init does not migrate Airflow's metadata DB"


def test_airflow_services_wait_for_postgres_and_airflow_init(services):
    for name in AIRFLOW_SERVICES:
        depends = services[name].get("depends_on", {})
        assert depends.get("postgres", {}).get("condition") == "service_healthy", f"{name} does not wait for postgres"
        if name != "airflow-init":
            assert depends.get("airflow-init", {}).get("condition") == "service_completed_successfully", (
                f"{name} does not wait for airflow-init to complete"
            )


def test_airflow_environment_is_local_executor_without_examples_and_with_unpaused_dags(services):
    for name in AIRFLOW_SERVICES:
        env = env_of(services[name])
        assert env.get("AIRFLOW__CORE__EXECUTOR") == "LocalExecutor", f"{name} does not use the LocalExecutor"
        assert env.get("AIRFLOW__CORE__LOAD_EXAMPLES") == "false", f"{name} loads Airflow's example DAGs"
        assert env.get("AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION") == "false", f"{name} would create the DAG paused"
        assert env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "").startswith("postgresql"), f"{name} is not on postgres"
        db_host = make_url(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).host
        assert db_host == "postgres", f"{name}: Airflow's DB host is {db_host!r}, not the postgres service"


def test_airflow_services_mount_the_dags_and_the_stack_config_where_their_env_points(services):
    for name in AIRFLOW_SERVICES:
        service = services[name]
        env = env_of(service)
        dags = host_path_of(service, env.get("AIRFLOW__CORE__DAGS_FOLDER", "/opt/airflow/dags"))
        assert dags == REPO / "dags", f"{name}: the DAGs folder is not the checkout's dags/ (got {dags})"
        # dags/airmirror_flows.py finds the spark-submit app at dags/../spark_apps
        assert host_path_of(service, "/opt/airflow/spark_apps") == REPO / "spark_apps", f"{name} lacks spark_apps/"
        config = host_path_of(service, env.get("AIRMIRROR_CONFIG", ""))
        assert config == REPO / "deploy" / "mm2.properties", f"{name}: AIRMIRROR_CONFIG shows {config}"
        assert config.is_file(), f"{config} does not exist"


def test_spark_connection_points_at_the_spark_master_service(services):
    master_command = command_text(services["spark-master"])
    assert "org.apache.spark.deploy.master.Master" in master_command
    assert "--port 7077" in master_command and "--host spark-master" in master_command
    worker_command = command_text(services["spark-worker"])
    assert "org.apache.spark.deploy.worker.Worker spark://spark-master:7077" in worker_command
    for name in AIRFLOW_SERVICES:
        connection = json.loads(env_of(services[name])["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert connection["conn_type"] == "spark", f"{name}: spark_default is not a Spark connection"
        master = connection["host"] + (f":{connection['port']}" if connection.get("port") else "")
        assert master == "spark://spark-master:7077", f"{name}: spark_default points at {master!r}"


def test_sample_producer_writes_the_demo_orders_into_the_source_cluster(services):
    producer = services[PRODUCER]
    command = command_text(producer)
    run = next(line for line in command.splitlines() if "airmirror.devtools.demo.producer" in line)
    argv = shlex.split(run)
    args = argv[argv.index("airmirror.devtools.demo.producer") + 1 :]
    assert args[0] == "kafka-source:9092", f"the producer writes to {args[0]!r}, not kafka-source:9092"
    assert all(arg.isdigit() for arg in args[1:]), f"producer arguments are BOOTSTRAP [RATE], got {args}"
    assert "kafka-source:9092" in advertised_addresses(services["kafka-source"])
    assert producer["depends_on"]["kafka-source"]["condition"] == "service_healthy"


def test_postgres_runs_the_airmirror_database_init_script(services):
    postgres = services["postgres"]
    init_dir = host_path_of(postgres, "/docker-entrypoint-initdb.d")
    assert init_dir is not None and init_dir.is_dir(), "postgres mounts no init scripts from the checkout"
    assert env_of(postgres)["POSTGRES_DB"] == "airflow", "Airflow's own database is not the image's default DB"


# --- Dockerfile, .dockerignore, scripts/install.sh ------------------------------------------------------------


def test_dockerfile_starts_from_the_airflow_version_pinned_in_constraints(dockerfile):
    bases = re.findall(r"^FROM\s+(\S+)", dockerfile, re.MULTILINE)
    assert bases == [f"apache/airflow:{airflow_pin()}-python3.11"], (
        f"Dockerfile FROM {bases}; constraints.txt pins apache-airflow=={airflow_pin()}"
    )


def test_dockerfile_installs_a_jre_and_airmirror_with_the_shared_install_script(dockerfile):
    runs = re.findall(r"^RUN\s+(.*)$", dockerfile, re.MULTILINE)
    assert any(re.search(r"apt-get install .*openjdk-\d+-jre-headless", run) for run in runs), "no JRE is installed"
    install = [run for run in runs if "scripts/install.sh" in run]
    assert len(install) == 1, "airmirror must be installed by scripts/install.sh, once"
    words = shlex.split(install[0])
    for setting in ("AIRMIRROR_EXTRAS=airflow", "AIRMIRROR_EDITABLE=0", "AIRMIRROR_KAFKA_JARS=0"):
        assert setting in words, f"scripts/install.sh is not run with {setting}"
    venv = words[words.index("scripts/install.sh") + 1]
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(re.findall(r"^ENV\s+(.*)$", dockerfile, re.MULTILINE))))
    assert env.get("PATH", "").startswith(f"{venv}/bin:"), f"the venv {venv} is not first on PATH"
    assert env.get("PYSPARK_PYTHON") == f"{venv}/bin/python", "PYSPARK_PYTHON is not the venv's python"


def test_dockerfile_ships_the_dags_and_spark_apps_and_ends_as_the_airflow_user(dockerfile):
    copies = re.findall(r"^COPY\s+(?:--\S+\s+)*(\S+)\s+(\S+)", dockerfile, re.MULTILINE)
    assert ("dags/", "/opt/airflow/dags/") in copies, "dags/ is not copied to /opt/airflow/dags"
    assert ("spark_apps/", "/opt/airflow/spark_apps/") in copies, "spark_apps/ is not copied next to the DAGs"
    users = re.findall(r"^USER\s+(\S+)", dockerfile, re.MULTILINE)
    assert users[-1] == "airflow", f"the image's last USER is {users[-1]!r}"


def test_dockerignore_keeps_local_state_out_of_the_build_context():
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    for entry in (".venv", ".airmirror", ".git", ".artifacts", "**/__pycache__", "benchmarks/results"):
        assert entry in ignored, f".dockerignore does not exclude {entry}"


def test_install_script_can_skip_the_kafka_jars():
    script = (REPO / "scripts" / "install.sh").read_text()
    guard = re.search(r'if \[ "\$\{AIRMIRROR_KAFKA_JARS:-1\}" = 1 \]; then\n(.*?)\nfi', script, re.DOTALL)
    assert guard and "kafka_classpath()" in guard.group(1), "the Kafka jar download is not behind AIRMIRROR_KAFKA_JARS"
    assert "AIRMIRROR_KAFKA_JARS" in script.split("set -euo pipefail")[0], "the script header does not document it"


# --- deploy/mm2.properties ------------------------------------------------------------------------------------


def test_stack_config_passes_airmirrors_validation_with_one_demo_flow(services):
    config = load_config(stack_config_path(services), env={})
    flows = config.enabled_flows()
    assert [flow.name for flow in flows] == ["source->target"], f"enabled flows: {[f.name for f in flows]}"
    flow = flows[0]
    for topic in (ORDERS_TOPIC, CUSTOMERS_TOPIC):
        assert flow.should_replicate(topic), f"the flow does not copy the demo topic {topic!r}"
    for key in REPLICATION_FACTOR_KEYS:
        assert flow.topic_replication_factor(key) == 1, f"{key} must be 1 on the stack's single-broker clusters"


def test_stack_config_clusters_are_the_compose_kafka_services(services):
    config = load_config(stack_config_path(services), env={})
    flow = config.flow("source->target")
    addresses = {name: advertised_addresses(services[name]) for name in KAFKA_SERVICES}
    for alias in (flow.source, flow.target):
        bootstrap = config.bootstrap_servers(alias)
        owners = [name for name, advertised in addresses.items() if bootstrap in advertised]
        assert len(owners) == 1, f"cluster {alias!r} ({bootstrap}) is not one Kafka service of the compose file"
    assert config.bootstrap_servers(flow.source) != config.bootstrap_servers(flow.target)
    producer = command_text(services[PRODUCER])
    assert config.bootstrap_servers(flow.source) in producer, "the producer does not write into the flow's source"


def test_stack_config_spark_master_is_the_compose_spark_master(services):
    flow = load_config(stack_config_path(services), env={}).flow("source->target")
    connection = json.loads(env_of(services["airflow-scheduler"])["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert flow.spark.master == "spark://spark-master:7077" == connection["host"]


def test_stack_config_metadata_db_is_the_database_the_postgres_init_script_creates(services):
    flow = load_config(stack_config_path(services), env={}).flow("source->target")
    url = make_url(flow.metadata_db_url)
    assert url.drivername == "postgresql+psycopg", f"metadata DB driver {url.drivername!r}"
    assert url.host in services and services[url.host]["image"].startswith("postgres:"), f"{url.host!r} is not postgres"
    assert url.port in (None, 5432), f"postgres listens on 5432, not {url.port}"
    init_dir = host_path_of(services["postgres"], "/docker-entrypoint-initdb.d")
    sql = "\n".join(path.read_text() for path in sorted(init_dir.glob("*.sql")))
    roles = dict(re.findall(r"CREATE (?:ROLE|USER) (\w+) WITH (?:LOGIN )?PASSWORD '([^']*)'", sql, re.IGNORECASE))
    databases = dict(re.findall(r"CREATE DATABASE (\w+) OWNER (\w+)", sql, re.IGNORECASE))
    assert url.database in databases, f"the init scripts do not create database {url.database!r} ({databases})"
    assert databases[url.database] == url.username, f"{url.database!r} is not owned by {url.username!r}"
    assert roles.get(url.username) == url.password, (
        f"the init scripts do not create role {url.username!r} with the URL's password"
    )
