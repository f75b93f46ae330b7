"""Message builders shared by the sessions tests."""

from __future__ import annotations

from typing import Any


def text(message_id: str, role: str, body: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": body}]}


def user(message_id: str, body: str = "hello") -> dict[str, Any]:
    return text(message_id, "user", body)


def assistant(message_id: str, body: str = "hi") -> dict[str, Any]:
    return text(message_id, "assistant", body)


def tool_answer(message_id: str, call_id: str, output: Any, body: str = "done") -> dict[str, Any]:
    """An assistant message with one settled tool call and a text answer."""
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-lookup",
                "toolCallId": call_id,
                "state": "output-available",
                "input": {"q": message_id},
                "output": output,
            },
            {"type": "step-start"},
            {"type": "text", "text": body},
        ],
    }


def ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


def conversation(pairs: int, prefix: str = "") -> list[dict[str, Any]]:
    """``pairs`` user/assistant exchanges, ids ``u0, a0, u1, a1, …``."""
    out: list[dict[str, Any]] = []
    for i in range(pairs):
        out.append(user(f"{prefix}u{i}", f"question number {i}"))
        out.append(assistant(f"{prefix}a{i}", f"answer number {i}"))
    return out
