"""An Airflow auth manager with a per-DAG rule, for the replication view's permission test.

Airflow's SimpleAuthManager grants DAG reads by role alone (and per team in multi-team mode), so it cannot say
"this user may read that DAG but not this one".  :class:`DagScopedAuthManager` is SimpleAuthManager (its
users, passwords, login and JWTs) with one rule added: the user ``reader`` may not read the DAG
:data:`HIDDEN_DAG`.  Airflow loads it by class path (``[core] auth_manager``) and calls it through the auth
manager interface like any other."""

from __future__ import annotations

from airflow.api_fastapi.auth.managers.base_auth_manager import ResourceMethod
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

READER = "reader"
HIDDEN_DAG = "airmirror__a__c"
CLASS_PATH = f"{__name__}.DagScopedAuthManager"


class DagScopedAuthManager(SimpleAuthManager):
    def is_authorized_dag(
        self,
        *,
        method: ResourceMethod,
        user: SimpleAuthManagerUser,
        access_entity: DagAccessEntity | None = None,
        details: DagDetails | None = None,
    ) -> bool:
        if user.username == READER and details is not None and details.id == HIDDEN_DAG:
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
