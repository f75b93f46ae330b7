"""Media eviction: aged data-URL media moves to workspace files and leaves a marker; passes are bounded."""

from __future__ import annotations

import base64
import math
import re
from typing import Any

import pytest

from ponder.sessions import (
    EVICTED_DIR,
    AttachmentSink,
    MediaEviction,
    Session,
    SessionEvent,
    StoreAttachmentSink,
    StoredFile,
    evict_message_media,
    eviction_cutoff,
)
from ponder.storage import Store

from .conftest import MakeSession
from .helpers import assistant, user

PNG = bytes(range(256)) * 200  # 51,200 bytes: above the 32 KiB default threshold
_MARKER = re.compile(r"^\[evicted (?:(?P<type>[^,]+), )?(?P<size>\d+) bytes; preserved at (?P<path>\S+)\]$")


def _data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _image(message_id: str, data: bytes = PNG) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": "user",
        "parts": [
            {"type": "text", "text": "look at this"},
            {"type": "file", "mediaType": "image/png", "url": _data_url(data)},
        ],
    }


def _tool_with_media(message_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": "assistant",
        "parts": [
            {
                "type": "tool-screenshot",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {},
                "output": {
                    "shot": _data_url(PNG),
                    "content": [
                        {"type": "media", "data": base64.b64encode(PNG).decode(), "mediaType": "image/jpeg"}
                    ],
                    "small": _data_url(b"tiny"),
                    "note": "kept",
                },
            }
        ],
    }


class MemorySink:
    """An AttachmentSink standing in for the workspace."""

    def __init__(self) -> None:
        self.files: dict[str, StoredFile] = {}

    async def write_bytes(self, path: str, data: bytes, *, media_type: str | None = None) -> None:
        self.files[path] = StoredFile(path, data, media_type)

    async def read_bytes(self, path: str) -> StoredFile | None:
        return self.files.get(path)


def test_memory_sink_satisfies_the_protocol() -> None:
    assert isinstance(MemorySink(), AttachmentSink)


def test_cutoff_trails_truncation_by_whole_steps() -> None:
    policy = MediaEviction()
    assert eviction_cutoff(12, policy, 8) == 0  # truncation cutoff 8, one step behind
    assert eviction_cutoff(20, policy, 8) == 8
    assert eviction_cutoff(27, policy, 8) == 8
    assert eviction_cutoff(28, policy, 8) == 16
    assert eviction_cutoff(20, policy, math.inf) == 12
    assert eviction_cutoff(20, MediaEviction(keep_recent_messages=1), 1) == 16  # clamped to 4
    for n in range(0, 80):
        assert n - eviction_cutoff(n, policy, 8) >= min(n, 8)


def test_evict_message_media_replaces_file_parts_and_tool_strings() -> None:
    message, files = evict_message_media(_image("m1"), 32_768)
    assert len(files) == 1
    marker = message["parts"][1]
    assert marker["type"] == "text"
    match = _MARKER.match(marker["text"])
    assert match and match["type"] == "image/png" and int(match["size"]) == len(PNG)
    assert match["path"] == f"{EVICTED_DIR}/m1-0.png" == files[0].path
    assert files[0].data == PNG and files[0].media_type == "image/png"

    tool_message, tool_files = evict_message_media(_tool_with_media("t1"), 32_768)
    output = tool_message["parts"][0]["output"]
    assert [f.path for f in tool_files] == [f"{EVICTED_DIR}/t1-0.png", f"{EVICTED_DIR}/t1-1.jpeg"]
    assert _MARKER.match(output["shot"])
    assert output["content"][0]["type"] == "text" and _MARKER.match(output["content"][0]["text"])
    assert output["small"] == _data_url(b"tiny") and output["note"] == "kept"

    untouched = user("plain", "no media here")
    same, none = evict_message_media(untouched, 32_768)
    assert none == [] and same == untouched


def test_extensions_and_unknown_types() -> None:
    big = b"a" * 40_000
    cases = {
        "data:image/svg+xml;base64,": "svgxml",
        "data:;base64,": "txt",
        "data:application/;base64,": "bin",
    }
    for prefix, ext in cases.items():
        url = prefix + base64.b64encode(big).decode()
        message = {"id": "m", "role": "user", "parts": [{"type": "file", "url": url}]}
        _, files = evict_message_media(message, 32_768)
        assert files[0].path.endswith(f".{ext}")
    plain = {
        "id": "p",
        "role": "user",
        "parts": [{"type": "file", "url": "data:text/plain," + "%41" * 40_000}],
    }
    changed, files = evict_message_media(plain, 32_768)
    assert files[0].data == b"A" * 40_000
    assert changed["parts"][0]["text"].startswith("[evicted text/plain, 40000 bytes;")
    unknown = {
        "id": "u",
        "role": "user",
        "parts": [{"type": "file", "url": "data:;base64," + base64.b64encode(big).decode()}],
    }
    text = evict_message_media(unknown, 32_768)[0]["parts"][0]["text"]
    assert text.startswith("[evicted 40000 bytes; preserved at ")


async def _history_with_media(session: Session, total: int = 30) -> None:
    messages = [_image("img0"), assistant("ans0", "a picture of bytes"), _tool_with_media("tool0")]
    messages += [user(f"u{i}", f"msg {i}") for i in range(total - len(messages))]
    await session.append_many(messages)


