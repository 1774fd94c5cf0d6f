"""Browser tests of Baton's web view: Debian's Chromium (``/usr/bin/chromium``) driven by
a pinned Playwright for Python, against the real ``baton-server`` (``$BATON_SERVER_BIN``)
with data written by the real client (``$BATON_BIN``): hooks, memory, tokens.

The whole suite runs on SQLite; tests marked ``both`` (live updates, scopes, revocation,
security) also on Postgres when ``$BATON_TEST_POSTGRES_URL`` names a fresh database. One
browser per run; each test has its own context (cookies) and its own project.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CHROMIUM = os.environ.get("BATON_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("BATON_WEB_SCREENSHOTS", "target/web-screenshots"))
# Short enough that a session goes idle within a test.
IDLE_AFTER = "3s"


def need(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        pytest.fail(f"{name} is not set (tests/tests/web.rs sets it)", pytrace=False)
    return value


class Hub:
    """One baton-server with an admin token, and the real client pointed at it."""

    def __init__(self, workdir: Path, database_url: str, backend: str) -> None:
        self.workdir = workdir
        self.backend = backend
        self.database_url = database_url
        self.server_bin = need("BATON_SERVER_BIN")
        self.client_bin = need("BATON_BIN")
        self.admin = self.token_create("admin", "admin")
        self.log = workdir / "server.log"
        args = [
            self.server_bin,
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            "--idle-after",
            IDLE_AFTER,
            "--reaper-interval",
            "500ms",
            "--log-level",
            "info",
        ]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.addr = self._wait_for_address()
        self.url = f"http://{self.addr}"

    def _wait_for_address(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace") if self.log.exists() else ""
            found = re.search(r"baton-server listening.*addr=(\S+)", text)
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"baton-server did not start:\n{self.log.read_text(errors='replace')}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def admin_command(self, *args: str) -> str:
        out = subprocess.run(
            [self.server_bin, "--database-url", self.database_url, *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def token_create(self, name: str, role: str, project: str | None = None) -> str:
        args = ["token", "create", "--name", name, "--role", role]
        if project:
            args += ["--project", project]
        return self.admin_command(*args)

    def repo(self) -> Repo:
        return Repo(self, self.workdir / f"repo-{uuid.uuid4().hex[:8]}")


class Repo:
    """A git repository with its own project key, and the client run in it."""

    def __init__(self, hub: Hub, path: Path) -> None:
        self.hub = hub
        self.path = path
        self.home = path.parent / f"home-{path.name}"
        self.home.mkdir(parents=True)
        path.mkdir(parents=True)
        # Transcripts travel with checkpoints, so that pages can show them.
        (self.home / ".config/baton").mkdir(parents=True)
        (self.home / ".config/baton/config.toml").write_text("sync_transcripts = true\n")
        name = f"web-{uuid.uuid4().hex[:10]}"
        subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
        subprocess.run(
            ["git", "-C", str(path), "remote", "add", "origin", f"https://github.com/acme/{name}.git"], check=True
        )
        subprocess.run(
            ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
             "--allow-empty", "-m", "start"],
            check=True,
        )
        self.project = json.loads(self.baton("sessions", "--json"))["project"]

    def env(self, token: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local/share"),
            XDG_STATE_HOME=str(self.home / ".local/state"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
            BATON_SERVER=self.hub.url,
            BATON_TOKEN=token or self.hub.admin,
        )
        return env

    def baton(self, *args: str, stdin: str = "", token: str | None = None) -> str:
        out = subprocess.run(
            [self.hub.client_bin, *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=self.path,
            env=self.env(token),
            check=False,
        )
        assert out.returncode == 0, f"baton {' '.join(args)}: {out.stderr}"
        return out.stdout

    def plant(self, *args: str) -> dict[str, str]:
        """Writes through the gRPC API what the CLI has no command for (baton-plant)."""
        out = subprocess.run(
            [need("BATON_PLANT"), "--server", self.hub.url, "--token", self.hub.admin, "--project", self.project, *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        return dict(json.loads(out.stdout))

    def hook(self, event: str, conversation: str, transcript: Path | None = None, **fields: object) -> str:
        payload = {
            "session_id": conversation,
            "transcript_path": str(transcript or self.path / "no-transcript.jsonl"),
            "cwd": str(self.path),
            "hook_event_name": event,
            **fields,
        }
        out = self.baton("hook", "claude", event, stdin=json.dumps(payload))
        # A hook under load may queue its write for a later hook or a background sender; the
        # pages are asserted on what the hub holds, so wait until the queue has reached it.
        self.baton("sync")
        return out


def commit_by_agent(repo: Repo, conversation: str, name: str, text: str) -> str:
    """The agent's shell call commits a file: its hooks around `git commit` link it."""
    (repo.path / name).write_text(text)
    call = {"tool_name": "Bash", "tool_input": {"command": f"git commit -m 'Add {name}'"}, "tool_response": {"stdout": ""}}
    repo.hook("PreToolUse", conversation, **call)
    git = ["git", "-C", str(repo.path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", name], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"Add {name}"], check=True)
    repo.hook("PostToolUse", conversation, **call)
    return head(repo)


def head(repo: Repo) -> str:
    out = subprocess.run(["git", "-C", str(repo.path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both: also run on Postgres")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "hub" in metafunc.fixturenames:
        backends = ["sqlite"]
        if metafunc.definition.get_closest_marker("both") and os.environ.get("BATON_TEST_POSTGRES_URL"):
            backends.append("postgres")
        metafunc.parametrize("backend", backends, scope="session")


@pytest.fixture(scope="session")
def hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Hub]]:
    started: dict[str, Hub] = {}
    yield started
    for hub in started.values():
        hub.stop()


@pytest.fixture
def hub(backend: str, hubs: dict[str, Hub], tmp_path_factory: pytest.TempPathFactory) -> Hub:
    """The run's server on this backend (one per backend, shared: each test has its own project)."""
    if backend not in hubs:
        workdir = tmp_path_factory.mktemp(f"hub-{backend}")
        url = (
            f"sqlite://{workdir / 'baton.db'}"
            if backend == "sqlite"
            else os.environ["BATON_TEST_POSTGRES_URL"]
        )
        hubs[backend] = Hub(workdir, url, backend)
    return hubs[backend]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium", pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        print(f"\nbrowser: Chromium {browser.version} at {CHROMIUM}")
        yield browser
        browser.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context()
    yield context
    context.close()


def sign_in(page: Page, hub: Hub, token: str) -> None:
    page.goto(f"{hub.url}/signin")
    page.get_by_label("Access token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{hub.url}/")


@pytest.fixture
def page(context: BrowserContext, hub: Hub) -> Iterator[Page]:
    """A page signed in as the hub's admin; fails the test on any script error or dialog."""
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: errors.append(f"a dialog opened: {d.message}"))
    # A page answered with a 4xx on purpose (a conflict, a refusal) logs "Failed to load
    # resource": those are checked by the tests; a server error or a missing asset is not.
    page.on(
        "console",
        lambda m: errors.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text else None,
    )
    page.on(
        "response",
        lambda r: errors.append(f"{r.status} {r.url}")
        if r.status >= 500 or (r.status == 404 and ("/assets/" in r.url or "favicon" in r.url))
        else None,
    )
    sign_in(page, hub, hub.admin)
    yield page
    assert not errors, errors


def screenshot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def browser_context_factory(browser: Browser) -> Iterator[object]:
    """Makes more contexts (another signed-in person), closed after the test."""
    made: list[BrowserContext] = []

    def make() -> BrowserContext:
        context = browser.new_context()
        made.append(context)
        return context

    yield make
    for context in made:
        context.close()
