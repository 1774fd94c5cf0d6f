"""Accessibility of every page: axe-core finds no serious or critical violation; every
control is reachable by Tab and shows where the focus is; nothing scrolls sideways on a
phone (390×844)."""

from __future__ import annotations

import os
import uuid

from conftest import Hub, Repo, commit_by_agent, head, sign_in
from playwright.sync_api import Browser, Page

AXE = os.environ.get("BATON_AXE_JS", "")


def planted(hub: Hub) -> Repo:
    repo = hub.repo()
    conversation = str(uuid.uuid4())
    repo.hook("SessionStart", conversation, source="startup")
    repo.hook("UserPromptSubmit", conversation, prompt="Make the settings page accessible")
    repo.baton("memory", "add", "decision", "Keep pages server-rendered")
    repo.hook("PreCompact", conversation, trigger="manual")
    repo.plant("items", "--key", "conversation", "--count", "3")
    repo.baton("reserve", "src", "--reason", "making the settings page accessible", "--session", session_id(repo))
    commit_by_agent(repo, conversation, "settings.html", "<label for=theme>Theme</label>\n")
    return repo


def session_id(repo: Repo) -> str:
    import json

    return str(json.loads(repo.baton("sessions", "--json"))["sessions"][0]["id"])


def pages(hub: Hub, repo: Repo) -> list[str]:
    return [
        "/",
        f"/sessions?project={repo.project}",
        f"/sessions?project={repo.project}&agent=codex",
        f"/activity?project={repo.project}",
        f"/memory?project={repo.project}",
        f"/session?id={session_id(repo)}",
        f"/brief?project={repo.project}",
        f"/search?project={repo.project}&q=accessible",
        f"/logs?project={repo.project}",
        f"/logs?project={repo.project}&key=conversation",
        f"/reservations?project={repo.project}",
        f"/commit?project={repo.project}&id={head(repo)}",
        "/admin",
        "/admin/retention",
        "/admin/storage",
        "/no-such-page",
    ]


def signed_in(browser: Browser, hub: Hub, **options: object) -> Page:
    page = browser.new_context(**options).new_page()
    sign_in(page, hub, hub.admin)
    return page


def serious(page: Page) -> list[str]:
    page.add_script_tag(path=AXE)
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


def test_axe_finds_nothing_serious(browser: Browser, hub: Hub) -> None:
    assert AXE, "BATON_AXE_JS is not set"
    repo = planted(hub)
    # axe is injected as a script, which the pages' own policy forbids: this context bypasses it.
    signed_out = browser.new_context(bypass_csp=True).new_page()
    signed_out.goto(f"{hub.url}/signin")
    problems = {"/signin": serious(signed_out)}
    page = signed_in(browser, hub, bypass_csp=True)
    for path in pages(hub, repo):
        page.goto(hub.url + path)
        problems[path] = serious(page)
    assert not any(problems.values()), problems


CONTROLS = """[...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea')]
              .filter(e => e.offsetParent !== null || e.classList.contains('skip'))"""


def focusables(page: Page) -> int:
    return page.evaluate(f"() => {CONTROLS}.length")


def test_every_control_is_reachable_by_tab_with_a_visible_focus(browser: Browser, hub: Hub) -> None:
    repo = planted(hub)
    page = signed_in(browser, hub)
    for path in pages(hub, repo):
        page.goto(hub.url + path)
        expected = focusables(page)
        reached = set()
        for _ in range(expected + 2):
            page.keyboard.press("Tab")
            focus = page.evaluate(
                "() => { const e = document.activeElement; if (!e || e === document.body) return null;"
                "const s = getComputedStyle(e);"
                f"return [{CONTROLS}.indexOf(e) + ': ' + e.outerHTML.slice(0, 80),"
                "s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0] }"
            )
            if focus is None:
                continue
            html, visible = focus
            assert visible, f"{path}: no visible focus on {html}"
            reached.add(html)
        assert len(reached) >= expected, f"{path}: Tab reached {len(reached)} of {expected} controls"


def test_nothing_scrolls_sideways_on_a_phone(browser: Browser, hub: Hub) -> None:
    repo = planted(hub)
    page = signed_in(browser, hub, viewport={"width": 390, "height": 844})
    for path in [*pages(hub, repo), "/signin"]:
        page.goto(hub.url + path)
        wide = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert wide <= 0, f"{path} scrolls {wide}px sideways at 390px"