async def test_eviction_writes_the_bytes_to_the_marker_path_and_a_second_pass_is_a_noop(
    make_session: MakeSession,
) -> None:
    sink = MemorySink()
    session = await make_session(attachments=sink)
    session.media_eviction = None  # no background pass: drive it by hand
    await _history_with_media(session)
    session.media_eviction = MediaEviction()
    session._seed_media_candidates()
    events: list[SessionEvent] = []
    session.add_listener(events.append)

    first = await session.evict_media()
    assert first.messages == 2 and first.parts == 3
    stored = await session.get_message("img0")
    marker = stored["parts"][1]["text"]
    path = _MARKER.match(marker)["path"]
    assert sink.files[path].data == PNG and sink.files[path].media_type == "image/png"
    assert [e.kind for e in events].count("media_evicted") == 1
    assert "update" not in [e.kind for e in events]  # rewritten silently
    assert session.get("img0") is not None and session.get("img0")["parts"][1]["text"] == marker

    second = await session.evict_media()
    assert second.messages == 0 and second.parts == 0
    reopened = await make_session(attachments=sink)
    third = await reopened.evict_media()
    assert third.messages == 0
    assert (await reopened.get_message("img0"))["parts"][1]["text"] == marker


async def test_recent_messages_keep_their_media(make_session: MakeSession) -> None:
    sink = MemorySink()
    session = await make_session(attachments=sink)
    await session.append_many([user(f"u{i}", "x") for i in range(10)] + [_image("recent")])
    await session.wait_idle()
    result = await session.evict_media()
    assert result.messages == 0 and sink.files == {}
    assert session.get("recent")["parts"][1]["type"] == "file"


async def test_background_passes_follow_appends(make_session: MakeSession) -> None:
    sink = MemorySink()
    session = await make_session(attachments=sink)
    await session.append(_image("old"))
    for i in range(20):
        await session.append(user(f"u{i}", "more"))
    await session.wait_idle()
    assert session.get("old")["parts"][1]["type"] == "text"
    assert list(sink.files) == [f"{EVICTED_DIR}/old-0.png"]


async def test_passes_are_bounded_and_chain(make_session: MakeSession) -> None:
    sink = MemorySink()
    session = await make_session(attachments=sink, media_eviction=MediaEviction(max_rows_per_pass=2))
    session.media_eviction = None
    await session.append_many([_image(f"img{i}") for i in range(5)] + [user(f"u{i}") for i in range(20)])
    session.media_eviction = MediaEviction(max_rows_per_pass=2)
    session._seed_media_candidates()
    first = await session.evict_media()
    assert first.messages == 2 and first.more is True
    session.schedule_media_eviction()
    await session.wait_idle()
    assert len(sink.files) == 5


async def test_disabled_eviction_keeps_media(make_session: MakeSession) -> None:
    sink = MemorySink()
    session = await make_session(attachments=sink, media_eviction=False)
    await _history_with_media(session)
    await session.wait_idle()
    assert (await session.evict_media()).messages == 0
    assert sink.files == {}


async def test_a_message_changed_during_the_pass_is_left_for_later(make_session: MakeSession) -> None:
    session = await make_session()
    session.media_eviction = None
    await session.append_many([_image("img")] + [user(f"u{i}") for i in range(20)])
    session.media_eviction = MediaEviction()
    session._seed_media_candidates()

    class Racing(MemorySink):
        async def write_bytes(self, path: str, data: bytes, *, media_type: str | None = None) -> None:
            await super().write_bytes(path, data, media_type=media_type)
            changed = _image("img", PNG[::-1])
            await session.upsert(changed)

    session.attachments = Racing()
    result = await session.evict_media()
    assert result.messages == 0
    assert session.get("img")["parts"][1]["type"] == "file"


async def test_store_attachment_sink_round_trips(store: Store) -> None:
    sink = StoreAttachmentSink(store, "agent-x")
    await sink.write_bytes("/workspace/a.png", PNG, media_type="image/png")
    found = await sink.read_bytes("/workspace/a.png")
    assert found == StoredFile("/workspace/a.png", PNG, "image/png")
    await sink.write_bytes("/workspace/a.png", b"new")
    assert (await sink.read_bytes("/workspace/a.png")).data == b"new"
    assert await StoreAttachmentSink(store, "other").read_bytes("/workspace/a.png") is None
    assert await sink.read_bytes("/nope") is None


async def test_default_sink_is_the_store(make_session: MakeSession, store: Store) -> None:
    session = await make_session()
    await session.append_many([_image("img")] + [user(f"u{i}") for i in range(20)])
    await session.wait_idle()
    sink = StoreAttachmentSink(store, session.agent_id)
    found = await sink.read_bytes(f"{EVICTED_DIR}/img-0.png")
    assert found is not None and found.data == PNG


@pytest.mark.parametrize("min_bytes", [1_000, 100_000])
async def test_min_part_bytes(make_session: MakeSession, min_bytes: int) -> None:
    sink = MemorySink()
    session = await make_session(attachments=sink, media_eviction=MediaEviction(min_part_bytes=min_bytes))
    await session.append_many([_image("img")] + [user(f"u{i}") for i in range(20)])
    await session.wait_idle()
    assert bool(sink.files) is (min_bytes < len(PNG))


async def test_large_texts_without_media_are_skipped_without_parsing(make_session: MakeSession) -> None:
    writer = await make_session()
    await writer.append_many(
        [user(f"t{i}", "w" * 40_000) for i in range(10)] + [user(f"u{i}") for i in range(20)]
    )
    session = await make_session(attachments=MemorySink())
    assert session._media_candidates  # a wake cannot tell from metadata alone
    result = await session.evict_media()
    assert result.scanned == 0 and result.messages == 0
    assert not session._media_candidates
