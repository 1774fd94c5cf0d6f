"""What a browser adds to the attack surface: stored hostile content, a form posted from
elsewhere, a rebound host name, a scoped token, a revoked token."""

from __future__ import annotations

import http.client
import uuid

import pytest
from conftest import Hub, sign_in
from playwright.sync_api import BrowserContext, Page, expect

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)><a href="javascript:alert(2)">j</a>'


@pytest.mark.both
def test_hostile_content_renders_inert(page: Page, hub: Hub) -> None:
    repo = hub.repo()
    conversation = str(uuid.uuid4())
    repo.hook("SessionStart", conversation, source="startup")
    repo.hook("UserPromptSubmit", conversation, prompt=HOSTILE + "\x1b[31m red " + "x" * 1_000_000)
    repo.baton("memory", "add", "note", HOSTILE, "--key", "hostile")
    planted = repo.plant("hostile")
    for path in [
        f"/sessions?project={repo.project}",
        f"/activity?project={repo.project}",
        "/",
        f"/session?id={planted['session']}",
        f"/memory?project={repo.project}",
        f"/search?project={repo.project}&q=script",
    ]:
        page.goto(hub.url + path)
        # The page fixture fails the test on any dialog or script error.
        assert page.locator("script:not([src])").count() == 0
        assert page.locator("img").count() == 0
        assert page.locator('a[href^="javascript:"]').count() == 0
        assert "\x1b" not in page.inner_text("body"), f"{path} shows a terminal escape"
        size = len(page.content())
        assert size < 300_000, f"{path} is {size} bytes"


@pytest.mark.both
def test_a_post_without_the_csrf_token_is_refused(page: Page, hub: Hub) -> None:
    page.goto(f"{hub.url}/")
    reply = page.request.post(f"{hub.url}/signout", form={"_csrf": "0" * 32})
    assert reply.status == 403
    page.goto(f"{hub.url}/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


@pytest.mark.both
def test_a_foreign_host_is_refused(hub: Hub) -> None:
    connection = http.client.HTTPConnection(hub.addr, timeout=10)
    connection.request("GET", "/signin", headers={"Host": "rebound.evil.example"})
    assert connection.getresponse().status == 421


@pytest.mark.both
def test_a_scoped_token_sees_only_its_project(browser_context_factory, hub: Hub) -> None:
    mine, theirs = hub.repo(), hub.repo()
    theirs.baton("memory", "add", "note", "their secret plan", "--key", "plan")
    scoped = hub.token_create(f"scoped-{uuid.uuid4().hex[:6]}", "reader", mine.project)
    context: BrowserContext = browser_context_factory()
    page = context.new_page()
    sign_in(page, hub, scoped)
    expect(page.get_by_role("link", name=mine.project)).to_be_visible()
    assert theirs.project not in page.content()
    page.goto(f"{hub.url}/activity?project={theirs.project}")
    assert "their secret plan" not in page.content()
    expect(page.get_by_role("alert")).to_contain_text("limited to project")
    # Live: their changes never reach this token's stream.
    page.goto(f"{hub.url}/activity?project={mine.project}")
    theirs.baton("memory", "add", "note", "another secret", "--key", "plan2")
    mine.baton("memory", "add", "decision", "visible to the scoped token")
    expect(page.locator("#events li").first).to_contain_text("decision", timeout=10_000)
    assert "note" not in page.locator("#events").inner_text()


@pytest.mark.both
def test_a_revoked_token_is_signed_out_live(browser_context_factory, hub: Hub) -> None:
    repo = hub.repo()
    name = f"revoked-{uuid.uuid4().hex[:6]}"
    secret = hub.token_create(name, "reader")
    page = browser_context_factory().new_page()
    sign_in(page, hub, secret)
    page.goto(f"{hub.url}/activity?project={repo.project}")
    hub.admin_command("token", "revoke", name)
    expect(page).to_have_url(f"{hub.url}/signin", timeout=15_000)
