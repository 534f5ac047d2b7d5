"""MirrorMaker 2 in dedicated mode, from the Maven Central jars at the brokers' Kafka version: the command and
its files, for the bench and the MM2 compatibility tests."""

from __future__ import annotations

from pathlib import Path

from airmirror.devtools.local_kafka import mm2_classpath

MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
MM2_HEAP = "-Xmx1g"
MM2_LOG4J = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


def mm2_command(config: Path, log_config: Path, target_alias: str) -> list[str]:
    """Dedicated mode, driving only the flows into ``target_alias``."""
    return [
        "java",
        MM2_HEAP,
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        mm2_classpath(),
        MM2_MAIN,
        str(config),
        "--clusters",
        target_alias,
    ]


def write_mm2_files(workdir: Path, name: str, properties: str) -> tuple[Path, Path]:
    """``{name}.properties`` holding ``properties`` and a log4j2 config logging to ``{name}.log``, in ``workdir``."""
    config, log_config = workdir / f"{name}.properties", workdir / f"{name}-log4j2.properties"
    config.write_text(properties)
    log_config.write_text(MM2_LOG4J.format(log=workdir / f"{name}.log"))
    return config, log_config
