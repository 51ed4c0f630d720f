"""One process at a time computes a given fault-localisation spectrum (see ``localize``)."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path

_LOCK_POLL = 0.02
"""Seconds between two tries for a spectrum's lock."""


@contextlib.contextmanager
def computing(key: str | None, folder: Path | None, deadline: float) -> Iterator[bool]:
    """Hold the lock of spectrum ``key`` under ``folder`` (waiting until ``deadline``, a
    ``time.monotonic()`` value); yields whether it is held (no key or folder, a folder that
    cannot be written, or the deadline passed: not held, and the caller computes anyway)."""
    if key is None or folder is None:
        yield False
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / f"{key}.lock", "a+b")  # noqa: SIM115 - held across the yield
    except OSError:
        yield False
        return
    with handle:
        held = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(_LOCK_POLL)
            except OSError:
                break
        try:
            yield held
        finally:
            if held:
                fcntl.flock(handle, fcntl.LOCK_UN)
