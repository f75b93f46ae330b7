"""The plain AI SDK chat client (``ai``'s ``AbstractChat`` + ``DefaultChatTransport``) over HTTP SSE.

One ``ponder serve tests/e2e/apps/http_chat_app.py:app`` per module. ``tests/js/http-chat-client.mjs`` runs
the AI SDK's own client code under Node against ``POST /agents/<class>/<name>/chat``; the same script is sent
over the WebSocket protocol to another room, and the two stored transcripts must be the same. Needs
``npm ci --prefix tests/js``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.server import REPO, ServerProcess
from tests.support.wsclient import AgentSocket

from ._node import ScenarioRun, node_binary, run_scenario

pytestmark = pytest.mark.slow

APP = REPO / "tests" / "e2e" / "apps" / "http_chat_app.py"
SCRIPT = "http-chat-client.mjs"
TEXTS = ["Hello there", "What is the weather in Lisbon?"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    node_binary()  # fail early, with the install hint, when the npm clients are missing
    directory = tmp_path_factory.mktemp("http-chat")
    store = "sqlite:////" + str((directory / "store.sqlite3").resolve()).lstrip("/")
    with ServerProcess(f"{APP}:app", store, directory / "server.log") as proc:
        yield proc


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def _post(url: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _normalized(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript without its ids (user ids are minted by each client, assistant ids by the server)."""
    return [{"role": m["role"], "parts": m["parts"]} for m in transcript]


def _run_client(server: ServerProcess, room: str, *texts: str, extra: tuple[str, ...] = ()) -> ScenarioRun:
    api = f"{server.base_url}/agents/script-chat/{room}/chat"
    run = run_scenario(
        SCRIPT, "--api", api, *extra, *texts, context=lambda: f"--- server log\n{server.log()}"
    )
    assert run.returncode == 0, run.report()
    return run


async def _ws_conversation(server: ServerProcess, room: str, texts: list[str]) -> None:
    """The same messages over the WebSocket chat protocol, sent the way the stock client sends them."""
    socket = await AgentSocket.open(server.ws_url, "script-chat", room)
    try:
        await socket.wait_for(lambda f: f.get("type") == "cf_agent_chat_messages")
        messages: list[dict[str, Any]] = []
        for index, text in enumerate(texts):
            messages.append(
                {"id": f"ws-user-{index}", "role": "user", "parts": [{"type": "text", "text": text}]}
            )
            request_id = f"ws-req-{index}"
            body = json.dumps({"messages": messages, "trigger": "submit-message"})
            await socket.ws.send(
                json.dumps(
                    {
                        "type": "cf_agent_use_chat_request",
                        "id": request_id,
                        "init": {"method": "POST", "body": body},
                    }
                )
            )
            await socket.wait_for(
                lambda f, rid=request_id: (
                    f.get("type") == "cf_agent_use_chat_response" and f.get("id") == rid and f.get("done")
                )
            )
            transcript = [f for f in socket.frames if f.get("type") == "cf_agent_chat_messages"][-1][
                "messages"
            ]
            messages = list(transcript)
    finally:
        await socket.close()


def test_ai_sdk_client_over_sse_persists_the_same_transcript_as_the_websocket_path(
    server: ServerProcess,
) -> None:
    room = f"http-{uuid.uuid4().hex[:8]}"
    run = _run_client(server, room, *TEXTS)

    # what the AI SDK transport saw: 200 with the UI message stream headers, twice
    responses = run.of("response")
    assert [r["status"] for r in responses] == [200, 200]
    for response in responses:
        assert response["headers"]["content-type"] == "text/event-stream"
        assert response["headers"]["x-vercel-ai-ui-message-stream"] == "v1"
    assert not run.of("chat-error")
    assert [s["status"] for s in run.of("status")] == ["ready", "ready"]

    # the client assembled the same conversation the server stored, under the same ids
    client_messages = run.one("final")["messages"]
    stored = _get_json(f"{server.base_url}/agents/script-chat/{room}/get-messages")
    assert [(m["id"], m["role"]) for m in stored] == [(m["id"], m["role"]) for m in client_messages]
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "You said: Hello there", "state": "done"},
    ]
    weather = stored[3]["parts"]
    assert [p["type"] for p in weather] == [
        "step-start",
        "reasoning",
        "tool-get_weather",
        "step-start",
        "text",
    ]
    assert weather[2]["state"] == "output-available"
    assert weather[2]["output"] == {"city": "Lisbon", "sky": "sunny", "celsius": 21}
    assert weather[-1]["text"] == "It is sunny and 21 degrees in Lisbon."
    finishes = [f["message"] for f in run.of("finish")]
    assert [m["id"] for m in finishes] == [stored[1]["id"], stored[3]["id"]]
    assert finishes[1]["parts"][-1]["text"] == weather[-1]["text"]

    # the same script over the WebSocket protocol stores the same transcript
    ws_room = f"ws-{uuid.uuid4().hex[:8]}"
    asyncio.run(_ws_conversation(server, ws_room, TEXTS))
    over_ws = _get_json(f"{server.base_url}/agents/script-chat/{ws_room}/get-messages")
    assert _normalized(stored) == _normalized(over_ws)


def test_regenerate_over_http_adds_a_sibling(server: ServerProcess) -> None:
    room = f"regen-{uuid.uuid4().hex[:8]}"
    run = _run_client(server, room, "Hello", extra=("--regenerate",))
    finishes = [f["message"] for f in run.of("finish")]
    assert len(finishes) == 2 and finishes[0]["id"] != finishes[1]["id"]
    stored = _get_json(f"{server.base_url}/agents/script-chat/{room}/get-messages")
    assert [m["id"] for m in stored][1:] == [finishes[1]["id"]]
    assert [m["id"] for m in run.one("final")["messages"]] == [m["id"] for m in stored]


