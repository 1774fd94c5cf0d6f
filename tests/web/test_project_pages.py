"""The brief preview, search, agent logs and admin pages, with real data."""

from __future__ import annotations

import uuid

from conftest import Hub, screenshot, sign_in
from playwright.sync_api import Page, expect


def test_brief_preview_shows_what_each_agent_would_be_told(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.baton("memory", "set", "goal", "Ship the web view")
    page.goto(f"{hub.url}/brief?project={repo.project}")
    claude = page.locator("section", has=page.get_by_role("heading", name="Claude Code"))
    expect(claude).to_contain_text("Ship the web view")
    expect(claude).to_contain_text("9000 characters")
    expect(page.locator("section", has=page.get_by_role("heading", name="Codex"))).to_contain_text("6000 characters")
    screenshot(page, "brief")


def test_search_finds_memory_and_sessions(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.baton("memory", "add", "decision", "Use retry with jitter for the uploader")
    page.goto(f"{hub.url}/search?project={repo.project}")
    page.get_by_label("Words").fill("jitter")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("mark").first).to_have_text("jitter")
    screenshot(page, "search")
    page.get_by_label("Words").fill("nothingmatchesthis")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Nothing matches")).to_be_visible()


def test_agent_logs_list_and_show_items(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    page.goto(f"{hub.url}/logs?project={repo.project}")
    expect(page.get_by_text("No agent logs yet")).to_be_visible()
    repo.plant("items", "--key", "conversation-1", "--count", "5")
    page.reload()
    screenshot(page, "agent-logs")
    page.get_by_role("link", name="conversation-1").click()
    expect(page.locator("ol.transcript li")).to_have_count(5)
    expect(page.get_by_text("A planted conversation")).to_be_visible()
    screenshot(page, "agent-log")


def test_admin_creates_and_revokes_tokens(page: Page, hub: Hub, browser_context_factory) -> None:
    name = f"bob-{uuid.uuid4().hex[:6]}"
    page.goto(f"{hub.url}/admin")
    form = page.get_by_role("form", name="Create a token")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Role").select_option("reader")
    form.get_by_role("button", name="Create token").click()
    secret = page.locator("code.secret").inner_text()
    assert secret.startswith("baton_")
    assert secret not in page.url
    screenshot(page, "admin")
    # The new token signs in, as a reader: no admin page for it.
    other = browser_context_factory().new_page()
    sign_in(other, hub, secret)
    reply = other.request.get(f"{hub.url}/admin")
    assert reply.status == 403
    # Revoked from the admin page: the reader is signed out.
    page.get_by_role("button", name=f"Revoke {name}").click()
    expect(page.get_by_role("row", name=name)).to_contain_text("revoked")
    other.goto(f"{hub.url}/")
    expect(other).to_have_url(f"{hub.url}/signin")
    page.get_by_role("link", name="What the next run would remove").click()
    expect(page.get_by_role("heading", name="What the next retention run would remove")).to_be_visible()
