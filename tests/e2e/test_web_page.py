"""The web chat page: its HTTP routes in process, and the real page in headless Chromium.

The browser test starts ``ponder serve tests/e2e/apps/web_app.py`` in a subprocess and drives Debian's
``/usr/bin/chromium`` through Playwright's Python package: type and send, watch the answer stream in,
approve a tool call and see its output, regenerate, switch between the two sibling answers (the server
stores the choice: a reload and other tabs follow it), search, and clear. Screenshots (desktop 1280x800,
the search panel, phone 390x844 light and dark) land in ``test-artifacts/``.
``scripts/test`` installs both Chromium and Playwright; without them the test fails, it never skips.
"""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.testclient import TestClient

from ponder import Agent, App
from ponder.testing import ScriptedModel
from ponder.think import Think
from tests.support.browser import chromium, watch
from tests.support.server import REPO, ServerProcess

from .apps.web_app import FINAL_ANSWER, MEMORY_NOTE, REGENERATED_ANSWER, SLOW_ANSWER

ARTIFACTS = REPO / "test-artifacts"
WEB_APP = REPO / "tests" / "e2e" / "apps" / "web_app.py"

# -- the HTTP routes, in process ---------------------------------------------------------------------


class Counter(Agent):
    """Not a chat agent: it has no page, and its /ui is its own business."""

    async def on_request(self, request: Request) -> Response | None:
        return PlainTextResponse(f"counter saw {request.url.path}")


class SupportChat(Think):
    def get_model(self) -> Any:
        return ScriptedModel(default="ok")


def deny_secret(request: Request, class_name: str, name: str) -> Response | None:
    if name == "secret":
        return PlainTextResponse("forbidden", status_code=403)
    return None


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = App([Counter, SupportChat], store=tmp_path / "store.sqlite3", on_before_request=deny_secret)
    with TestClient(app) as test_client:
        yield test_client


def page_config(page: str) -> dict[str, Any]:
    match = re.search(r'<meta name="ponder-config" content="([^"]*)">', page)
    assert match, page[:500]
    return json.loads(html.unescape(match.group(1)))


