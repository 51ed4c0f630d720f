"""The environment a child process starts from: the one place outside the CLI that reads
``os.environ``.

A test command, a set-up command, a worker or a warm server inherits this process's environment,
as any child started without ``env`` would; treesearch adds its own variables on top. Nothing
here reads a variable as a setting of treesearch: settings come from the config and the command
line, and the CLI is what reads the few variables the docs name (``TREESEARCH_HOME``,
``TREESEARCH_WATCH``, ...). The other modules that touch ``os.environ`` are code that runs in the
interpreter of the tests (pytest plugins, the warm server and its children), and the API key's
lookup by the name a config gives (``agents/llm/client.py``); ``tests/test_environ_reads.py``
keeps it so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["inherited"]


def inherited(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of this process's environment (as Python sees it: variables a library set in the
    C environment only are not in it), with ``extra`` on top."""
    env = dict(os.environ)
    if extra:
        env.update(extra)
    return env
