"""``shlex.split`` of test commands, remembered: every test run splits the same few commands in
several places (is it pytest, may the probe load, can it run warm, which programs key the
cache), which cost ~0.5 ms of a ~50 ms warm run."""

from __future__ import annotations

import functools
import shlex


@functools.lru_cache(maxsize=256)
def _split(command: str) -> tuple[str, ...]:
    return tuple(shlex.split(command))


def shell_words(command: str) -> list[str]:
    """``shlex.split(command)``; raises ``ValueError`` as it does (no closing quotation: such a
    command is not remembered, and is split again on the next call)."""
    return list(_split(command))
