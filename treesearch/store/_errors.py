"""Error mapping for the store, in one place.

Every public operation of ``ShadowStore`` runs inside ``errors(Op, what)``: a git failure or an
``OSError`` becomes the operation's own ``StoreError`` subclass (one line, naming the path or git's
message), and a ``StoreError`` raised inside passes through unchanged. No raw exception leaves the
store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from treesearch.errors import StoreError
from treesearch.store._fs import UnsafePathError
from treesearch.store._git import GitFailed


@contextlib.contextmanager
def errors(kind: type[StoreError], what: str, *, reading: bool = False) -> Iterator[None]:
    """Map failures inside the block to ``kind``, prefixed with ``what`` (e.g. "diff failed").

    ``reading``: an ``OSError`` means a workspace file could not be read ("cannot read <path>").
    """
    try:
        yield
    except StoreError:
        raise
    except GitFailed as exc:
        raise kind(git_message(what, exc)) from exc
    except UnsafePathError as exc:
        raise kind(f"{what} at {exc.filename}: {exc.strerror}") from exc
    except OSError as exc:
        if reading and exc.filename:
            raise kind(f"{what}: cannot read {exc.filename}: {exc.strerror}") from exc
        raise kind(f"{what}: {one_line(exc)}") from exc


def git_message(what: str, exc: GitFailed) -> str:
    """``what`` and the line of git's message that says most."""
    text = exc.stderr or f"git exited {exc.code}"
    for line in text.splitlines():
        if "open(" in line or "Permission denied" in line or "unable to" in line.lower():
            return f"{what}: {line.strip()}"
    return f"{what}: {text.splitlines()[-1] if text else ''}".strip()


def one_line(exc: BaseException) -> str:
    """The last line of ``describe``: messages stay on one line."""
    lines = [line.strip() for line in describe(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    if isinstance(exc, GitFailed):
        return exc.stderr or str(exc)
    return str(exc)
