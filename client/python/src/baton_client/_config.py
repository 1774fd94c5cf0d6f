"""Where the client connects, read like the ``baton`` CLI reads it.

Precedence, later wins: the config file, then the environment, then explicit arguments.

- The file is ``config.toml`` in ``$BATON_HOME/config/`` when ``BATON_HOME`` is set, else in
  ``$XDG_CONFIG_HOME/baton/``, else in ``~/.config/baton/``. Its keys ``server``, ``token``
  and ``ca_cert`` are read; the CLI's other keys are ignored. A missing file is no error;
  one that cannot be read or is not valid TOML is a :class:`ConfigError`.
- ``BATON_SERVER``, ``BATON_TOKEN``, ``BATON_CA_CERT`` (an empty value counts as unset).
- The ``server``, ``token`` and ``ca_cert`` arguments of :class:`~baton_client.Client`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_SERVER = "http://127.0.0.1:7437"

__all__ = ["DEFAULT_SERVER", "ConfigError", "Settings", "config_file", "load_settings", "server_url"]


class ConfigError(ValueError):
    """The config file cannot be read or holds something that is not a Baton config."""


@dataclass(frozen=True)
class Settings:
    """The effective connection settings."""

    #: The hub's URL, ``http://HOST:PORT`` or ``https://HOST:PORT`` (normalized).
    server: str
    #: The access token sent as ``authorization: Bearer <token>``; ``None`` = none.
    token: str | None = None
    #: A CA certificate (PEM) trusted for an ``https://`` server besides the system's roots.
    ca_cert: Path | None = None
    #: The config file that was looked for (it may not exist).
    config_file: Path | None = None

    @property
    def tls(self) -> bool:
        return self.server.startswith("https://")

    @property
    def target(self) -> str:
        """``host:port`` for gRPC (the scheme's default port when the URL names none)."""
        return _target(self.server)

    def __repr__(self) -> str:  # never print the token
        token = "None" if self.token is None else "'***'"
        return (
            f"Settings(server={self.server!r}, token={token}, ca_cert={self.ca_cert!r}, "
            f"config_file={self.config_file!r})"
        )


def config_file(env: Mapping[str, str] | None = None) -> Path:
    """The config file's path (whether or not it exists)."""
    env = os.environ if env is None else env
    home = env.get("BATON_HOME")
    if home:
        return Path(home) / "config" / "config.toml"
    xdg = env.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg) / "baton" / "config.toml"
    return Path(env.get("HOME") or Path.home()) / ".config" / "baton" / "config.toml"


def server_url(given: str) -> str:
    """Normalizes a server address: ``http://`` or ``https://``; none means ``http://``.

    >>> server_url("127.0.0.1:7437")
    'http://127.0.0.1:7437'
    """
    given = given.strip()
    if not given:
        raise ValueError(f"server address is empty; use e.g. {DEFAULT_SERVER}")
    if "://" not in given:
        url = f"http://{given}"
    else:
        scheme, rest = given.split("://", 1)
        if scheme.lower() not in ("http", "https"):
            raise ValueError(
                f"server {given!r}: a Baton hub is reached over http:// or https://, not "
                f"{scheme}:// (e.g. http://127.0.0.1:7437, https://hub.example.com:7437, or "
                "HOST:PORT for http)"
            )
        url = f"{scheme.lower()}://{rest}"
    _target(url)  # validates host, port and path
    return url.rstrip("/")


def _target(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError as e:
        raise ValueError(f"server {url!r}: {e}") from None
    host = parts.hostname
    if not host:
        raise ValueError(f"server {url!r} names no host (e.g. {DEFAULT_SERVER})")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"server {url!r}: a Baton hub URL has no path (e.g. {DEFAULT_SERVER})")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{host}:{port}"


def _read_file(path: Path) -> dict[str, object]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ConfigError(f"reading {path}: {e}") from e
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not a valid Baton config: {e}") from e
    for key in ("server", "token", "ca_cert"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key} must be a string, not {type(data[key]).__name__}")
    return data


def load_settings(
    server: str | None = None,
    token: str | None = None,
    ca_cert: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Reads the config file, then the environment, then these arguments (later wins).

    An argument that is ``None`` or empty is not given. ``env`` replaces ``os.environ``
    (for tests).
    """
    env = os.environ if env is None else env
    path = config_file(env)
    file = _read_file(path)

    def pick(arg: str | os.PathLike[str] | None, var: str, key: str) -> str | None:
        if arg is not None and os.fspath(arg) != "":
            return os.fspath(arg)
        value = env.get(var)
        if value:
            return value
        from_file = file.get(key)
        return from_file if isinstance(from_file, str) and from_file != "" else None

    chosen_server = pick(server, "BATON_SERVER", "server") or DEFAULT_SERVER
    chosen_ca = pick(ca_cert, "BATON_CA_CERT", "ca_cert")
    return Settings(
        server=server_url(chosen_server),
        token=pick(token, "BATON_TOKEN", "token"),
        ca_cert=Path(chosen_ca).expanduser() if chosen_ca else None,
        config_file=path,
    )
