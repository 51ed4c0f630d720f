"""Finding the workspace of a folder, as git finds its top level.

A command run in a subfolder of a workspace works on that workspace: the nearest folder, from the
start folder up, that has a store in the store home. Without one, the start folder is the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

from treesearch.store.shadow import default_home, store_dir_for

__all__ = ["find_workspace"]


def find_workspace(
    start: str | os.PathLike[str], home: str | os.PathLike[str] | None = None
) -> Path:
    """The nearest folder at or above ``start`` whose store exists in ``home`` (default: the
    default home); ``start`` itself (resolved) when none has one."""
    here = Path(os.path.abspath(os.fspath(start)))
    try:
        here = here.resolve(strict=True)
    except OSError:
        return here  # open() says what is wrong with it
    home_path = Path(home).expanduser() if home is not None else default_home()
    home_path = Path(os.path.abspath(home_path))
    if not home_path.is_dir():
        return here
    home_real = home_path.resolve()
    for folder in (here, *here.parents):
        store = store_dir_for(folder, home_real)
        if (store / "workspace").is_file() or (store / "git").is_dir():
            return folder
    return here