def test_bad_bodies_are_refused_with_400_and_store_nothing(server: ServerProcess) -> None:
    room = f"bad-{uuid.uuid4().hex[:8]}"
    url = f"{server.base_url}/agents/script-chat/{room}/chat"
    cases = [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (json.dumps({"messages": "hi"}).encode(), "'messages' must be an array"),
        (json.dumps({"messages": [{"id": "u1", "role": "robot", "parts": []}]}).encode(), "invalid role"),
        (json.dumps({"messages": [], "trigger": "explode"}).encode(), "'trigger' must be"),
        (json.dumps({"messages": [], "clientTools": [{"name": ""}]}).encode(), "clientTools[0].name"),
    ]
    for body, expected in cases:
        status, headers, payload = _post(url, body)
        assert status == 400, payload
        assert headers["content-type"].startswith("application/json")
        assert expected in json.loads(payload)["error"]
    assert _get_json(f"{server.base_url}/agents/script-chat/{room}/get-messages") == []
    status, _, _ = _post(f"{server.base_url}/agents/script-chat/{room}/chat", b"")
    assert status == 400


def test_client_disconnect_mid_stream_still_completes_and_persists(server: ServerProcess) -> None:
    room = f"gone-{uuid.uuid4().hex[:8]}"

    async def scenario() -> dict[str, Any]:
        watcher = await AgentSocket.open(server.ws_url, "slow-chat", room)
        await watcher.wait_for(lambda f: f.get("type") == "cf_agent_chat_messages")
        body = json.dumps(
            {
                "id": "chat-1",
                "trigger": "submit-message",
                "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "talk"}]}],
            }
        )
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        await asyncio.to_thread(
            connection.request,
            "POST",
            f"/agents/slow-chat/{room}/chat",
            body,
            {"content-type": "application/json"},
        )
        response = await asyncio.to_thread(connection.getresponse)
        assert response.status == 200
        # read until the text is streaming, then hang up
        seen = b""
        while b"text-delta" not in seen:
            seen += await asyncio.to_thread(response.readline)
        connection.close()
        done = await watcher.wait_for(
            lambda f: f.get("type") == "cf_agent_use_chat_response" and f.get("done"), timeout=20
        )
        await watcher.close()
        return done

    done = asyncio.run(scenario())
    assert done["outcome"] == "completed"
    stored = _get_json(f"{server.base_url}/agents/slow-chat/{room}/get-messages")
    assert [m["role"] for m in stored] == ["user", "assistant"]
    text = stored[1]["parts"][-1]
    assert text["state"] == "done" and text["text"].endswith("word149.")


def _resume_client(server: ServerProcess, agent: str, room: str) -> ScenarioRun:
    api = f"{server.base_url}/agents/{agent}/{room}/chat"
    run = run_scenario(SCRIPT, "--api", api, "--resume", context=lambda: f"--- server log\n{server.log()}")
    assert run.returncode == 0, run.report()
    return run


def test_a_second_ai_sdk_client_resumes_the_turn_in_progress(server: ServerProcess) -> None:
    """``chat.resumeStream()`` (GET …/chat/<id>/stream) mid-turn: the client ends with the whole answer,
    once, equal to what the server stores."""
    room = f"resume-{uuid.uuid4().hex[:8]}"
    body = json.dumps(
        {
            "id": "chat-1",
            "trigger": "submit-message",
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "talk"}]}],
        }
    )
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    connection.request("POST", f"/agents/slow-chat/{room}/chat", body, {"content-type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    seen = b""
    while b"text-delta" not in seen:  # the turn is streaming: the first client has text
        seen += response.readline()
    run = _resume_client(server, "slow-chat", room)
    rest = response.read()  # the first client reads its stream to the end too
    connection.close()
    assert b"[DONE]" in rest
    probes = [e for e in run.of("response") if e["url"].endswith("/chat/node-http-chat/stream")]
    assert [p["status"] for p in probes] == [200]
    assert probes[0]["headers"]["x-vercel-ai-ui-message-stream"] == "v1"
    final = run.of("final")[-1]["messages"]
    assert [m["role"] for m in final] == ["user", "assistant"]
    text = "".join(p.get("text", "") for p in final[1]["parts"] if p["type"] == "text")
    assert text == " ".join(f"word{i}" for i in range(150)) + "."
    stored = _get_json(f"{server.base_url}/agents/slow-chat/{room}/get-messages")
    assert _normalized(final) == _normalized(stored)
    assert final[1]["id"] == stored[1]["id"]


def test_the_resume_probe_answers_204_when_nothing_is_streaming(server: ServerProcess) -> None:
    room = f"idle-{uuid.uuid4().hex[:8]}"
    _run_client(server, room, "hello")
    run = _resume_client(server, "script-chat", room)
    probes = [e for e in run.of("response") if e["url"].endswith("/stream")]
    assert [p["status"] for p in probes] == [204]
    assert _normalized(run.of("final")[-1]["messages"]) == _normalized(run.of("initial")[-1]["messages"])
    assert len(run.of("final")[-1]["messages"]) == 2


def test_chat_route_rejects_other_methods(server: ServerProcess) -> None:
    request = urllib.request.Request(f"{server.base_url}/agents/script-chat/x/chat", method="GET")
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(request, timeout=10)
    assert excinfo.value.code == 405
    with urllib.request.urlopen(
        f"{server.base_url}/agents/script-chat/x/chat/abc/stream", timeout=10
    ) as resp:
        assert resp.status == 204
