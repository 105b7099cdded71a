"""A tenant adopted from another cell names its id and token (api/tenants.py): apply refuses a
second one with either, as `tenant_exists`, rather than failing on the UNIQUE constraints."""

from __future__ import annotations

from typing import Any

from tests.conftest import Applier


def tenant(name: str, tenant_id: str, token_hash: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "name": name,
        "token_hash": token_hash,
        "signing_secret": "s",
        "max_active_jobs": 10,
        "dispatch_rate": 0,
        "allowed_hosts": [],
    }


def test_a_second_tenant_with_the_same_id_or_token_is_tenant_exists(apply: Applier) -> None:
    assert apply("create_tenant", tenant("acme", "ten_1", "h1"))["status"] == "ok"
    for body in (tenant("other", "ten_1", "h2"), tenant("other", "ten_2", "h1")):
        result = apply("create_tenant", body)
        assert (result["status"], result["code"]) == ("rejected", "tenant_exists"), result
    assert apply("create_tenant", tenant("other", "ten_2", "h2"))["status"] == "ok"
