"""What a run directory records of its config, and the checks made before one is created.

``config.yaml`` of a run is the fully resolved config: every default filled in (the pydantic
models dumped with their aliases: test specs and agents included), the workspace searched
and the store home actually used as absolute paths, so that ``resume`` and ``checkout`` find the
same store whatever ``TREESEARCH_HOME`` says then. It validates as a config file of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from treesearch.config import LoadedConfig, origin
from treesearch.errors import ConfigError

__all__ = ["check_runs_dir", "check_workspace", "resolved_config", "store_home"]


def store_home(loaded: LoadedConfig, default: Path) -> Path:
    """The store home as an absolute path: ``store.home`` (relative to the config's folder), or
    ``default`` (the environment's or the user's cache folder)."""
    home = loaded.config.store.home
    if home is None:
        return Path(os.path.abspath(default.expanduser()))
    p = Path(home).expanduser()
    return p if p.is_absolute() else Path(os.path.abspath(loaded.base_dir / p))


def _blame(loaded: LoadedConfig, *loc: str) -> str:
    return origin(loc, loaded.source, loaded.overrides)


def check_workspace(loaded: LoadedConfig) -> Path:
    """The workspace folder, refused with a one-line error when it cannot be searched."""
    path = loaded.workspace_path()
    where = f"{_blame(loaded, 'workspace', 'path')}: workspace.path"
    if not path.is_dir():
        raise ConfigError(f"{where}: {path} is not a folder: point it at the project to search")
    real = path.resolve()
    if real == Path(real.anchor):
        raise ConfigError(f"{where}: {path} is the filesystem root: point it at a project folder")
    try:
        is_home = real == Path.home().resolve()
    except (RuntimeError, KeyError):
        is_home = False
    if is_home:
        raise ConfigError(
            f"{where}: {path} is your home folder: point it at a project folder inside it"
        )
    return path


def check_runs_dir(
    loaded: LoadedConfig, runs_dir: Path, run_id: str | None, *, flag: str | None = None
) -> None:
    """``runs_dir`` must be a folder (or not exist yet) and ``run_id`` must be free; ``flag``
    names the command-line option ``runs_dir`` came from, if it did not come from the config."""
    where = flag or f"{_blame(loaded, 'output', 'runs_dir')}: output.runs_dir"
    for parent in (runs_dir, *runs_dir.parents):
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"{where}: {parent} is not a folder: point output.runs_dir (or --runs-dir) "
                    "at a folder"
                )
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ConfigError(f"{where}: {parent} is not writable: choose another folder")
            break
    if run_id is not None and (runs_dir / run_id).exists():
        raise ConfigError(
            f"{_blame(loaded, 'output', 'run_id')}: output.run_id: {runs_dir / run_id} already "
            f"exists: choose another run id, or `treesearch resume {runs_dir / run_id}`"
        )


def resolved_config(
    loaded: LoadedConfig,
    *,
    workspace: Path,
    source: Path | None,
    home: Path,
    runs_dir: Path,
    run_id: str,
) -> dict[str, Any]:
    """The config a run records: every default, absolute paths, and what the run used."""
    data: dict[str, Any] = loaded.config.model_dump(mode="json", by_alias=True)
    data["workspace"] = {
        "path": str(workspace),
        "copy": False,
        "source": None if source is None else str(source),
    }
    data["store"]["home"] = str(home)
    data["output"]["runs_dir"] = str(runs_dir)
    data["output"]["run_id"] = run_id
    return data
