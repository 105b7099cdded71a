"""The tenant routes (admin), and a tenant's calendars, connections and retention."""

from __future__ import annotations

from schedd.api import calendars, connections, retention, tenants
from schedd.api.connections import ConnectionInput
from schedd.api.operation import Answer, Operation
from schedd.api.operations.parameters import (
    ADMIN,
    CALENDAR_NAME,
    CONNECTION_NAME,
    CURSOR,
    LIMIT,
    TENANT,
    TENANT_ID,
)
from schedd.retention import RetentionUpdate
from schedd.wire.calendars import CalendarDates, CalendarInput, CalendarList, CalendarView
from schedd.wire.tenants import (
    ConnectionList,
    ConnectionTest,
    ConnectionView,
    TenantCreate,
    TenantCredentials,
    TenantList,
    TenantPatch,
    TenantRetention,
    TenantView,
)

TENANT_LINKS = {
    "GetTenant": {
        "operationId": "getTenant",
        "parameters": {"tenant_id": "$response.body#/tenant_id"},
    }
}

CALENDAR_OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/calendars",
        handler=calendars.list_calendars,
        operation_id="listCalendars",
        tag="calendars",
        summary="List the tenant's calendars",
        access=TENANT,
        answers={200: Answer("Every calendar, by name (without its dates).", body=CalendarList)},
    ),
    Operation(
        method="POST",
        path="/v1/calendars",
        handler=calendars.create_calendar,
        operation_id="createCalendar",
        tag="calendars",
        summary="Create a calendar of local dates",
        description="Cron and every schedules exclude it by name (`schedule.exclude`): an "
        "occurrence whose date, in the schedule's zone, is in the calendar is recorded as a "
        "skipped run with reason calendar:NAME. 409 when the name is taken; 429 past 100.",
        access=TENANT,
        body=CalendarInput,
        answers={201: Answer("Created.", body=CalendarView)},
        errors=(409, 413, 429, 507),
    ),
    Operation(
        method="GET",
        path="/v1/calendars/{name}",
        handler=calendars.get_calendar,
        operation_id="getCalendar",
        tag="calendars",
        summary="Get a calendar with its dates",
        access=TENANT,
        parameters=(CALENDAR_NAME,),
        answers={200: Answer("The calendar.", body=CalendarView)},
    ),
    Operation(
        method="PUT",
        path="/v1/calendars/{name}",
        handler=calendars.put_calendar,
        operation_id="putCalendar",
        tag="calendars",
        summary="Create a calendar or replace its dates",
        description="Takes effect for every occurrence not yet claimed.",
        access=TENANT,
        parameters=(CALENDAR_NAME,),
        body=CalendarDates,
        answers={200: Answer("The calendar as saved.", body=CalendarView)},
        errors=(413, 429, 507),
    ),
    Operation(
        method="DELETE",
        path="/v1/calendars/{name}",
        handler=calendars.delete_calendar,
        operation_id="deleteCalendar",
        tag="calendars",
        summary="Delete a calendar",
        description="409 while a job that is not cancelled excludes it (the message names one).",
        access=TENANT,
        parameters=(CALENDAR_NAME,),
        answers={204: Answer("Deleted.")},
        errors=(409,),
    ),
)

