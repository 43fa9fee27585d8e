"""Transport security of the feature shards: TLS certificates and a shared token, as typed settings.

The rows a shard serves are the dataset's features; anyone who can reach a
shard's port could read them all. Two independent locks, each optional:

- TLS (:class:`ServerSecurity` ``tls_cert``/``tls_key``): the channel is
  encrypted and the client verifies the server's certificate against its
  ``tls_ca``; with ``tls_client_ca`` the server also requires and verifies a
  client certificate (mutual TLS).
- A shared token (``token_file``, or the :data:`TOKEN_ENV` environment
  variable; never a flag, so it never shows in ``ps``): every call but the
  gRPC health service's must carry ``authorization: Bearer <token>``
  (:mod:`saintpipe.services.feature_shard.auth`), else UNAUTHENTICATED.

The models hold paths; :meth:`ServerSecurity.load` and :meth:`ClientSecurity.load`
read the files and fail with one-line :class:`~saintpipe.core.errors.ConfigError`
s naming the setting and the file (missing, unreadable, not PEM) or saying what
is wrong with the token (empty, short, a placeholder), never the token itself.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import grpc
import pydantic

from saintpipe.core.config import StrictModel
from saintpipe.core.credentials import PLACEHOLDER_PREFIX
from saintpipe.core.errors import ConfigError
from saintpipe.core.files import TooLarge, read_capped

TOKEN_ENV = "SAINTPIPE_FEATURE_TOKEN"
MIN_TOKEN_CHARS = 16
PLACEHOLDER = PLACEHOLDER_PREFIX  # what example env files ship: refused, so nobody deploys it
# A token or PEM file larger than this is not one (a wrong path: a dataset, a device).
_MAX_FILE_BYTES = 1 << 20
_MAKE_ONE = "make one with: python -c 'import secrets; print(secrets.token_hex(24))'"
_PEM_MARKERS = {"certificate": (b"-----BEGIN CERTIFICATE-----",), "private key": (b"-----BEGIN", b"PRIVATE KEY-----")}


def check_token(token: str, source: str) -> str:
    """``token`` if it may guard the shards; else ConfigError naming ``source`` (never echoing the token)."""
    if not token:
        raise ConfigError(f"{source}: the feature-shard token is empty; {_MAKE_ONE}")
    if token.lower().startswith(PLACEHOLDER):
        raise ConfigError(f"{source}: the feature-shard token is still the {PLACEHOLDER!r} placeholder; {_MAKE_ONE}")
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"{source}: the feature-shard token has {len(token)} characters, fewer than {MIN_TOKEN_CHARS}; {_MAKE_ONE}"
        )
    if not all(33 <= ord(c) <= 126 for c in token):  # it travels in a header: visible ASCII, no spaces
        raise ConfigError(f"{source}: the feature-shard token holds characters other than visible ASCII; {_MAKE_ONE}")
    return token


def read_token_file(path: Path, label: str) -> str:
    """The token in ``path`` (surrounding whitespace, e.g. a final newline, removed), checked."""
    try:
        token = _read(path, label).decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label} {path}: cannot read it ({exc})") from None
    return check_token(token, f"{label} {path}")


def _read(path: Path, label: str) -> bytes:
    """The bytes of a token or PEM file, at most 1 MiB of them; ConfigError naming setting and file."""
    try:
        return read_capped(path, _MAX_FILE_BYTES)
    except OSError as exc:
        raise ConfigError(f"{label} {path}: cannot read it ({exc.strerror or exc})") from None
    except TooLarge:
        raise ConfigError(f"{label} {path}: cannot read it (larger than 1 MiB: not a token or PEM file)") from None


def read_pem(path: Path, label: str, kind: str = "certificate") -> bytes:
    """The PEM bytes of ``path`` (``kind``: "certificate" or "private key"); ConfigError naming setting and file."""
    data = _read(path, label)
    if not all(marker in data for marker in _PEM_MARKERS[kind]):
        raise ConfigError(f"{label} {path}: not a PEM {kind} (no '-----BEGIN ...{kind.upper()}-----' block)")
    return data


class _Settings(StrictModel):
    """What both sides share: a token, and names for the settings in error messages."""

    token_file: Path | None = pydantic.Field(
        None, description=f"file holding the shared token (default: the {TOKEN_ENV} environment variable)"
    )
    token: pydantic.SecretStr | None = pydantic.Field(
        None, exclude=True, description="the token itself, for programs (never from a flag)"
    )
    # setting -> how the user wrote it ("feature_shard.tls_cert (--tls-cert)"), for error messages.
    _labels: dict[str, str] = pydantic.PrivateAttr(default_factory=dict)

    def named(self, labels: Mapping[str, str]) -> Self:
        """This object, its settings named ``labels[field]`` in error messages (default: the field name)."""
        self._labels = dict(labels)
        return self

    def _label(self, field: str) -> str:
        return self._labels.get(field, field)

    def with_env_token(self, environ: Mapping[str, str] | None = None) -> Self:
        """A copy whose token comes from :data:`TOKEN_ENV` (``environ``, default ``os.environ``) when neither
        ``token_file`` nor ``token`` is set (this object when they are, or when the variable is unset)."""
        environ = os.environ if environ is None else environ
        if self.token_file is not None or self.token is not None or TOKEN_ENV not in environ:
            return self
        check_token(environ[TOKEN_ENV], f"environment variable {TOKEN_ENV}")
        copy = self.model_copy(update={"token": pydantic.SecretStr(environ[TOKEN_ENV])})
        copy._labels = dict(self._labels)
        return copy

    def _token(self) -> str | None:
        if self.token_file is not None:
            return read_token_file(self.token_file, self._label("token_file"))
        if self.token is not None:
            return check_token(self.token.get_secret_value(), "the token given")
        return None


@dataclass(frozen=True)
class ServerCredentials:
    """A server's loaded security: TLS credentials (None: plaintext) and the token calls must carry."""

    credentials: grpc.ServerCredentials | None
    token: str | None
    mutual_tls: bool
    ssl_context: ssl.SSLContext | None = None  # the same TLS settings for the bulk data plane (bulk_server.py)

    def describe(self) -> str:
        """One phrase for the start-up log line, e.g. ``"TLS with client certificates (mTLS), token required"``."""
        tls = "plaintext (no TLS)" if self.credentials is None else (
            "TLS with client certificates (mTLS)" if self.mutual_tls else "TLS")
        return f"{tls}, {'token required' if self.token else 'no token'}"


