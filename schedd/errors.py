"""The error hierarchy every layer raises: one root, a stable `code` per class.

Boundaries translate these once: the API to an HTTP status and body, the CLI to an exit code.
"""

from __future__ import annotations


class SchedError(Exception):
    """Root of every error schedd raises on purpose."""

    code = "internal"
    http_status = 500
    exit_code = 1


class InvalidRequest(SchedError, ValueError):
    """The caller sent something the contract does not allow; `field` names what."""

    code = "invalid_request"
    http_status = 400
    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.reason = message


class InvalidSchedule(InvalidRequest):
    """A schedule, cron expression, time zone, instant or duration is not valid."""

    code = "invalid_schedule"


class ConfigError(SchedError):
    """A node configuration file or value is not valid."""

    code = "config_error"
    exit_code = 2
