"""Commits on the pages: a session's page lists the commits its agent made, and a commit's
page says what `baton why` says of its lines (the session, the prompt, the task, the
decisions near it)."""

from __future__ import annotations

import uuid

import pytest
from conftest import Hub, commit_by_agent, screenshot
from playwright.sync_api import Page, expect


@pytest.mark.both
def test_a_sessions_commits_lead_to_why(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    conversation = str(uuid.uuid4())
    repo.hook("SessionStart", conversation, source="startup")
    repo.hook("UserPromptSubmit", conversation, prompt="Make the fetcher retry on 503")
    commit = commit_by_agent(repo, conversation, "fetch.rs", "pub fn fetch_with_retry() {}\n")
    repo.hook("Stop", conversation)
    why = repo.baton("why", "fetch.rs")
    assert "Make the fetcher retry on 503" in why and "the agent" in why, why
    session = repo.baton("sessions", "--json")
    import json

    sid = json.loads(session)["sessions"][0]["id"]
    page.goto(f"{hub.url}/session?id={sid}")
    commits = page.get_by_role("table", name="Commits")
    expect(commits).to_contain_text("Add fetch.rs")
    expect(commits).to_contain_text("the agent")
    commits.get_by_role("link", name=commit[:12]).click()
    expect(page.get_by_role("heading", name=f"Commit {commit[:12]}")).to_be_visible()
    expect(page.get_by_text("Make the fetcher retry on 503")).to_be_visible()
    expect(page.get_by_text("fetch.rs", exact=True)).to_be_visible()
    screenshot(page, "commit")