class ServerSecurity(_Settings):
    """A feature shard's TLS certificate and key, optional client CA (mTLS), and token."""

    tls_cert: Path | None = pydantic.Field(None, description="PEM certificate chain of the server (turns TLS on)")
    tls_key: Path | None = pydantic.Field(None, description="PEM private key of tls_cert")
    tls_client_ca: Path | None = pydantic.Field(
        None, description="PEM CA bundle: clients must present a certificate it signed (mutual TLS)"
    )

    def load(self) -> ServerCredentials:
        """Read the certificate, key and token files.

        Raises:
            ConfigError: a file is missing, unreadable or not PEM; the settings do not go together; a bad token.
        """
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = ("tls_cert", "tls_key") if self.tls_cert is not None else ("tls_key", "tls_cert")
            raise ConfigError(f"{self._label(given)} is set but {self._label(missing)} is not: TLS needs both")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ConfigError(
                f"{self._label('tls_client_ca')} needs {self._label('tls_cert')} and {self._label('tls_key')}: "
                "client certificates are checked only over TLS"
            )
        credentials = None
        if self.tls_cert is not None and self.tls_key is not None:  # both or neither, checked above
            chain = read_pem(self.tls_cert, self._label("tls_cert"))
            key = read_pem(self.tls_key, self._label("tls_key"), "private key")
            client_ca = read_pem(self.tls_client_ca, self._label("tls_client_ca")) if self.tls_client_ca else None
            credentials = grpc.ssl_server_credentials(
                [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
            )
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(self.tls_cert, self.tls_key)
            if client_ca is not None:
                context.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
                context.verify_mode = ssl.CERT_REQUIRED
            return ServerCredentials(credentials, self._token(), client_ca is not None, context)
        return ServerCredentials(credentials, self._token(), self.tls_client_ca is not None)


@dataclass(frozen=True)
class ChannelSecurity:
    """A client's loaded security: how to open a channel to a shard and what each call carries."""

    credentials: grpc.ChannelCredentials | None  # None: a plaintext channel
    options: tuple[tuple[str, str], ...]  # extra channel options (the TLS name override)
    metadata: tuple[tuple[str, str], ...] | None  # per-call metadata (the token on a plaintext channel)
    has_token: bool
    # The same settings for the bulk data plane (bulk_client.py): TLS context, expected name, token.
    ssl_context: ssl.SSLContext | None = None
    server_name: str | None = None
    token: str | None = None

    def channel(self, address: str, options: list) -> grpc.Channel:
        """A channel to ``address`` with these credentials and ``options`` (plus the name override)."""
        if self.credentials is None:
            return grpc.insecure_channel(address, options=options + list(self.options))
        return grpc.secure_channel(address, self.credentials, options=options + list(self.options))


PLAINTEXT = ChannelSecurity(None, (), None, False)


class ClientSecurity(_Settings):
    """How a feature client reaches the shards: the CA that signed their certificates, a client certificate
    for mutual TLS, the name on the servers' certificates, and the token."""

    tls_ca: Path | None = pydantic.Field(
        None, description="PEM CA bundle that signed the shards' certificates (turns TLS on)"
    )
    tls_cert: Path | None = pydantic.Field(
        None, description="PEM client certificate chain (for shards that require one)"
    )
    tls_key: Path | None = pydantic.Field(None, description="PEM private key of tls_cert")
    tls_server_name: str | None = pydantic.Field(
        None, min_length=1, description="name to expect on the shards' certificates instead of the address's host"
    )

    def load(self) -> ChannelSecurity:
        """Read the CA, certificate, key and token files.

        Raises:
            ConfigError: a file is missing, unreadable or not PEM; the settings do not go together; a bad token.
        """
        token = self._token()
        if self.tls_ca is None:
            for field in ("tls_cert", "tls_key", "tls_server_name"):
                if getattr(self, field) is not None:
                    raise ConfigError(f"{self._label(field)} needs {self._label('tls_ca')} (it applies to TLS only)")
            metadata = (("authorization", f"Bearer {token}"),) if token else None
            return ChannelSecurity(None, (), metadata, token is not None, token=token)
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = ("tls_cert", "tls_key") if self.tls_cert is not None else ("tls_key", "tls_cert")
            raise ConfigError(f"{self._label(given)} is set but {self._label(missing)} is not: a client certificate "
                              "needs both")
        ca = read_pem(self.tls_ca, self._label("tls_ca"))
        credentials = grpc.ssl_channel_credentials(
            root_certificates=ca,
            private_key=read_pem(self.tls_key, self._label("tls_key"), "private key") if self.tls_key else None,
            certificate_chain=read_pem(self.tls_cert, self._label("tls_cert")) if self.tls_cert else None,
        )
        if token:  # gRPC sends call credentials only over TLS; here they are: one header per call, set in C
            credentials = grpc.composite_channel_credentials(credentials, grpc.access_token_call_credentials(token))
        options = (("grpc.ssl_target_name_override", self.tls_server_name),) if self.tls_server_name else ()
        context = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
        if self.tls_cert is not None:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return ChannelSecurity(credentials, options, None, token is not None, context, self.tls_server_name, token)
