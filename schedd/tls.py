"""TLS for the HTTP API: the server context a node serves with, and the client contexts that
verify a node's certificate (schedctl, the peers' clock probe); the context a node reaches
etcd with (`[cells] etcd_cacert`, `etcd_cert`, `etcd_key`).

Reads certificate files only; a file that cannot be used is a `ConfigError` naming the option.
"""

from __future__ import annotations

import logging
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from schedd.config import CellsSettings, NodeConfig
from schedd.errors import ConfigError

if TYPE_CHECKING:
    from cryptography import x509

log = logging.getLogger(__name__)
MIN_VERSION = ssl.TLSVersion.TLSv1_2


def server_context(cert: Path, key: Path, *, now: datetime | None = None) -> ssl.SSLContext:
    """An HTTPS server context (TLS 1.2 at least) with the certificate chain and its key."""
    leaf = _leaf_certificate(cert)
    expires = leaf.not_valid_after_utc
    if expires <= (now or datetime.now(UTC)):
        raise ConfigError(f"api.tls_cert {str(cert)!r} expired on {expires:%Y-%m-%d %H:%M}Z")
    _check_readable(key, "api.tls_key")
    _warn_if_world_readable(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MIN_VERSION
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"api.tls_key {str(key)!r} is not the PEM private key of api.tls_cert {str(cert)!r} "
            f"({_ssl_reason(exc)})"
        ) from None
    log.info("api tls on subject=%s expires=%s", leaf.subject.rfc4514_string(), expires.date())
    return context


def _leaf_certificate(cert: Path) -> x509.Certificate:
    """The first certificate of a PEM chain file (the node's own)."""
    from cryptography import x509  # here: schedctl imports this module and needs no parsing

    _check_readable(cert, "api.tls_cert")
    try:
        return x509.load_pem_x509_certificates(cert.read_bytes())[0]
    except ValueError:
        raise ConfigError(f"api.tls_cert {str(cert)!r} holds no PEM certificate") from None


def client_context(cafile: Path | None = None, *, field: str = "--cacert") -> ssl.SSLContext:
    """A verifying client context (TLS 1.2 at least): trusts only `cafile` when given, else the
    system's trust store. Host names and IP addresses are checked against the certificate."""
    if cafile is None:
        context = ssl.create_default_context()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # without the system's CAs
        _load_cas(context, cafile, field)
    context.minimum_version = MIN_VERSION
    return context


def peer_context(ca: Path | None, own_cert: Path | None) -> ssl.SSLContext:
    """How a node verifies its peers' API certificates: `api.tls_ca` when given; else the
    system's trust store plus the certificates in the node's own `api.tls_cert` file, so a
    chain file that ends with the cluster's CA is enough on its own."""
    if ca is not None:
        return client_context(ca, field="api.tls_ca")
    context = client_context()
    if own_cert is not None:
        _load_cas(context, own_cert, "api.tls_cert")
    return context


def _load_cas(context: ssl.SSLContext, cafile: Path, field: str) -> None:
    _check_readable(cafile, field)
    try:
        context.load_verify_locations(cafile=cafile)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"{field} {str(cafile)!r} holds no PEM certificate ({_ssl_reason(exc)})"
        ) from None


def _check_readable(path: Path, field: str) -> None:
    where = f"{field} {str(path)!r}"
    try:
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise ConfigError(f"{where} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{where} is a directory, not a file") from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror or exc}") from None


def _warn_if_world_readable(key: Path) -> None:
    if key.stat().st_mode & 0o004:
        log.warning("api.tls_key is readable by every user: chmod 0640 %s", key)


def _no_password() -> str:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key's passphrase.
    raise ConfigError("api.tls_key is encrypted: give an unencrypted key (mode 0640, group schedd)")


def _ssl_reason(exc: ssl.SSLError) -> str:
    if exc.reason in (None, "PEM_LIB"):
        return "not a PEM key"
    return exc.reason.lower().replace("_", " ")


def etcd_context(cells: CellsSettings) -> ssl.SSLContext | None:
    """The client context for etcd's https:// URLs: its CA (`cells.etcd_cacert`, else the
    system's trust store) and this node's client certificate (`cells.etcd_cert`, `etcd_key`);
    None when none of them is set (aiohttp's default: the system's trust store)."""
    if not cells.has_etcd_tls:
        return None
    context = client_context(cells.etcd_cacert, field="cells.etcd_cacert")
    if cells.etcd_cert is not None and cells.etcd_key is not None:
        _load_client_certificate(context, cells.etcd_cert, cells.etcd_key)
    return context


def _load_client_certificate(context: ssl.SSLContext, cert: Path, key: Path) -> None:
    _check_readable(cert, "cells.etcd_cert")
    _check_readable(key, "cells.etcd_key")
    _warn_if_world_readable(key)
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"cells.etcd_key {str(key)!r} is not the PEM private key of cells.etcd_cert "
            f"{str(cert)!r} ({_ssl_reason(exc)})"
        ) from None


def node_contexts(config: NodeConfig) -> tuple[ssl.SSLContext | None, ssl.SSLContext]:
    """A node's API server context (None: plain HTTP) and the context verifying its peers."""
    try:
        server = None
        if config.tls_cert is not None and config.tls_key is not None:
            server = server_context(config.tls_cert, config.tls_key)
        return server, peer_context(config.tls_ca, config.tls_cert)
    except ConfigError as exc:
        raise ConfigError(f"{config.path}: {exc}") from None
