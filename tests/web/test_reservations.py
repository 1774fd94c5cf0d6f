"""The reservations page: who holds what, who waits, kept live as agents reserve, wait and
release through the real client."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
from conftest import Hub, need, screenshot
from playwright.sync_api import Page, expect


@pytest.mark.both
def test_holders_and_the_queue_live(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    for conversation in (str(uuid.uuid4()), str(uuid.uuid4())):
        repo.hook("SessionStart", conversation, source="startup")
    sessions = [s["id"] for s in json.loads(repo.baton("sessions", "--json"))["sessions"]]
    page.goto(f"{hub.url}/reservations?project={repo.project}")
    expect(page.get_by_text("Nobody holds anything")).to_be_visible()
    repo.baton("reserve", "src/auth", "--reason", "rewriting JWT auth", "--session", sessions[0])
    held = page.get_by_role("table", name="Held reservations")
    expect(held).to_contain_text("src/auth", timeout=10_000)
    expect(held).to_contain_text("rewriting JWT auth")
    # Another session waits in line (a background `baton reserve --wait`).
    waiter = subprocess.Popen(
        [need("BATON_BIN"), "reserve", "src/auth/jwt.rs", "--wait", "60s", "--session", sessions[1], "--reason", "next"],
        cwd=repo.path,
        env=repo.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    queue = page.get_by_role("table", name="Waiting, first in line first")
    expect(queue).to_contain_text("src/auth/jwt.rs", timeout=10_000)
    screenshot(page, "reservations")
    repo.baton("release", "--all", "--session", sessions[0])
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert "reserved src/auth/jwt.rs" in out, out
    expect(held).to_contain_text("src/auth/jwt.rs", timeout=10_000)
    expect(page.get_by_text("Nobody waits")).to_be_visible()
