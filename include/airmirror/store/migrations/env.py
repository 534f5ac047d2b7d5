"""Alembic environment of the airmirror metadata store.

Contract: migrations run programmatically only, through
:func:`airmirror.store.engine.alembic_config`, which hands over an open SQLAlchemy
``Connection`` in ``config.attributes["connection"]``.  The caller owns that connection's
transaction (so the whole upgrade commits or rolls back as one unit where the backend allows it).
Versions are recorded in ``airmirror_alembic_version``; autogenerate only ever looks at
``airmirror_*`` tables, because the database may also hold Airflow's tables.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from airmirror.store.schema import TABLE_PREFIX, VERSION_TABLE, metadata


def _include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Let autogenerate see only the store's own tables."""
    return type_ != "table" or (name is not None and name.startswith(TABLE_PREFIX))


def _run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=_include_name,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _connection() -> Connection:
    connection = context.config.attributes.get("connection")
    if context.is_offline_mode() or not isinstance(connection, Connection):
        raise RuntimeError(
            "airmirror migrations run online only, with a connection passed by "
            "airmirror.store.engine.alembic_config(); use MetadataStore.migrate()"
        )
    return connection


_run_migrations(_connection())
