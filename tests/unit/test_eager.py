"""start_eagerly: a coroutine runs in the caller's stack; what suspends goes on in a task."""

from __future__ import annotations

import asyncio

import pytest

from tablectl.controller.service.eager import start_eagerly


def test_a_coroutine_that_never_suspends_ends_before_the_call_returns() -> None:
    done: list[str] = []

    async def work() -> None:
        done.append("ran")

    async def main() -> None:
        unfinished: set[asyncio.Task[None]] = set()
        assert start_eagerly(work(), unfinished) is None
        assert done == ["ran"] and not unfinished

    asyncio.run(main())


def test_a_suspended_coroutine_resumes_with_what_it_awaited_in_order() -> None:
    seen: list[object] = []

    async def work(future: asyncio.Future[int]) -> None:
        seen.append("before")
        seen.append(await future)
        await asyncio.sleep(0)  # a bare yield
        await asyncio.sleep(0.01)
        seen.append("after")

    async def main() -> None:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        unfinished: set[asyncio.Task[None]] = set()
        task = start_eagerly(work(future), unfinished)
        assert task is not None and unfinished == {task} and seen == ["before"]
        future.set_result(7)
        await task
        assert seen == ["before", 7, "after"] and not unfinished

    asyncio.run(main())


def test_a_failed_future_raises_inside_the_coroutine() -> None:
    caught: list[str] = []

    async def work(future: asyncio.Future[int]) -> None:
        try:
            await future
        except ValueError as error:
            caught.append(str(error))
            raise RuntimeError("handled, then failed") from error

    async def main() -> None:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = start_eagerly(work(future), set())
        assert task is not None
        future.set_exception(ValueError("bad"))
        with pytest.raises(RuntimeError, match="handled, then failed"):
            await task
        assert caught == ["bad"]

    asyncio.run(main())


def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    cleaned: list[str] = []

    async def work() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("finally")

    async def main() -> None:
        task = start_eagerly(work(), set())
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == ["finally"]

    asyncio.run(main())
