"""A session's page: the checkpoint tree, a checkpoint's state, the carried transcript,
comparing two checkpoints; all of it what the real client stored from real hook payloads."""

from __future__ import annotations

import shutil
import uuid

from conftest import FIXTURES, Hub, screenshot
from playwright.sync_api import Page, expect


def test_tree_state_transcript_and_compare(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    transcript = repo.path.parent / f"{repo.path.name}-transcript.jsonl"
    shutil.copy(FIXTURES / "claude-transcript.jsonl", transcript)
    conversation = str(uuid.uuid4())
    repo.hook("SessionStart", conversation, transcript, source="startup")
    repo.hook("UserPromptSubmit", conversation, transcript, prompt="Add JWT auth to the API")
    repo.hook("PreCompact", conversation, transcript, trigger="manual")
    repo.hook("Stop", conversation, transcript, stop_hook_active=False)

    page.goto(f"{hub.url}/sessions?project={repo.project}")
    page.locator("tbody#rows a").first.click()
    expect(page.get_by_role("heading", name="Checkpoints")).to_be_visible()
    tree = page.get_by_role("list", name="Checkpoint tree")
    expect(tree.locator("li")).to_have_count(2)
    expect(tree.locator("li").last).to_contain_text("head")
    # The head's state, as the hooks read it from the transcript.
    tasks = page.get_by_role("table", name="Tasks")
    expect(tasks).to_contain_text("Write auth tests")
    expect(tasks).to_contain_text("in_progress")
    expect(page.get_by_text("deleted src/legacy_auth.rs")).to_be_visible()
    expect(page.get_by_text("String to replace not found in file.").first).to_be_visible()
    # The transcript it carried, with the secret redacted by the client before upload.
    section = page.locator("ol.transcript")
    expect(section).to_contain_text("Add JWT auth to the API")
    expect(section).to_contain_text("[tool: Bash]")
    expect(section).to_contain_text("[REDACTED:")
    screenshot(page, "session")

    # The other checkpoint (the tree's order follows its parents, not the hooks'), then the
    # two compared.
    tree.locator("li", has_text="pre-compact").get_by_role("link").click()
    expect(tree.locator("li.selected")).to_contain_text("pre-compact")
    page.get_by_role("button", name="Compare").click()
    expect(page.get_by_role("heading", name="Compare checkpoints")).to_be_visible()
    screenshot(page, "compare")


def test_a_session_with_no_checkpoints_says_how_to_get_one(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.hook("SessionStart", str(uuid.uuid4()), source="startup")
    page.goto(f"{hub.url}/sessions?project={repo.project}")
    page.locator("tbody#rows a").first.click()
    expect(page.get_by_text("No checkpoints yet")).to_be_visible()


def test_an_unknown_session_is_not_found(page: Page, hub: Hub) -> None:
    # Through the page's own cookies (an error page would fail the page fixture's console check).
    reply = page.request.get(f"{hub.url}/session?id={uuid.uuid4()}")
    assert reply.status == 404
    reply = page.request.get(f"{hub.url}/session?id=not-a-uuid")
    assert reply.status == 400 and "not a valid uuid" in reply.text()