OPERATIONS = (
    *CALENDAR_OPERATIONS,
    Operation(
        method="GET",
        path="/v1/connections",
        handler=connections.list_connections,
        operation_id="listConnections",
        tag="connections",
        summary="List the tenant's broker connections",
        access=TENANT,
        answers={
            200: Answer("Every connection, by name (never a URL).", body=ConnectionList),
        },
    ),
    Operation(
        method="POST",
        path="/v1/connections",
        handler=connections.create_connection,
        operation_id="createConnection",
        tag="connections",
        summary="Create a named broker connection",
        description="409 connection_exists when the name is taken; 429 past 100 connections; 422 "
        "when the SSRF guard refuses an address of the host or the host does not "
        "resolve.",
        access=TENANT,
        body=ConnectionInput,
        answers={
            201: Answer("Created; the URL is never shown again.", body=ConnectionView),
        },
        errors=(409, 413, 422, 429, 507),
    ),
    Operation(
        method="GET",
        path="/v1/connections/{name}",
        handler=connections.get_connection,
        operation_id="getConnection",
        tag="connections",
        summary="Get a connection",
        access=TENANT,
        parameters=(CONNECTION_NAME,),
        answers={
            200: Answer("The connection (never its URL).", body=ConnectionView),
        },
    ),
    Operation(
        method="DELETE",
        path="/v1/connections/{name}",
        handler=connections.delete_connection,
        operation_id="deleteConnection",
        tag="connections",
        summary="Delete a connection",
        description="409 connection_in_use while a live (active or paused) job names it; cancel "
        "those jobs or change their targets first.",
        access=TENANT,
        parameters=(CONNECTION_NAME,),
        answers={
            204: Answer("Deleted."),
        },
        errors=(409,),
    ),
    Operation(
        method="POST",
        path="/v1/connections/{name}/test",
        handler=connections.test_connection,
        operation_id="testConnection",
        tag="connections",
        summary="Connect to the broker as a deliverer would",
        description="503 no_broker_probe on a node without one.",
        access=TENANT,
        parameters=(CONNECTION_NAME,),
        answers={
            200: Answer("Whether it connected; a detail without secrets.", body=ConnectionTest),
        },
    ),
    Operation(
        method="GET",
        path="/v1/retention",
        handler=retention.get_retention,
        operation_id="getRetention",
        tag="retention",
        summary="The tenant's retention: effective, its own, the node's",
        access=TENANT,
        answers={
            200: Answer("How long the tenant's finished data is kept.", body=TenantRetention),
        },
    ),
    Operation(
        method="PUT",
        path="/v1/retention",
        handler=retention.set_retention,
        operation_id="setRetention",
        tag="retention",
        summary="Replace the tenant's own (shorter) retention",
        description="Replaces the tenant's own values: kinds it does not name follow the node's "
        "[retention] again. A value can only shorten the node's: a longer one is stored"
        " but has no effect. The leader's pruner deletes what is past the cutoffs in "
        "paced passes (a pass starts every few seconds).",
        access=TENANT,
        body=RetentionUpdate,
        answers={
            200: Answer("The tenant's retention as changed.", body=TenantRetention),
        },
        errors=(413,),
    ),
    Operation(
        method="POST",
        path="/v1/tenants",
        handler=tenants.create_tenant,
        operation_id="createTenant",
        tag="tenants",
        summary="Create a tenant",
        access=ADMIN,
        body=TenantCreate,
        answers={
            200: Answer(
                "A cell's adoption of a tenant it has adopted already with the same name and "
                "credentials (a retry): those credentials.",
                body=TenantCredentials,
            ),
            201: Answer(
                "The new tenant's credentials.", body=TenantCredentials, links=TENANT_LINKS
            ),
        },
        errors=(400, 409, 413, 422, 507),
    ),
    Operation(
        method="GET",
        path="/v1/tenants",
        handler=tenants.list_tenants,
        operation_id="listTenants",
        tag="tenants",
        summary="List tenants (tenant_id order)",
        access=ADMIN,
        parameters=(CURSOR, LIMIT),
        answers={
            200: Answer("A page of tenants.", body=TenantList),
        },
        errors=(400,),
    ),
    Operation(
        method="GET",
        path="/v1/tenants/{tenant_id}",
        handler=tenants.get_tenant,
        operation_id="getTenant",
        tag="tenants",
        summary="Get a tenant",
        access=ADMIN,
        parameters=(TENANT_ID,),
        answers={
            200: Answer("The tenant.", body=TenantView),
        },
        errors=(404,),
    ),
    Operation(
        method="PATCH",
        path="/v1/tenants/{tenant_id}",
        handler=tenants.update_tenant,
        operation_id="updateTenant",
        tag="tenants",
        summary="Change a tenant's settings",
        access=ADMIN,
        parameters=(TENANT_ID,),
        body=TenantPatch,
        answers={
            200: Answer("The tenant as changed.", body=TenantView),
        },
        errors=(400, 404, 409, 413, 422, 507),
    ),
    Operation(
        method="POST",
        path="/v1/tenants/{tenant_id}/rotate",
        handler=tenants.rotate_tenant,
        operation_id="rotateTenant",
        tag="tenants",
        summary="New token and signing secret",
        access=ADMIN,
        parameters=(TENANT_ID,),
        answers={
            200: Answer(
                "The new credentials; the old token stops working, the old secret keeps"
                " signing beside the new one for the overlap.",
                body=TenantCredentials,
            ),
        },
        errors=(404,),
    ),
)
