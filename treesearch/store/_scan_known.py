"""What a scan already knows, so that git need not be asked again: the index entries a restore
made (told to git on the command line of the next ``update-index`` a scan runs), and the ignore
verdicts of files git classified before (a folder made again with them needs no listing)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from treesearch.store._walk import IgnoreRules, WalkResult


def index_entry_args(entries: Mapping[str, tuple[int, str] | None]) -> list[str]:
    """``update-index`` arguments that put ``entries`` (path -> (mode, blob id); ``None``:
    removed) into the index, without reading any file: removals first, then ``--cacheinfo``."""
    gone = sorted(p for p, entry in entries.items() if entry is None)
    args = ["--force-remove", *("./" + p for p in gone), "--no-force-remove"] if gone else []
    args += ["--add", "--replace"]
    for p, entry in sorted(entries.items()):
        if entry is not None:
            args += ["--cacheinfo", f"{entry[0]:o},{entry[1]},{p}"]
    return args


def all_checked(folder: str, w: WalkResult, base: IgnoreRules) -> bool:
    """Does the new ``folder`` hold only files git classified before with the same ignore inputs
    (``checked_files``)? Their verdicts stand (a pattern that ignores the folder would have
    ignored them); an empty folder, a sub-folder or a repository in it: git is asked."""
    names = w.dir_names.get(folder)
    if not names:
        return False
    prefix = folder + "/"
    return all(
        n != ".git" and prefix + n not in w.dir_mtimes and prefix + n in base.checked_files
        for n in names
    )


def new_entries(
    w: WalkResult,
    old_names: Mapping[str, frozenset[str]],
    base: IgnoreRules,
    relisted: Collection[str] | None,
) -> tuple[list[str], list[str]]:
    """Names new in re-listed folders that need classifying, and those of them that are files."""
    new_paths: list[str] = []
    new_files: list[str] = []
    for d in w.dir_names if relisted is None else sorted(relisted):
        names = w.dir_names.get(d)
        before = old_names.get(d)
        if names is None:
            continue
        if before is None or names is before:
            continue  # a new folder (its parent lists it as new), or one not re-listed
        prefix = d + "/" if d else ""
        for n in sorted(names - before):
            p = prefix + n
            if n == ".git" or (p in w.dir_mtimes and not all_checked(p, w, base)):
                new_paths.append(p)  # a folder: what it holds may differ every time
            elif p in w.dir_mtimes:
                continue  # made again with files git classified before (a restore pruned it)
            elif p not in base.checked_files:
                new_paths.append(p)
                new_files.append(p)
    return new_paths, new_files
