"""Configuration: file < environment < arguments, like the baton CLI (no server needed)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from baton_client import DEFAULT_SERVER, Client, ConfigError, config_file, load_settings, server_url

VARS = ("BATON_HOME", "XDG_CONFIG_HOME", "BATON_SERVER", "BATON_TOKEN", "BATON_CA_CERT")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment: HOME in a temp dir, no Baton variables."""
    for var in VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_without_file_or_environment(home: Path) -> None:
    settings = load_settings()
    assert settings.server == DEFAULT_SERVER == "http://127.0.0.1:7437"
    assert settings.token is None and settings.ca_cert is None
    assert settings.config_file == home / ".config" / "baton" / "config.toml"
    assert settings.target == "127.0.0.1:7437" and not settings.tls


def test_file_then_environment_then_arguments(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        home / ".config" / "baton" / "config.toml",
        'server = "file-host:1"\ntoken = "file-token"\nca_cert = "/file/ca.pem"\n'
        "checkpoint_every = 5\nsummarize = \"claude\"\n[brief_budgets]\ncodex = 5000\n",
    )
    file_only = load_settings()
    assert (file_only.server, file_only.token, str(file_only.ca_cert)) == (
        "http://file-host:1",
        "file-token",
        "/file/ca.pem",
    )

    monkeypatch.setenv("BATON_SERVER", "https://env-host:2")
    monkeypatch.setenv("BATON_TOKEN", "env-token")
    env = load_settings()
    assert (env.server, env.token, str(env.ca_cert)) == ("https://env-host:2", "env-token", "/file/ca.pem")

    args = load_settings(server="arg-host:3", token="arg-token", ca_cert="/arg/ca.pem")
    assert (args.server, args.token, str(args.ca_cert)) == ("http://arg-host:3", "arg-token", "/arg/ca.pem")


def test_empty_environment_values_count_as_unset(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(home / ".config" / "baton" / "config.toml", 'server = "file-host:1"\ntoken = "file-token"\n')
    monkeypatch.setenv("BATON_SERVER", "")
    monkeypatch.setenv("BATON_TOKEN", "")
    settings = load_settings()
    assert settings.server == "http://file-host:1" and settings.token == "file-token"


def test_baton_home_wins_over_xdg(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "xdg" / "baton" / "config.toml", 'server = "xdg-host:1"\n')
    write(tmp_path / "bh" / "config" / "config.toml", 'server = "baton-home-host:1"\ntoken = "bh"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert load_settings().server == "http://xdg-host:1"
    assert config_file() == tmp_path / "xdg" / "baton" / "config.toml"
    monkeypatch.setenv("BATON_HOME", str(tmp_path / "bh"))
    settings = load_settings()
    assert settings.server == "http://baton-home-host:1" and settings.token == "bh"
    assert settings.config_file == tmp_path / "bh" / "config" / "config.toml"


def test_xdg_config_home_wins_over_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(home / ".config" / "baton" / "config.toml", 'server = "home-host:1"\n')
    assert load_settings().server == "http://home-host:1"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    # No file under XDG_CONFIG_HOME: the defaults, not the HOME file.
    assert load_settings().server == DEFAULT_SERVER
    write(tmp_path / "xdg" / "baton" / "config.toml", 'server = "xdg-host:2"\n')
    assert load_settings().server == "http://xdg-host:2"


def test_invalid_toml_is_a_clear_error(home: Path) -> None:
    path = write(home / ".config" / "baton" / "config.toml", 'server = "unterminated\n')
    with pytest.raises(ConfigError) as raised:
        load_settings()
    assert str(path) in str(raised.value) and "not a valid Baton config" in str(raised.value)
    # The client reads the same file and fails the same way, even with every value given.
    with pytest.raises(ConfigError):
        Client(server="127.0.0.1:1", token="t")


def test_a_key_of_the_wrong_type_is_an_error(home: Path) -> None:
    write(home / ".config" / "baton" / "config.toml", "server = 7437\n")
    with pytest.raises(ConfigError, match="server must be a string"):
        load_settings()


def test_an_unreadable_file_is_an_error(home: Path) -> None:
    (home / ".config" / "baton" / "config.toml").mkdir(parents=True)  # a directory: cannot be read
    with pytest.raises(ConfigError, match="reading"):
        load_settings()


@pytest.mark.parametrize(
    ("given", "url", "target"),
    [
        ("127.0.0.1:7437", "http://127.0.0.1:7437", "127.0.0.1:7437"),
        (" https://hub:7437 ", "https://hub:7437", "hub:7437"),
        ("HTTP://hub:7437/", "http://hub:7437", "hub:7437"),
        ("http://[::1]:7437", "http://[::1]:7437", "[::1]:7437"),
        ("https://hub.example.com", "https://hub.example.com", "hub.example.com:443"),
        ("hub", "http://hub", "hub:80"),
    ],
)
def test_server_addresses(given: str, url: str, target: str, home: Path) -> None:
    settings = load_settings(server=given)
    assert settings.server == url and settings.target == target
    assert settings.tls == url.startswith("https://")


@pytest.mark.parametrize("given", ["grpc://hub:7437", "unix:///tmp/sock", "ftp://x"])
def test_other_schemes_are_refused(given: str, home: Path) -> None:
    with pytest.raises(ValueError, match=r"http:// or https://"):
        server_url(given)
    with pytest.raises(ValueError, match=r"not (grpc|unix|ftp)://"):
        Client(server=given)


def test_a_bad_scheme_from_the_environment_is_refused(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_SERVER", "grpcs://hub:1")
    with pytest.raises(ValueError, match="grpcs://"):
        load_settings()


def test_the_token_is_sent_as_a_bearer_and_never_printed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_TOKEN", "s3cret-token")
    with Client() as client:
        assert client.metadata == (("authorization", "Bearer s3cret-token"),)
        assert "s3cret" not in repr(client.settings)
    with Client(token=None) as client:
        assert client.metadata == (("authorization", "Bearer s3cret-token"),)


def test_https_with_a_ca_cert(home: Path, tmp_path: Path) -> None:
    ca = write(tmp_path / "ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    with Client(server="https://hub.invalid:7437", ca_cert=ca) as client:
        assert client.settings.tls and client.settings.ca_cert == ca
    with pytest.raises(ValueError, match="ca_cert"):
        Client(server="https://hub.invalid:7437", ca_cert=tmp_path / "missing.pem")


def test_a_client_for_an_unreachable_hub_raises_unavailable(home: Path) -> None:
    from baton_client import RetryPolicy, Unavailable

    with Client(server="127.0.0.1:1", retry=RetryPolicy(attempts=2, initial_backoff=0.01), timeout=5) as client:
        with pytest.raises(Unavailable) as raised:
            client.get_session(session_id="x")
    assert raised.value.code == grpc.StatusCode.UNAVAILABLE
    assert raised.value.status is None  # a transport error: no server details
