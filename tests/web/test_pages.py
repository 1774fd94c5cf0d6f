"""The pages, as a person uses them: signing in, a session started by a real hook appearing
live and going idle, the activity stream, paging and filters."""

from __future__ import annotations

import uuid

import pytest
from conftest import Hub, screenshot, sign_in
from playwright.sync_api import BrowserContext, Page, expect


def test_sign_in_refuses_a_wrong_token(context: BrowserContext, hub: Hub) -> None:
    page = context.new_page()
    page.goto(f"{hub.url}/")
    expect(page).to_have_url(f"{hub.url}/signin")
    screenshot(page, "signin")
    page.get_by_label("Access token").fill("baton_not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown access token")
    sign_in(page, hub, hub.admin)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    # The cookie is out of scripts' reach.
    cookies = context.cookies()
    assert [c["httpOnly"] and c["sameSite"] == "Strict" for c in cookies] == [True], cookies
    assert page.evaluate("document.cookie") == ""


@pytest.mark.both
def test_a_hooked_session_appears_live_and_goes_idle(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    page.goto(f"{hub.url}/sessions?project={repo.project}")
    expect(page.get_by_text("No sessions yet")).to_be_visible()
    conversation = str(uuid.uuid4())
    repo.hook("SessionStart", conversation, source="startup")
    repo.hook("UserPromptSubmit", conversation, prompt="Fix the flaky login test")
    row = page.locator("tbody#rows tr").first
    expect(row).to_contain_text("active", timeout=10_000)
    expect(row).to_contain_text("claude")
    screenshot(page, "sessions")
    # No more hooks: the reaper marks it idle after --idle-after, and the page follows.
    expect(row.locator(".status")).to_have_text("idle", timeout=15_000)


@pytest.mark.both
def test_activity_streams_changes_as_they_happen(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.baton("memory", "add", "decision", "Use SQLite by default")
    page.goto(f"{hub.url}/activity?project={repo.project}")
    expect(page.locator("#events li")).to_have_count(1)
    repo.baton("memory", "add", "constraint", "Never break the hooks")
    expect(page.locator("#events li").first).to_contain_text("constraint", timeout=10_000)
    expect(page.locator("#events li")).to_have_count(2)
    screenshot(page, "activity")


def test_overview_lists_projects_and_working_sessions(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.hook("SessionStart", str(uuid.uuid4()), source="startup")
    page.goto(f"{hub.url}/")
    expect(page.get_by_role("link", name=repo.project)).to_be_visible()
    screenshot(page, "overview")
    page.get_by_role("link", name=repo.project).click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()


def test_sessions_filter_by_agent_and_branch(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.hook("SessionStart", str(uuid.uuid4()), source="startup")
    page.goto(f"{hub.url}/sessions?project={repo.project}")
    page.get_by_label("Agent").select_option("codex")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No session matches these filters")).to_be_visible()
    page.get_by_label("Agent").select_option("claude")
    page.get_by_label("Branch").fill("main")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody#rows tr").first).to_contain_text("claude")


def test_sign_out(page: Page, hub: Hub) -> None:
    page.goto(f"{hub.url}/")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{hub.url}/signin")
    page.goto(f"{hub.url}/")
    expect(page).to_have_url(f"{hub.url}/signin")
