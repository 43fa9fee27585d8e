"""Secrets from files and the environment, never from argv; placeholders refused.

Deployments hand secrets to processes as files (Kubernetes Secret volumes, Compose secrets under
``/run/secrets``) or, failing that, environment variables: both stay out of ``ps`` and ``/proc/PID/cmdline``.
This module reads them the same way everywhere and refuses the ``change-me-*`` placeholders that
``.env.example`` and the chart's documentation show, so a stack started with them stops at once with a message
instead of running with a password everyone knows.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from saintpipe.core.errors import ConfigError
from saintpipe.core.files import TooLarge, read_capped

PLACEHOLDER_PREFIX = "change-me"
# The Redis password, read from this file when the Redis URL carries none.
REDIS_PASSWORD_FILE_ENV = "SAINTPIPE_REDIS_PASSWORD_FILE"
# A secret file larger than this is not a secret file (a wrong path: a dataset, a device).
_MAX_SECRET_BYTES = 64 * 1024


def refuse_placeholder(value: str, what: str) -> str:
    """``value``, unless it is one of the documented placeholders (ConfigError naming ``what``)."""
    if value.strip().lower().startswith(PLACEHOLDER_PREFIX):
        raise ConfigError(
            f"{what} is still the placeholder {value.strip()[:24]!r}: set a real secret (e.g. the output of "
            "`openssl rand -hex 24`; in compose, in .env) before starting"
        )
    return value


def read_secret_file(path: str | os.PathLike[str], what: str) -> str:
    """The secret in ``path`` (one line; surrounding whitespace dropped), checked.

    Raises:
        ConfigError: naming ``what`` and the file: missing, not a regular file, unreadable, not UTF-8, empty,
            larger than 64 KiB, or a placeholder.
    """
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{what} file {file}: " + ("not a regular file" if file.exists() else "not found"))
    try:
        text = read_capped(file, _MAX_SECRET_BYTES).decode("utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"{what} file {file}: {exc.strerror or exc}") from None
    except TooLarge:
        raise ConfigError(f"{what} file {file}: larger than {_MAX_SECRET_BYTES // 1024} KiB: not a secret file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} file {file}: not UTF-8 text") from None
    if not text:
        raise ConfigError(f"{what} file {file}: empty")
    return refuse_placeholder(text, f"{what} (from {file})")


def redis_password(url: str) -> str | None:
    """The password to send to the Redis at ``url``: the URL's own, else ``$SAINTPIPE_REDIS_PASSWORD_FILE``'s.

    None when neither gives one (a Redis without a password).

    Raises:
        ConfigError: the file is unusable, or the password is a placeholder.
    """
    given = urlsplit(url).password
    if given:
        return refuse_placeholder(unquote(given), "the Redis password in the Redis URL")
    path = os.environ.get(REDIS_PASSWORD_FILE_ENV)
    if path:
        return read_secret_file(path, f"the Redis password ({REDIS_PASSWORD_FILE_ENV})")
    return None


def check_ray_token() -> None:
    """Refuse a Ray cluster token (``RAY_AUTH_TOKEN`` or the file ``RAY_AUTH_TOKEN_PATH``) that is a placeholder."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    if token:
        refuse_placeholder(token, "RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        read_secret_file(path, "the Ray token (RAY_AUTH_TOKEN_PATH)")


def redis_url_with_password(url: str) -> str:
    """``url`` with the password of ``$SAINTPIPE_REDIS_PASSWORD_FILE`` in it, when it carries none.

    For handing the URL to processes on other hosts in memory (Ray actors get it in their spec): they do not have
    this host's secret file. Never put the result in argv or a log line (redact it).
    """
    parts = urlsplit(url)
    password = None if parts.password else redis_password(url)
    if not password:
        return url
    user = quote(unquote(parts.username or ""), safe="")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))
