"""Project memory in the page: entries with who wrote them, adding, editing, and an edit
that meets a change made from the CLI meanwhile shown as the conflict it is."""

from __future__ import annotations

from conftest import Hub, screenshot
from playwright.sync_api import Page, expect


def test_memory_lists_adds_and_edits(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.baton("memory", "set", "goal", "Ship the web view")
    repo.baton("memory", "add", "decision", "Render on the server", "--rationale", "no Node build step")
    page.goto(f"{hub.url}/memory?project={repo.project}")
    goal = page.locator("section", has=page.get_by_role("heading", name="Goal"))
    expect(goal).to_contain_text("Ship the web view")
    decisions = page.locator("section", has=page.get_by_role("heading", name="Decisions", exact=True))
    expect(decisions).to_contain_text("no Node build step")
    # Added from the page: a constraint (to the set as it is), a note.
    constraints = page.locator("section", has=page.get_by_role("heading", name="Constraints"))
    constraints.get_by_label("New constraints item").fill("Never break the hooks")
    constraints.get_by_role("button", name="Add").click()
    expect(constraints).to_contain_text("Never break the hooks")
    notes = page.locator("section", has=page.get_by_role("heading", name="Notes"))
    notes.get_by_label("Key").fill("deploy")
    notes.get_by_role("textbox", name="Note").fill("Tag, then push the image")
    notes.get_by_role("button", name="Add").click()
    expect(notes).to_contain_text("Tag, then push the image")
    screenshot(page, "memory")
    listed = repo.baton("memory", "list")
    assert "Never break the hooks" in listed and "Tag, then push the image" in listed


def test_an_edit_that_meets_a_cli_change_shows_the_conflict(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    repo.baton("memory", "set", "constraint", "No unsafe code")
    page.goto(f"{hub.url}/memory?project={repo.project}")
    constraints = page.locator("section", has=page.get_by_role("heading", name="Constraints"))
    constraints.get_by_text("Edit").click()
    constraints.get_by_label("One item per line").fill("No unsafe code\nKeep the binary small")
    # Meanwhile, from a terminal:
    repo.baton("memory", "set", "constraint", "No unsafe code", "Every list is paged")
    constraints.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="Changed since you opened it")).to_be_visible()
    expect(page.locator(".card", has_text="Now stored")).to_contain_text("Every list is paged")
    expect(page.locator(".card", has_text="Yours")).to_contain_text("Keep the binary small")
    screenshot(page, "memory-conflict")
    # Nothing was overwritten until asked.
    assert "Every list is paged" in repo.baton("memory", "list")
    page.get_by_role("button", name="Save mine over it").click()
    expect(page.get_by_role("heading", name="Project memory")).to_be_visible()
    listed = repo.baton("memory", "list")
    assert "Keep the binary small" in listed and "Every list is paged" not in listed