def test_root_serves_the_page_of_the_first_chat_agent(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["cache-control"] == "no-cache"
    assert page_config(response.text) == {
        "agentPath": "/agents/support-chat/default",
        "agent": "support-chat",
        "className": "SupportChat",
        "name": "default",
        "title": "Support Chat",
    }
    named = page_config(client.get("/", params={"name": "team a/b"}).text)
    assert named["name"] == "team a/b"
    assert named["agentPath"] == "/agents/support-chat/team%20a%2Fb"
    assert client.get("/", params={"name": "secret"}).status_code == 403  # the same hook as …/ui
    hostile = client.get("/", params={"name": '"><script>alert(1)</script>'})
    assert page_config(hostile.text)["name"] == '"><script>alert(1)</script>'
    assert "<script>alert" not in hostile.text


def test_ui_title(tmp_path: Path) -> None:
    class HelpDesk(Think):
        ui_title = "Acme <Help>"

        def get_model(self) -> Any:
            return "test"

    with TestClient(App([HelpDesk], store=tmp_path / "store.sqlite3")) as test_client:
        page = test_client.get("/agents/help-desk/x/ui").text
    assert page_config(page)["title"] == "Acme <Help>"
    assert "<title>Acme &lt;Help&gt; · ponder</title>" in page


def test_agent_ui_route(client: TestClient) -> None:
    response = client.get("/agents/support-chat/room-1/ui")
    assert response.status_code == 200
    assert page_config(response.text)["agentPath"] == "/agents/support-chat/room-1"
    assert "/_ponder/static/app.js?v=" in response.text
    assert client.get("/agents/support-chat/secret/ui").status_code == 403
    assert client.get("/agents/nope/room-1/ui").status_code == 400
    assert client.post("/agents/support-chat/room-1/ui").status_code == 405
    assert client.get("/agents/support-chat/room-1/ui/other").status_code == 404
    # Not a chat agent: the request reaches the agent's own on_request.
    assert client.get("/agents/counter/c1/ui").text == "counter saw /agents/counter/c1/ui"
    # The rest of the agent's routes are untouched.
    assert client.get("/agents/support-chat/room-1/get-messages").json() == []


def test_static_assets(client: TestClient) -> None:
    page = client.get("/").text
    version = page.split("/_ponder/static/app.js?v=", 1)[1].split('"', 1)[0]
    expected = {
        "app.js": "text/javascript; charset=utf-8",
        "chat.js": "text/javascript; charset=utf-8",
        "markdown.js": "text/javascript; charset=utf-8",
        "app.css": "text/css; charset=utf-8",
        "favicon.svg": "image/svg+xml",
    }
    for name, content_type in expected.items():
        response = client.get(f"/_ponder/static/{name}", params={"v": version})
        assert response.status_code == 200, name
        assert response.headers["content-type"] == content_type
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert response.headers["x-content-type-options"] == "nosniff"
        unversioned = client.get(f"/_ponder/static/{name}")
        assert unversioned.headers["cache-control"] == "no-cache"
        etag = unversioned.headers["etag"]
        assert client.get(f"/_ponder/static/{name}", headers={"If-None-Match": etag}).status_code == 304
    assert client.get("/_ponder/static/index.html").status_code == 404  # only the rendered page
    assert client.get("/_ponder/static/nope.js").status_code == 404
    assert client.get("/_ponder/static/..%2F_ui.py").status_code == 404


def test_no_page_without_a_chat_agent(tmp_path: Path) -> None:
    with TestClient(App([Counter], store=tmp_path / "store.sqlite3")) as test_client:
        response = test_client.get("/")
    assert response.status_code == 404
    assert "No chat agent" in response.text


def test_branches(client: TestClient) -> None:
    async def seed() -> None:
        agent = await client.app.host.get_agent(SupportChat, "room-1")  # type: ignore[attr-defined]

        def msg(id: str, role: str, text: str) -> dict[str, Any]:
            return {"id": id, "role": role, "parts": [{"type": "text", "text": text}]}

        await agent.add_messages(msg("u1", "user", "hi"))
        await agent.add_messages(msg("a1", "assistant", "first"), parent_id="u1")
        await agent.add_messages(msg("u2", "user", "more"), parent_id="a1")
        await agent.add_messages(msg("a2", "assistant", "second"), parent_id="u1")

    client.portal.call(seed)  # type: ignore[union-attr]
    base = "/agents/support-chat/room-1/ui"
    branches = client.get(f"{base}/branches", params=[("id", "u1"), ("id", "a1"), ("id", "zz")])
    assert branches.status_code == 200
    assert branches.headers["cache-control"] == "no-store"
    assert branches.json() == {"branches": {"u1": ["a1", "a2"]}}
    # Switching is the set_active_branch rpc now; the old client-side thread route is gone.
    assert client.get(f"{base}/thread", params={"parent": "u1", "id": "a1"}).status_code == 404
    too_many = [("id", str(i)) for i in range(501)]
    assert client.get(f"{base}/branches", params=too_many).status_code == 400
    assert client.get("/agents/support-chat/secret/ui/branches", params={"id": "u1"}).status_code == 403


# -- the page in real Chromium -------------------------------------------------------------------------


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[ServerProcess]:
    store = "sqlite:////" + str((tmp_path / "store.sqlite3").resolve()).lstrip("/")
    with ServerProcess(WEB_APP, store, tmp_path / "server.log") as server:
        yield server
    print(f"--- server log ({server.log_path})\n{server.log()}")  # pytest shows it when the test failed


# Records how the text of the newest assistant message grows, to prove the answer streamed in.
WATCH_GROWTH = """() => {
  window.__lengths = [];
  new MutationObserver(() => {
    const all = document.querySelectorAll('.msg-assistant:not(.extra) .md:not(.reasoning-body)');
    const last = all[all.length - 1];
    if (last) window.__lengths.push(last.textContent.length);
  }).observe(document.getElementById('thread'), {childList: true, subtree: true, characterData: true});
}"""


def idle(page: Any, expect: Any) -> None:
    expect(page.locator("body")).to_have_attribute("data-status", "idle")


def server_path(server: ServerProcess, page: Any) -> list[str]:
    """The text of each message on the server's active path (what a reload shows)."""
    messages = page.request.get(f"{server.base_url}/agents/web-chat/default/get-messages").json()
    return [" ".join(p.get("text", "") for p in m["parts"] if p["type"] == "text") for m in messages]


REFUSAL = "cannot switch branches while a turn is queued or running"


def refuse_branch_switches(ws: Any) -> None:
    """A WebSocket route: pass every frame through, but answer ``set_active_branch`` with the server's refusal."""
    server = ws.connect_to_server()

    def from_page(message: str | bytes) -> None:
        frame = json.loads(message) if isinstance(message, str) else {}
        if frame.get("type") == "rpc" and frame.get("method") == "set_active_branch":
            ws.send(json.dumps({"type": "rpc", "id": frame["id"], "success": False, "error": REFUSAL}))
        else:
            server.send(message)

    ws.on_message(from_page)


@pytest.mark.slow
def test_chat_page_in_chromium(web_server: ServerProcess) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with chromium() as (browser, expect):
        desktop = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
        page = desktop.new_page()
        watch(page, errors)
        page.goto(f"{web_server.base_url}/")
        expect(page.locator("body")).to_have_attribute("data-connection", "open")
        expect(page.get_by_role("heading", name="How can I help?")).to_be_visible()
        assistant = page.locator("article.msg-assistant")
        box = page.get_by_role("textbox", name="Message")

        # 1. Type, press Enter, watch the answer stream in.
        page.evaluate(WATCH_GROWTH)
        box.fill("Hello there")
        box.press("Enter")
        expect(page.locator("article.msg-user")).to_have_text("Hello there")
        expect(assistant.first.locator(".code-block")).to_contain_text("print('hello from ponder')")
        idle(page, expect)
        expect(box).to_have_value("")
        lengths = page.evaluate("window.__lengths")
        assert len(set(lengths)) >= 5, f"the answer did not stream in: text lengths seen {lengths}"
        first = assistant.first
        expect(first.locator("strong")).to_have_text("ponder")
        expect(first.locator(":not(pre) > code")).to_have_text("inline code")
        reasoning = first.locator("details.reasoning")
        expect(reasoning).not_to_have_attribute("open", "")
        reasoning.locator("summary").click()
        expect(reasoning.locator(".reasoning-body")).to_contain_text("introduce myself")

        # 2. A tool call that needs approval: approve it, see its output and the final answer.
        box.fill("Please delete notes.txt")
        page.get_by_role("button", name="Send message").click()
        approve = page.get_by_role("button", name="Approve delete_file")
        expect(approve).to_be_visible()
        tool = page.locator(".tool[data-tool=delete_file]")
        expect(tool).to_have_attribute("data-state", "approval-requested")
        expect(tool.locator(".tool-body")).to_contain_text('"path": "notes.txt"')
        expect(page.get_by_role("button", name="Deny delete_file")).to_be_visible()
        idle(page, expect)
        page.screenshot(path=str(ARTIFACTS / "web-page-approval.png"), animations="disabled")
        approve.click()
        expect(tool).to_have_attribute("data-state", "output-available")
        expect(tool.locator(".tool-body")).to_contain_text("notes.txt deleted")
        expect(tool.locator(".badge")).to_have_text("Done")
        expect(assistant.last).to_contain_text("is deleted")  # the same message, continued
        expect(assistant).to_have_count(2)
        idle(page, expect)

        # 3. Regenerate: a second answer replaces the first in view; both are kept.
        page.get_by_role("button", name="Regenerate response").click()
        expect(assistant.last).to_contain_text(REGENERATED_ANSWER)
        idle(page, expect)
        branch = assistant.last.locator(".branch-label")
        expect(branch).to_have_text("2 / 2")
        expect(assistant.last.locator(".tool")).to_have_count(0)

        # 4. Switch between the sibling answers: each switch is the set_active_branch rpc, and the page
        #    shows the path the server broadcasts back.
        assert server_path(web_server, page)[-1] == REGENERATED_ANSWER
        page.get_by_role("button", name="Previous answer").click()
        expect(branch).to_have_text("1 / 2")
        expect(assistant.last.locator(".tool[data-state=output-available]")).to_contain_text(
            "notes.txt deleted"
        )
        expect(assistant.last).to_contain_text(FINAL_ANSWER.replace("`", ""))
        expect(page.get_by_role("button", name="Previous answer")).to_be_disabled()
        page.get_by_role("button", name="Next answer").click()
        expect(branch).to_have_text("2 / 2")
        expect(assistant.last).to_contain_text(REGENERATED_ANSWER)
        page.get_by_role("button", name="Previous answer").click()
        expect(branch).to_have_text("1 / 2")
        assert FINAL_ANSWER in server_path(web_server, page)[-1]  # the server's active path changed
        page.screenshot(path=str(ARTIFACTS / "web-page-desktop.png"), animations="disabled")

        # 5. A reload shows the branch chosen above (the server's active path), with its branch control.
        page.reload()
        expect(page.locator("body")).to_have_attribute("data-connection", "open")
        expect(assistant.last).to_contain_text(FINAL_ANSWER.replace("`", ""))
        expect(assistant.last.locator(".tool[data-state=output-available]")).to_be_visible()
        expect(assistant.last.locator(".branch-label")).to_have_text("1 / 2")

        # 6. Search (Ctrl+K): a word from the first answer; the result scrolls to and highlights it.
        page.keyboard.press("Control+k")
        dialog = page.get_by_role("dialog", name="Search messages")
        expect(dialog).to_be_visible()
        query = dialog.get_by_role("searchbox", name="Search messages")
        expect(query).to_be_focused()
        query.fill("test agent")
        hits = dialog.locator(".hit")
        expect(hits).to_have_count(1)
        expect(hits.first.locator(".hit-role")).to_have_text("Assistant")
        expect(hits.first.locator(".hit-text")).to_contain_text("I'm the **ponder** test agent")
        expect(hits.first.locator("mark")).to_have_text("test agent")
        hits.first.click()
        expect(dialog).to_be_hidden()
        expect(assistant.first).to_have_class(re.compile(r"\bfound\b"))
        expect(assistant.first).to_be_in_viewport()
        # "/" opens it too; a hit on the other branch says so, and clicking it switches to that branch.
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.keyboard.press("/")
        expect(dialog).to_be_visible()
        query.fill("rather archive")
        expect(hits).to_have_count(1)
        expect(hits.first.locator(".hit-role")).to_have_text("Assistant")
        expect(hits.first.locator(".hit-where")).to_have_text("Other branch")
        expect(hits.first.locator("mark")).to_have_text("rather archive")
        page.screenshot(path=str(ARTIFACTS / "web-page-search.png"), animations="disabled")
        hits.first.click()
        expect(dialog).to_be_hidden()
        expect(assistant.last).to_contain_text(REGENERATED_ANSWER)
        expect(assistant.last.locator(".branch-label")).to_have_text("2 / 2")
        expect(assistant.last).to_have_class(re.compile(r"\bfound\b"))
        assert server_path(web_server, page)[-1] == REGENERATED_ANSWER
        page.keyboard.press("Control+k")
        query.fill("zebra")
        expect(dialog.locator(".search-status")).to_have_text("No messages match “zebra”.")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()

        # 7. A refused switch (the server says a turn is running) leaves the view alone and says why.
        refused = desktop.new_page()
        watch(refused, errors)
        refused.route_web_socket(re.compile(r"/agents/web-chat/default\?"), refuse_branch_switches)
        refused.goto(f"{web_server.base_url}/")
        expect(refused.locator("body")).to_have_attribute("data-connection", "open")
        refused.get_by_role("button", name="Previous answer").click()
        notice = refused.locator("article.msg-assistant").last.locator(".branch-notice")
        expect(notice).to_contain_text(f"Could not switch answers: {REFUSAL}")
        expect(refused.locator(".branch-label").last).to_have_text("2 / 2")
        refused.close()

        # 8. Phone width, light and dark: the same conversation, nothing wider than the screen. A switch
        #    made on the phone reaches the desktop tab too.
        for scheme in ("light", "dark"):
            phone = browser.new_context(
                viewport={"width": 390, "height": 844},
                device_scale_factor=2,
                is_mobile=True,
                has_touch=True,
                color_scheme=scheme,
            )
            mobile = phone.new_page()
            watch(mobile, errors)
            mobile.goto(f"{web_server.base_url}/agents/web-chat/default/ui")
            expect(mobile.locator("body")).to_have_attribute("data-connection", "open")
            if scheme == "light":
                expect(mobile.locator("article.msg-assistant").last).to_contain_text(REGENERATED_ANSWER)
                mobile.get_by_role("button", name="Previous answer").click()
                expect(mobile.locator(".branch-label").last).to_have_text("1 / 2")
                expect(assistant.last.locator(".branch-label")).to_have_text("1 / 2")  # the desktop tab
                expect(assistant.last).to_contain_text(FINAL_ANSWER.replace("`", ""))
            else:
                expect(mobile.locator(".branch-label").last).to_have_text("1 / 2")
            expect(mobile.get_by_role("button", name="Send message")).to_be_visible()
            width = mobile.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the page is {width}px wide on a 390px screen"
            suffix = "" if scheme == "light" else "-dark"
            mobile.screenshot(path=str(ARTIFACTS / f"web-page-phone{suffix}.png"), animations="disabled")
            if scheme == "dark":
                mobile.get_by_role("button", name="Search messages").click()
                mobile.get_by_role("searchbox", name="Search messages").fill("notes.txt")
                expect(mobile.locator(".hit")).to_have_count(3)
                width = mobile.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, f"the search panel is {width}px wide on a 390px screen"
                mobile.screenshot(
                    path=str(ARTIFACTS / "web-page-phone-search-dark.png"), animations="disabled"
                )
            phone.close()

        # 9. Clear (two clicks: the first asks to confirm) empties the page and the server.
        page.get_by_role("button", name="Clear conversation").click()
        page.get_by_role("button", name="Confirm: clear the whole conversation").click()
        expect(page.get_by_role("heading", name="How can I help?")).to_be_visible()
        expect(page.locator("article.msg")).to_have_count(0)
        messages = page.request.get(f"{web_server.base_url}/agents/web-chat/default/get-messages").json()
        assert messages == []
    assert not errors, "\n".join(errors) + f"\n--- server log\n{web_server.log()}"


@pytest.mark.slow
def test_a_second_page_joins_a_running_answer(web_server: ServerProcess) -> None:
    """A page opened mid-answer gets the transcript and the stream so far, then the rest, live."""
    errors: list[str] = []
    with chromium() as (browser, expect):
        url = f"{web_server.base_url}/agents/slow-chat/room-{uuid.uuid4().hex[:8]}/ui"
        first = browser.new_page()
        watch(first, errors)
        first.goto(url)
        expect(first.locator("body")).to_have_attribute("data-connection", "open")
        first.get_by_role("textbox", name="Message").fill("Take your time")
        first.get_by_role("textbox", name="Message").press("Enter")
        expect(first.locator("article.msg-assistant")).to_contain_text("word5")
        expect(first.get_by_role("button", name="Stop generating")).to_be_visible()

        second = browser.new_page()
        watch(second, errors)
        second.goto(url)
        expect(second.locator("body")).to_have_attribute("data-status", "streaming")
        expect(second.locator("article.msg-user")).to_have_text("Take your time")
        expect(second.locator("article.msg-assistant")).to_contain_text("word1 word2")
        expect(second.get_by_role("button", name="Stop generating")).to_be_visible()
        for page in (first, second):
            expect(page.locator("article.msg-assistant")).to_have_text(SLOW_ANSWER)
            idle(page, expect)
            expect(page.locator("article.msg")).to_have_count(2)
    assert not errors, "\n".join(errors) + f"\n--- server log\n{web_server.log()}"


@pytest.mark.slow
def test_the_memory_panel_shows_the_blocks_live(web_server: ServerProcess) -> None:
    """The Memory panel lists the agent's context blocks and follows a ``set_context`` write without a reload;
    an agent without blocks has no Memory button."""
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with chromium() as (browser, expect):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        watch(page, errors)
        page.goto(f"{web_server.base_url}/agents/memory-chat/room-{uuid.uuid4().hex[:8]}/ui")
        expect(page.locator("body")).to_have_attribute("data-connection", "open")
        page.get_by_role("button", name="Memory").click()
        dialog = page.get_by_role("dialog", name="Memory")
        expect(dialog).to_be_visible()
        memory = dialog.locator('.mem-block[data-label="memory"]')
        rules = dialog.locator('.mem-block[data-label="rules"]')
        expect(memory.locator(".mem-desc")).to_have_text("Facts about the user")
        expect(memory.locator(".mem-badge")).to_have_text("writable")
        expect(memory.locator(".mem-content")).to_have_text("Empty")
        expect(memory.locator(".mem-count")).to_have_text("0 / 100 tokens · 0%")
        expect(rules.locator(".mem-badge")).to_have_text("read-only")
        expect(rules.locator(".mem-content")).to_have_text("Be brief.")
        dialog.get_by_role("button", name="Close memory").click()
        expect(dialog).to_be_hidden()

        # The model writes the block; the open panel follows without a reload.
        page.get_by_role("button", name="Memory").click()
        page.evaluate(
            """() => document.querySelector('#composer textarea').value = 'Remember: green tea, short answers'"""
        )
        page.get_by_role("textbox", name="Message").dispatch_event("input")
        page.evaluate("() => document.getElementById('composer').requestSubmit()")
        expect(memory.locator(".mem-content")).to_have_text(MEMORY_NOTE)
        expect(memory.locator("b")).to_have_count(0)  # text, never markup
        count = memory.locator(".mem-count")
        expect(count).not_to_have_text("0 / 100 tokens · 0%")
        tokens = int(count.inner_text().split(" / ")[0])
        assert tokens > 0
        assert memory.locator(".mem-bar").get_attribute("aria-valuenow") == str(tokens)
        width = memory.locator(".mem-fill").evaluate("n => n.style.width")
        assert width == f"{tokens}%", width
        page.screenshot(path=str(ARTIFACTS / "web-page-memory.png"), animations="disabled")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        expect(page.locator("article.msg-assistant")).to_contain_text("Saved to memory.")

        # An agent without blocks: no Memory button.
        plain = browser.new_page()
        watch(plain, errors)
        plain.goto(f"{web_server.base_url}/agents/slow-chat/room-{uuid.uuid4().hex[:8]}/ui")
        expect(plain.locator("body")).to_have_attribute("data-connection", "open")
        expect(plain.locator("article.msg")).to_have_count(0)
        expect(plain.locator("#memory-open")).to_be_hidden()
    assert not errors, "\n".join(errors) + f"\n--- server log\n{web_server.log()}"


MARKDOWN = """# Title
**bold**, *em*, `<b>code</b>`, [ok](https://example.com), [bad](javascript:window.__pwned=1)
<img src=x onerror="window.__pwned=1"> & https://example.org/a?b=1.

| a | b |
|---|--:|
| 1 | 2 |

1. one
2. two

```js
const x = "<script>window.__pwned=1</script>";
```"""


@pytest.mark.slow
def test_markdown_renders_text_never_markup(web_server: ServerProcess) -> None:
    errors: list[str] = []
    with chromium() as (browser, _expect):
        page = browser.new_page()
        watch(page, errors)
        page.goto(f"{web_server.base_url}/")
        result = page.evaluate(
            """async (source) => {
              const { renderMarkdown } = await import('/_ponder/static/markdown.js');
              const box = document.createElement('div');
              box.append(renderMarkdown(source));
              document.body.append(box);
              await new Promise((resolve) => setTimeout(resolve, 50));
              const links = [...box.querySelectorAll('a')].map((a) => a.getAttribute('href'));
              return {
                pwned: window.__pwned || 0, images: box.querySelectorAll('img, script').length, links,
                tags: [...box.querySelectorAll('*')].map((n) => n.tagName.toLowerCase()),
                text: box.textContent,
              };
            }""",
            MARKDOWN,
        )
    assert result["pwned"] == 0 and result["images"] == 0
    assert result["links"] == ["https://example.com/", "https://example.org/a?b=1"]
    assert {"h3", "strong", "em", "code", "table", "ol", "pre"} <= set(result["tags"])
    assert '<img src=x onerror="window.__pwned=1">' in result["text"]
    assert "[bad](javascript:window.__pwned=1)" in result["text"]
    assert not errors, "\n".join(errors)
