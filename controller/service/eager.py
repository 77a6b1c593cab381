"""Run a coroutine now, in the caller's stack, and only what is left of it in a task.

Python 3.12's eager tasks (`asyncio.eager_task_factory`) for one call, on the 3.11 this
project targets. The daemon hands a device event to its handler from inside the driver's
callback this way: the handler almost never suspends (the journal's commit is a blocking
call, device commands and operator pushes are queued, not awaited), and when it does not, a
task and the loop turn that starts it cost more than a quarter of the daemon's own time per
card (issue 16, docs/performance.md). When it does suspend, a task resumes it exactly where
it stopped: it waits for what the coroutine waits for, then sends the coroutine the outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


def start_eagerly(
    coroutine: Coroutine[Any, Any, None], unfinished: set[asyncio.Task[None]]
) -> asyncio.Task[None] | None:
    """Run `coroutine` until it ends or first suspends; None when it ended here.

    A coroutine that suspended goes on in a task, which is added to `unfinished` until it
    ends (the owner waits for or cancels those at its stop). Its exceptions are the task's.
    """
    try:
        awaited = coroutine.send(None)
    except StopIteration:
        return None
    task = asyncio.get_running_loop().create_task(_resume(coroutine, awaited))
    unfinished.add(task)
    task.add_done_callback(unfinished.discard)
    return task


async def _resume(coroutine: Coroutine[Any, Any, None], awaited: Any) -> None:
    """Drive `coroutine`, suspended on `awaited`, to its end as its own task would have."""
    while True:
        try:
            if awaited is None:
                await asyncio.sleep(0)  # a bare yield (asyncio.sleep(0)): one loop turn
            else:
                # The coroutine yielded its future to us, not to a task: clear the flag a
                # task clears on taking a yielded future (asyncio's protocol for futures),
                # or awaiting it again reads as a bare yield.
                if getattr(awaited, "_asyncio_future_blocking", False):
                    awaited._asyncio_future_blocking = False
                await awaited  # the future it waits for: its outcome is read on resuming
        except BaseException as error:  # cancelled, or the future failed
            try:
                awaited = coroutine.throw(error)
            except StopIteration:
                return
            continue
        try:
            awaited = coroutine.send(None)
        except StopIteration:
            return
