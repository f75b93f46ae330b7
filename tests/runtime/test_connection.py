"""A connection's outgoing queue: frames go out in order, and a client that stops reading is dropped."""

from __future__ import annotations

import asyncio

from ponder.runtime import Connection


class StuckTransport:
    """A socket whose peer never reads: every send waits until released."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.closed: tuple[int, str] | None = None
        self.release = asyncio.Event()
        self.closed_event = asyncio.Event()

    async def send_text(self, data: str) -> None:
        await self.release.wait()
        self.sent.append(data)

    async def send_bytes(self, data: bytes) -> None:
        await self.release.wait()
        self.sent.append(data.decode())

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.closed = (code, reason)
        self.closed_event.set()


async def test_a_burst_of_small_frames_to_a_reading_client_is_delivered_in_order() -> None:
    transport = StuckTransport()
    connection = Connection("c", transport)
    for i in range(30_000):  # more frames than any per-frame cap would allow, a few hundred KB in all
        connection.send({"i": i})
    transport.release.set()
    connection.close()
    await asyncio.wait_for(transport.closed_event.wait(), 10)
    assert transport.closed == (1000, "")
    assert transport.sent == [f'{{"i":{i}}}' for i in range(30_000)]


async def test_a_client_that_stops_reading_is_closed_with_1013_once_the_queue_is_too_large() -> None:
    transport = StuckTransport()
    connection = Connection("c", transport)
    connection.max_pending_bytes = 10_000
    frame = {"text": "x" * 990}  # about 1,003 bytes encoded
    for _ in range(9):
        connection.send(frame)
    assert not connection.closed
    connection.send(frame)
    assert connection.closed  # over the cap: no more frames are queued
    connection.send(frame)
    transport.release.set()  # what was queued before the cap is still flushed, then the socket closes
    await asyncio.wait_for(transport.closed_event.wait(), 10)
    assert transport.closed == (1013, "client too slow")
    assert len(transport.sent) == 9
