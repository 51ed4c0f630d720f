"""The shadow snapshot store, tested with real git, real files and real processes."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
from conftest import clean_git_env, run_git, tree_digest

import treesearch.store
from treesearch.errors import (
    CaptureError,
    MaterializeError,
    RefError,
    RestoreError,
    StoreLocationError,
    StoreLockedError,
    TreesearchError,
)
from treesearch.store import ShadowStore
from treesearch.store._restore import journal_pending

# Every test here runs with the store's watcher on and off (slow ones: see conftest).
pytestmark = pytest.mark.usefixtures("watch_mode")


def objects_files(store: ShadowStore) -> set[str]:
    out: set[str] = set()
    for dirpath, _d, names in os.walk(store.git_dir / "objects"):
        out.update(os.path.join(dirpath, n) for n in names)
    return out


def make_user_repo(ws: Path) -> None:
    """A user repository with two commits, a second branch, a stash, staged and untracked files."""
    run_git(ws, "init", "-q")
    (ws / "README.md").write_text("hello\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("print('v1')\n")
    run_git(ws, "add", "-A")
    run_git(ws, "commit", "-q", "-m", "first")
    run_git(ws, "branch", "feature")
    (ws / "src" / "app.py").write_text("print('v2')\n")
    run_git(ws, "commit", "-q", "-am", "second")
    (ws / "README.md").write_text("stashed change\n")
    run_git(ws, "stash", "-q")
    (ws / "staged.txt").write_text("staged\n")
    run_git(ws, "add", "staged.txt")
    (ws / "untracked.txt").write_text("untracked\n")


# ---------------------------------------------------------------------------- public surface


def test_store_all_is_exactly_the_public_names() -> None:
    public = {n for n in dir(treesearch.store) if not n.startswith("_")}
    # Submodules appear as attributes once anything imported them (e.g. `store.source` by eval).
    public -= {n for n in public if isinstance(getattr(treesearch.store, n), types.ModuleType)}
    assert set(treesearch.store.__all__) == public


# ---------------------------------------------------------------------------- location


def test_open_refuses_filesystem_root(home: Path) -> None:
    with pytest.raises(StoreLocationError, match="root"):
        ShadowStore.open("/", home=home)


def test_open_refuses_home_folder_itself(home: Path) -> None:
    with pytest.raises(StoreLocationError, match="home folder"):
        ShadowStore.open(Path.home(), home=home)


def test_open_refuses_store_inside_workspace(workspace: Path) -> None:
    with pytest.raises(StoreLocationError, match="inside the workspace"):
        ShadowStore.open(workspace, home=workspace / ".cache")
    assert list(workspace.iterdir()) == []


def test_open_refuses_workspace_inside_store_home(tmp_path: Path) -> None:
    inner = tmp_path / "home" / "project"
    inner.mkdir(parents=True)
    with pytest.raises(StoreLocationError, match="inside the store home"):
        ShadowStore.open(inner, home=tmp_path / "home")


def test_open_refuses_missing_workspace(tmp_path: Path, home: Path) -> None:
    with pytest.raises(StoreLocationError, match="does not exist"):
        ShadowStore.open(tmp_path / "nope", home=home)


def test_store_folder_is_keyed_by_workspace_path(tmp_path: Path, home: Path) -> None:
    a, b = tmp_path / "x" / "proj", tmp_path / "y" / "proj"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    sa, sb = ShadowStore.open(a, home=home), ShadowStore.open(b, home=home)
    assert sa.path != sb.path and sa.path.parent == sb.path.parent == home
    assert ShadowStore.open(a, home=home).path == sa.path


# ---------------------------------------------------------------------------- capture basics


def test_capture_twice_without_change_returns_same_tree_and_writes_no_objects(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "a\n")
    write(workspace, "d/b.txt", "b\n")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    before = objects_files(store)
    second = store.capture()
    assert second.tree == first.tree and second.commit == first.commit
    assert objects_files(store) == before
    assert second.stats is not None and second.stats.files_hashed == 0


def test_capture_after_change_reports_changed_paths_and_hashes_only_them(
    workspace: Path, home: Path, write
) -> None:
    for i in range(50):
        write(workspace, f"f{i}.txt", f"{i}\n")
    store = ShadowStore.open(workspace, home=home)
    base = store.capture()
    write(workspace, "f3.txt", "changed\n")
    (workspace / "f4.txt").unlink()
    write(workspace, "new/x.txt", "x")
    snap = store.capture(label="edit", meta={"step": 1})
    assert snap.tree != base.tree and snap.parent == base.commit
    assert set(snap.changed) == {"f3.txt", "f4.txt", "new/x.txt"}
    assert snap.stats is not None and snap.stats.files_hashed == 2
    assert store.resolve("edit").meta == {"step": 1}


def test_capture_reports_fifo_and_socket_as_skipped(workspace: Path, home: Path, write) -> None:
    write(workspace, "a.txt", "a")
    os.mkfifo(workspace / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(workspace / "sock"))
    try:
        snap = ShadowStore.open(workspace, home=home).capture()
    finally:
        sock.close()
    assert {(s.path, s.reason) for s in snap.skipped} == {("pipe", "special"), ("sock", "special")}


def test_capture_of_unreadable_file_fails_with_path_and_records_nothing(
    tmp_path: Path,
) -> None:
    # Run as an unprivileged user when we are root (root reads mode-000 files regardless).
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"ts-unreadable-{os.getpid()}-{time.time_ns()}"
    base.mkdir()
    try:
        base.chmod(0o777)
        script = textwrap.dedent(
            f"""
            import os, sys, json
            from treesearch.store import ShadowStore
            from treesearch.errors import CaptureError
            if os.geteuid() == 0:  # after the imports: the interpreter may live under /root
                os.setgid(65534); os.setuid(65534)
            ws = {str(base / "ws")!r}
            os.makedirs(ws + "/sub")
            open(ws + "/ok.txt", "w").write("ok")
            open(ws + "/sub/secret.txt", "w").write("secret")
            s = ShadowStore.open(ws, home={str(base / "home")!r})
            first = s.capture()
            open(ws + "/ok.txt", "w").write("changed")
            os.chmod(ws + "/sub/secret.txt", 0)
            try:
                s.capture(label="bad")
                print(json.dumps({{"error": None}}))
                sys.exit(0)
            except CaptureError as exc:
                err = str(exc)
            n = len(s.log())
            os.chmod(ws + "/sub/secret.txt", 0o644)
            again = s.capture(label="good")
            print(json.dumps({{"error": err, "n": n, "ok": again.tree != first.tree,
                              "labels": [x.label for x in s.log()]}}))
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["error"] is not None and "sub/secret.txt" in result["error"]
        assert result["n"] == 1
        assert result["ok"] and result["labels"] == ["good", None]
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


# ---------------------------------------------------------------------------- zero intrusion


def test_user_repo_git_folder_is_byte_identical_after_captures_edits_restores(
    workspace: Path, home: Path, tmp_path: Path, write
) -> None:
    make_user_repo(workspace)
    git_before = tree_digest(workspace / ".git", include_mtime=True)
    status_before = run_git(workspace, "status", "--porcelain=v2", "--branch")
    store = ShadowStore.open(workspace, home=home)
    a = store.capture(label="a")
    write(workspace, "src/app.py", "print('broken')\n")
    write(workspace, "src/new_module.py", "x = 1\n")
    (workspace / "untracked.txt").unlink()
    b = store.capture(label="b")
    store.restore("a")
    store.diff("a", "b")
    store.diff("b")
    store.restore(b.commit[:10])
    store.undo()
    store.materialize("b", tmp_path / "copy")
    store.gc(keep_last=1)
    assert tree_digest(workspace / ".git", include_mtime=True) == git_before
    assert run_git(workspace, "status", "--porcelain=v2", "--branch") == status_before
    assert store.diff("a").empty
    assert a.tree == store.capture().tree
    # Nothing was added to the workspace: exactly the user's paths, no temp files.
    assert sorted(p.name for p in workspace.iterdir()) == [
        ".git",
        "README.md",
        "src",
        "staged.txt",
        "untracked.txt",
    ]


def test_first_capture_of_git_workspace_matches_plain_capture(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    make_user_repo(workspace)
    (workspace / "src" / "app.py").write_text("print('modified, unstaged')\n")
    seeded_store = ShadowStore.open(workspace, home=home)
    seeded = seeded_store.capture()
    # The user's objects came over as one pack stream (a capture this small writes loose
    # objects), so the files whose stat data matched the user's index were not hashed again.
    assert list((seeded_store.git_dir / "objects" / "pack").glob("*.pack"))
    # The same files without the user's repository: no seeding possible, same tree expected.
    import shutil

    bare_copy = tmp_path / "nogit" / "ws"
    shutil.copytree(workspace, bare_copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    plain = ShadowStore.open(bare_copy, home=tmp_path / "home2").capture()
    assert plain.tree == seeded.tree
    copy = tmp_path / "mat"
    ShadowStore.open(workspace, home=home).materialize(seeded.commit, copy)
    assert (copy / "src" / "app.py").read_text() == "print('modified, unstaged')\n"
    assert (copy / "untracked.txt").read_text() == "untracked\n"
    assert not (copy / ".git").exists()


# ---------------------------------------------------------------------------- nested repositories


def test_nested_repos_with_and_without_commits_are_captured_and_restored(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "top.txt", "top")
    done = workspace / "libs" / "done"
    done.mkdir(parents=True)
    run_git(done, "init", "-q")
    write(done, "lib.py", "v = 1\n")
    write(done, "build.log", "ignored by nested .gitignore")
    write(done, ".gitignore", "*.log\n")
    run_git(done, "add", "-A")
    run_git(done, "commit", "-q", "-m", "nested")
    fresh = workspace / "fresh"
    fresh.mkdir()
    run_git(fresh, "init", "-q")
    write(fresh, "wip.py", "wip = True\n")
    nested_gits = {p: tree_digest(p / ".git", include_mtime=True) for p in (done, fresh)}

    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    names = {e.path for e in store.files(snap.commit)}
    assert {"libs/done/lib.py", "fresh/wip.py", "libs/done/.gitignore"} <= names
    assert "libs/done/build.log" not in names
    assert not any("/.git/" in n or n.endswith("/.git") for n in names)

    write(done, "lib.py", "v = 2\n")
    (fresh / "wip.py").unlink()
    write(fresh, "extra.py", "extra")
    store.restore(snap.commit)
    assert (done / "lib.py").read_text() == "v = 1\n"
    assert (fresh / "wip.py").read_text() == "wip = True\n"
    assert not (fresh / "extra.py").exists()
    assert (done / "build.log").exists()
    for p, digest in nested_gits.items():
        assert tree_digest(p / ".git", include_mtime=True) == digest


# ---------------------------------------------------------------------------- byte-exact round trip


HOSTILE_ATTRIBUTES = "* text eol=crlf\n*.id ident\n*.bin filter=lfs diff=lfs merge=lfs -text\n"


def hostile_git_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A global and system config that would change bytes, run hooks or sign; inherited GIT_*."""
    marker = tmp_path / "hostile-marker"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in (
        "pre-commit",
        "post-commit",
        "post-checkout",
        "reference-transaction",
        "post-index-change",
    ):
        h = hooks / name
        h.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        h.chmod(0o755)
    template = tmp_path / "template"
    (template / "hooks").mkdir(parents=True)
    (template / "hooks" / "post-commit").write_text(f"#!/bin/sh\necho template >> {marker}\n")
    (template / "hooks" / "post-commit").chmod(0o755)
    fsmon = tmp_path / "fsmonitor.sh"
    fsmon.write_text(f"#!/bin/sh\necho fsmonitor >> {marker}\n")
    fsmon.chmod(0o755)
    excludes = tmp_path / "global-excludes"
    excludes.write_text("*.txt\n*.py\n")
    cfg = tmp_path / "gitconfig"
    cfg.write_text(
        textwrap.dedent(f"""\
        [core]
            autocrlf = true
            eol = crlf
            safecrlf = true
            hooksPath = {hooks}
            fsmonitor = {fsmon}
            excludesFile = {excludes}
            attributesFile = {tmp_path / "global-attributes"}
        [commit]
            gpgSign = true
        [gpg]
            program = /bin/false
        [init]
            templateDir = {template}
        [user]
            signingKey = nope
        [filter "lfs"]
            clean = sh -c 'echo CLEANED; echo lfs >> {marker}'
            smudge = sh -c 'echo SMUDGED; echo lfs >> {marker}'
            required = true
        """)
    )
    (tmp_path / "global-attributes").write_text("* text eol=crlf\n")
    for var in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        monkeypatch.setenv(var, str(cfg))
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    bogus = tmp_path / "bogus"
    bogus.mkdir()
    monkeypatch.setenv("GIT_DIR", str(bogus / "gitdir"))
    monkeypatch.setenv("GIT_WORK_TREE", str(bogus))
    monkeypatch.setenv("GIT_INDEX_FILE", str(bogus / "index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(bogus / "objects"))
    return marker


@pytest.mark.parametrize(
    "attributes", [HOSTILE_ATTRIBUTES, "* text eol=crlf\n", "* ident\n", "* filter=lfs -text\n"]
)
def test_round_trip_is_byte_exact_under_hostile_attributes_and_git_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attributes: str, write
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    files = {
        ".gitattributes": attributes.encode(),
        "lf.txt": b"one\ntwo\n",
        "crlf.txt": b"one\r\ntwo\r\n",
        "mixed.py": b"a\r\nb\nc\r",
        "ident.id": b"$Id$\n$Id: 0123456789abcdef $\n",
        "blob.bin": b"version https://git-lfs.github.com/spec/v1\n\x00\xff\xfe",
        "no_eol.txt": b"no newline at end",
    }
    for rel, data in files.items():
        write(ws, rel, data)
    marker = hostile_git_setup(tmp_path, monkeypatch)
    home = tmp_path / "home"
    store = ShadowStore.open(ws, home=home)
    snap = store.capture(label="orig")
    assert {e.path for e in store.files("orig")} == set(files)
    for rel in files:
        write(ws, rel, b"clobbered\n")
    store.restore("orig")
    for rel, data in files.items():
        assert (ws / rel).read_bytes() == data, rel
    copy = tmp_path / "copy"
    store.materialize(snap.commit, copy)
    for rel, data in files.items():
        assert (copy / rel).read_bytes() == data, rel
    assert not marker.exists(), marker.read_text()
    assert not (tmp_path / "bogus" / "gitdir").exists()
    assert os.environ["GIT_DIR"] == str(tmp_path / "bogus" / "gitdir")  # never changed by us
    assert store.fsck() is not None


def test_round_trip_of_modes_links_odd_names_and_empty_things(
    workspace: Path, home: Path, write
) -> None:
    odd = [
        "with space.txt",
        "new\nline.txt",
        "-leading-dash",
        "--help",
        ":(glob)magic",
        ":x",
        os.fsdecode(b"latin1-\xe9.txt"),
        os.fsdecode(b"\xff\xfe-bytes"),
        "tab\there",
        "*star?",
    ]
    for name in odd:
        write(workspace, name, f"content of {name!r}\n")
    write(workspace, "empty", b"")
    write(workspace, "run.sh", "#!/bin/sh\necho hi\n", mode=0o755)
    write(workspace, "secret.key", "private\n", mode=0o600)
    write(workspace, "group.txt", "g\n", mode=0o640)
    write(workspace, "deep/a/b/c.txt", "c")
    (workspace / "empty_dir").mkdir()
    (workspace / "nested_empty" / "inner").mkdir(parents=True)
    os.symlink("deep/a/b/c.txt", workspace / "link_file")
    os.symlink("deep/a", workspace / "link_dir")
    os.symlink("/definitely/not/here", workspace / "dangling")
    os.symlink("../outside", workspace / "escaping_link")
    before = tree_digest(workspace)
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    assert snap.modes == {"secret.key": 0o600, "group.txt": 0o640}
    assert set(snap.empty_dirs) == {"empty_dir", "nested_empty/inner"}

    # Wreck everything: contents, modes, links, empty folders, and add junk.
    for name in odd:
        (workspace / name).unlink()
    write(workspace, "empty", "not empty now")
    (workspace / "run.sh").chmod(0o644)
    (workspace / "secret.key").chmod(0o644)
    (workspace / "link_file").unlink()
    write(workspace, "link_file", "a regular file now")
    (workspace / "dangling").unlink()
    os.rmdir(workspace / "empty_dir")
    os.rmdir(workspace / "nested_empty" / "inner")
    write(workspace, "junk/more/junk.txt", "junk")
    write(workspace, "deep/a/b/extra.txt", "extra")
    t_restore = time.time_ns()
    time.sleep(0.01)
    result = store.restore(snap.commit)
    assert tree_digest(workspace) == before
    assert "junk" in result.pruned and "junk/more" in result.pruned
    assert (workspace / "empty").stat().st_mtime_ns >= t_restore  # fresh mtime for build tools
    assert stat.S_IMODE((workspace / "secret.key").stat().st_mode) == 0o600
    assert os.readlink(workspace / "dangling") == "/definitely/not/here"


def test_restore_never_widens_permissions_of_new_files(workspace: Path, home: Path, write) -> None:
    write(workspace, "secret.key", "private\n", mode=0o600)
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    (workspace / "secret.key").unlink()
    store.capture()
    store.restore(snap.commit)
    assert stat.S_IMODE((workspace / "secret.key").stat().st_mode) == 0o600


@pytest.mark.slow
def test_round_trip_of_a_200_mb_file(workspace: Path, home: Path) -> None:
    big = workspace / "big.bin"
    chunk = os.urandom(1 << 20)
    with open(big, "wb") as fh:
        for i in range(200):
            fh.write(chunk[i:] + chunk[:i])
    before = tree_digest(workspace)
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    big.write_bytes(b"small now")
    store.restore(snap.commit)
    assert tree_digest(workspace) == before


# ---------------------------------------------------------------------------- safe writes


def test_restore_does_not_write_through_folder_replaced_by_outside_symlink(
    tmp_path: Path, home: Path, write
) -> None:
    ws = tmp_path / "ws"
    write(ws, "src/a.py", "a = 1\n")
    write(ws, "src/pkg/b.py", "b = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "keep.txt", "mine")
    store = ShadowStore.open(ws, home=home)
    snap = store.capture()
    outside_before = tree_digest(outside)
    import shutil

    shutil.rmtree(ws / "src")
    os.symlink(outside, ws / "src")
    store.restore(snap.commit)
    assert tree_digest(outside) == outside_before
    assert (ws / "src").is_dir() and not (ws / "src").is_symlink()
    assert (ws / "src" / "pkg" / "b.py").read_text() == "b = 1\n"
    # ... and undo brings the symlink back, still without touching outside.
    store.undo()
    assert os.readlink(ws / "src") == str(outside)
    assert tree_digest(outside) == outside_before


def test_restore_refuses_to_write_through_an_ignored_symlink(
    tmp_path: Path, home: Path, write
) -> None:
    ws = tmp_path / "ws"
    write(ws, "out/report.txt", "report")
    store = ShadowStore.open(ws, home=home)
    snap = store.capture()
    outside = tmp_path / "outside"
    outside.mkdir()
    import shutil

    shutil.rmtree(ws / "out")
    os.symlink(outside, ws / "out")
    write(ws, ".gitignore", "out\n")
    store.capture()
    before = tree_digest(ws)
    with pytest.raises(RestoreError, match="nothing was changed"):
        store.restore(snap.commit)
    assert tree_digest(ws) == before
    assert list(outside.iterdir()) == []


# ---------------------------------------------------------------------------- what is never deleted


def test_ignored_excluded_and_oversize_files_survive_restores(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, ".gitignore", "*.log\nbuild/\n")
    write(workspace, "src/a.py", "a")
    store = ShadowStore.open(workspace, home=home, excludes=["data/"], max_file_bytes=1000)
    snap = store.capture()
    write(workspace, "run.log", "log")
    write(workspace, "build/out.o", "obj")
    write(workspace, "data/huge.csv", "1,2,3")
    write(workspace, "big.bin", b"x" * 5000)
    write(workspace, "src/b.py", "b")
    later = store.capture()
    assert [(s.path, s.reason) for s in later.skipped] == [("big.bin", "oversize")]
    assert set(later.changed) == {"src/b.py"}
    result = store.restore(snap.commit)
    assert result.deleted == ("src/b.py",)
    for rel in ("run.log", "build/out.o", "data/huge.csv", "big.bin"):
        assert (workspace / rel).exists(), rel


def test_restore_refuses_to_overwrite_an_uncaptured_file(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "notes.log", "version in snapshot")
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    (workspace / "notes.log").unlink()
    write(workspace, ".gitignore", "*.log\n")
    store.capture()
    write(workspace, "notes.log", "precious, ignored, never captured")
    with pytest.raises(RestoreError, match="notes.log"):
        store.restore(snap.commit)
    assert (workspace / "notes.log").read_text() == "precious, ignored, never captured"


def test_file_tracked_by_user_repo_is_captured_although_gitignore_matches(
    workspace: Path, home: Path, write
) -> None:
    run_git(workspace, "init", "-q")
    write(workspace, ".gitignore", "*.cfg\ngenerated/\n")
    write(workspace, "settings.cfg", "tracked anyway")
    write(workspace, "generated/keep.py", "tracked too")
    write(workspace, "generated/junk.py", "ignored")
    write(workspace, "local.cfg", "ignored")
    run_git(workspace, "add", "-f", "settings.cfg", "generated/keep.py", ".gitignore")
    run_git(workspace, "commit", "-q", "-m", "x")
    git_before = tree_digest(workspace / ".git", include_mtime=True)
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    names = {e.path for e in store.files(snap.commit)}
    assert names == {".gitignore", "settings.cfg", "generated/keep.py"}
    assert tree_digest(workspace / ".git", include_mtime=True) == git_before


# ---------------------------------------------------------------------------- refs, diff, show


def test_resolve_accepts_tree_commit_prefixes_and_labels(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a", "1")
    store = ShadowStore.open(workspace, home=home)
    one = store.capture(label="one")
    write(workspace, "a", "2")
    two = store.capture(label="two")
    assert store.resolve(one.tree).commit == one.commit
    assert store.resolve(one.commit[:8]).commit == one.commit
    assert store.resolve(two.tree[:10]).commit == two.commit
    assert store.resolve("one").commit == one.commit
    with pytest.raises(RefError, match="no snapshot matches"):
        store.resolve("three")
    with pytest.raises(RefError):
        store.restore("deadbeefdeadbeef")


def test_diff_reports_kinds_counts_binary_and_truncates_patch(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "mod.txt", "a\nb\nc\n")
    write(workspace, "gone.txt", "bye\n")
    write(workspace, "tool.sh", "#!/bin/sh\n")
    write(workspace, "kind", "file")
    write(workspace, "img.bin", b"\x00\x01\x02")
    store = ShadowStore.open(workspace, home=home)
    a = store.capture()
    write(workspace, "mod.txt", "a\nB\nc\nd\n")
    (workspace / "gone.txt").unlink()
    (workspace / "tool.sh").chmod(0o755)
    (workspace / "kind").unlink()
    os.symlink("mod.txt", workspace / "kind")
    write(workspace, "img.bin", b"\x00\x03")
    write(workspace, "added.txt", "x\n" * 5000)
    d = store.diff(a.commit)
    assert d.added == ("added.txt",)
    assert d.deleted == ("gone.txt",)
    assert d.type_changed == ("kind",)
    assert "tool.sh" in d.modified and d.mode_changed == ("tool.sh",)
    by = {f.path: f for f in d.files}
    assert (by["mod.txt"].added_lines, by["mod.txt"].deleted_lines) == (2, 1)
    assert by["img.bin"].binary and not by["mod.txt"].binary
    assert "+B" in d.patch and not d.truncated
    small = store.diff(a.commit, max_patch_bytes=2000)
    assert small.truncated and len(small.patch.encode()) <= 2000
    b = store.capture()
    assert store.diff(a.commit, b.commit).files == d.files
    assert store.diff(b.commit).empty


def test_patch_from_diff_applies_with_git_apply(
    workspace: Path, home: Path, tmp_path: Path, write
) -> None:
    write(workspace, "pkg/m.py", "def f():\n    return 1\n")
    store = ShadowStore.open(workspace, home=home)
    a = store.capture()
    write(workspace, "pkg/m.py", "def f():\n    return 2\n")
    write(workspace, "pkg/new file.py", "x = 1\n")
    patch = store.diff(a.commit).patch
    copy = tmp_path / "copy"
    store.materialize(a.commit, copy)
    run_git(copy, "init", "-q")
    run_git(copy, "apply", "-", input=patch.encode())
    assert (copy / "pkg" / "m.py").read_text() == "def f():\n    return 2\n"
    assert (copy / "pkg" / "new file.py").read_text() == "x = 1\n"


def test_materialize_refuses_non_empty_or_inside_workspace(
    workspace: Path, home: Path, tmp_path: Path, write
) -> None:
    write(workspace, "a", "1")
    store = ShadowStore.open(workspace, home=home)
    snap = store.capture()
    busy = tmp_path / "busy"
    write(busy, "x", "x")
    with pytest.raises(MaterializeError, match="not an empty folder"):
        store.materialize(snap.commit, busy)
    with pytest.raises(MaterializeError, match="inside the workspace"):
        store.materialize(snap.commit, workspace / "sub")
    assert sorted(p.name for p in workspace.iterdir()) == ["a"]


# ---------------------------------------------------------------------------- gc


def test_gc_keeps_pinned_last_and_recent_safety_snapshots(
    workspace: Path, home: Path, write
) -> None:
    store = ShadowStore.open(workspace, home=home)
    snaps = []
    for i in range(6):
        write(workspace, "f.txt", f"{i}\n" * 100)
        snaps.append(store.capture(label=f"s{i}"))
    store.pin(snaps[0].commit, "run-1")
    store.restore("s2")  # safety snapshot = s5's state, undo points at it
    # labelled=True: these captures are labelled, and labelled ones are kept unless asked.
    result = store.gc(keep_last=1, keep_safety=1, labelled=True)
    remaining = {s.commit for s in store.log()}
    assert snaps[0].commit in remaining  # pinned
    assert snaps[2].commit in remaining  # last restored
    assert snaps[5].commit in remaining  # undo target
    assert snaps[1].commit not in remaining and snaps[3].commit not in remaining
    assert set(result.dropped) >= {snaps[1].commit, snaps[3].commit}
    store.fsck()
    store.restore("s0")
    assert (workspace / "f.txt").read_text() == "0\n" * 100
    store.undo()
    assert (workspace / "f.txt").read_text() == "2\n" * 100


def test_gc_never_loses_objects_the_stat_cache_still_trusts(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a.txt", "a")
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    write(workspace, "b.txt", "only in the index, never snapshotted")
    store.diff("last")  # scans the workspace into the index without a snapshot
    store.gc(keep_last=1)
    snap = store.capture()
    assert "b.txt" in {e.path for e in store.files(snap.commit)}
    store.fsck()


# ---------------------------------------------------------------------------- locks and concurrency


DIE_HOLDING = """
import os, sys
from pathlib import Path
from treesearch.store import ShadowStore
s = ShadowStore.open(sys.argv[1], home=sys.argv[2], watch=False)
with s.lock():
    if sys.argv[3] == "capture":
        Path(sys.argv[1], "a").write_text("from the killed process")
        s.capture(label="killed")
    else:
        (s.path / "index.lock").write_text("left by a git killed with its parent")
    os.kill(os.getpid(), 9)
"""


def _die_holding_the_lock(workspace: Path, home: Path, what: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", DIE_HOLDING, str(workspace), str(home), what], check=False
    )
    assert proc.returncode == -9


def test_stale_index_lock_from_dead_process_is_reclaimed(
    workspace: Path, home: Path, write
) -> None:
    """A process killed holding the store's lock (and a git of its, which leaves ``index.lock``):
    the next holder finds its pid, not the clean release's mark, and reclaims git's lock."""
    write(workspace, "a", "1")
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    assert (store.path / "lock").read_bytes().startswith(b"free ")  # let go cleanly
    _die_holding_the_lock(workspace, home, "index.lock")
    assert (store.path / "index.lock").exists()
    write(workspace, "a", "2")
    snap = store.capture()
    assert snap.changed == ("a",)
    assert not (store.path / "index.lock").exists()


def test_a_holder_killed_after_changing_the_store_is_seen_by_the_next(
    workspace: Path, home: Path, write
) -> None:
    """This process's store knows the state it let go of; another process records a snapshot
    and dies holding the lock (no mark of a clean release): the next lock reads the state
    again and sees that snapshot."""
    write(workspace, "a", "1")
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    _die_holding_the_lock(workspace, home, "capture")
    assert store.resolve("last").label == "killed"
    assert [s.label for s in store.log()][:1] == ["killed"]
    assert store.restore(first.commit).written == ("a",)
    assert (workspace / "a").read_text() == "1"


def test_a_clean_release_by_another_process_names_a_new_state(
    workspace: Path, home: Path, write
) -> None:
    """Another process's capture lets go with the mark of the state it wrote: this process's
    store (which knew the previous one) reads it, and its caches follow."""
    write(workspace, "a", "1")
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    mark = (store.path / "lock").read_bytes()
    code = (
        "import sys; from pathlib import Path; from treesearch.store import ShadowStore\n"
        "s = ShadowStore.open(sys.argv[1], home=sys.argv[2])\n"
        "Path(sys.argv[1], 'a').write_text('2'); print(s.capture(label='other').commit)\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, str(workspace), str(home)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert (store.path / "lock").read_bytes() not in (mark, b"")
    assert store.resolve("last").commit == other.stdout.strip()
    assert store.capture().commit == other.stdout.strip()  # nothing changed since


def test_a_git_killed_under_the_lock_leaves_it_unmarked(workspace: Path, home: Path, write) -> None:
    """A git process of the store ended by a signal may leave its lock files: the store lets
    go of its lock without the mark of a clean release, so the next holder reclaims them."""
    write(workspace, "a", "1")
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    lock = store.path / "lock"
    assert lock.read_bytes().startswith(b"free ")
    with store.lock():
        assert lock.read_bytes().strip() == str(os.getpid()).encode()
        with pytest.raises(treesearch.store._git.GitFailed):
            store._git.run(["-c", "alias.die=!kill -9 $PPID", "die"])
        (store.path / "index.lock").write_text("left by the killed git")
    assert lock.read_bytes().strip() == str(os.getpid()).encode()  # no mark
    write(workspace, "a", "2")
    assert store.capture().changed == ("a",)
    assert not (store.path / "index.lock").exists()
    assert lock.read_bytes().startswith(b"free ")


HOLD_LOCK = """
import sys, time
import os
from treesearch.store import ShadowStore
WATCH = os.environ.get("TREESEARCH_WATCH") != "0"  # the parent test's watch_mode
s = ShadowStore.open(sys.argv[1], home=sys.argv[2], watch=WATCH)
with s.lock():
    print("locked", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def test_live_lock_is_waited_for_then_times_out_with_clear_error(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "a", "1")
    ShadowStore.open(workspace, home=home)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(workspace), str(home), "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        impatient = ShadowStore.open(workspace, home=home, lock_timeout=0.3)
        with pytest.raises(StoreLockedError, match=f"pid {holder.pid}"):
            impatient.capture()
        patient = ShadowStore.open(workspace, home=home, lock_timeout=30)
        t0 = time.monotonic()
        assert patient.capture().tree
        assert time.monotonic() - t0 > 0.5
    finally:
        holder.wait(timeout=30)
        if holder.stdout:
            holder.stdout.close()


WORKER = """
import sys, random, time
from pathlib import Path
from treesearch.errors import WorkspaceBusy
from treesearch.store import ShadowStore
ws, home, who = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(who)
s = ShadowStore.open(ws, home=home)
mine = []
for i in range(15):
    (ws / f"{who}.txt").write_text(f"{who} {i}\\n")
    mine.append(s.capture(label=f"{who}-{i}").commit)
    if i % 3 == 2:
        for _ in range(200):  # the other's restore holds the workspace: refused at once, by design
            try:
                s.restore(rng.choice(mine))
                break
            except WorkspaceBusy:
                time.sleep(0.05)
        else:
            raise SystemExit("the workspace stayed busy for 10 s")
print("ok")
"""


def test_two_processes_capturing_and_restoring_same_workspace(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, "shared.txt", "shared\n")
    ShadowStore.open(workspace, home=home).capture()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(workspace), str(home), who],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("p1", "p2")
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    store = ShadowStore.open(workspace, home=home)
    store.fsck()
    labels = {s.label for s in store.log()}
    assert {f"p1-{i}" for i in range(15)} <= labels and {f"p2-{i}" for i in range(15)} <= labels
    # The store's view and the disk agree.
    now = store.capture()
    assert store.diff(now.commit).empty


# ---------------------------------------------------------------------------- crash recovery


def test_open_completes_a_restore_interrupted_after_partial_writes(
    workspace: Path, home: Path, write
) -> None:
    for i in range(20):
        write(workspace, f"f{i}.txt", f"old {i}\n")
    store = ShadowStore.open(workspace, home=home)
    old = store.capture(label="old")
    for i in range(20):
        write(workspace, f"f{i}.txt", f"new {i}\n")
    write(workspace, "added.txt", "added")
    new = store.capture(label="new")
    target_digest = tree_digest(workspace)
    store.restore("old")
    # Forge the state of a restore to "new" killed half-way: journal written, some files done,
    # one temp file left behind.
    token = "deadbeef"
    journal = {
        "token": token,
        "target": new.commit,
        "safety": old.commit,
        "writes": [f"f{i}.txt" for i in range(20)] + ["added.txt"],
    }
    (store.path / "journal.json").write_text(json.dumps(journal))
    for i in range(7):
        write(workspace, f"f{i}.txt", f"new {i}\n")
    write(workspace, f".f7.txt.ts-{token}", "half-written")
    reopened = ShadowStore.open(workspace, home=home)
    assert reopened.recovered is not None and "completed" in reopened.recovered
    assert tree_digest(workspace) == target_digest
    assert not journal_pending(store.path / "journal.json")
    reopened.fsck()


KILL_CHILD = """
import sys
import os
from treesearch.store import ShadowStore
WATCH = os.environ.get("TREESEARCH_WATCH") != "0"  # the parent test's watch_mode
s = ShadowStore.open(sys.argv[1], home=sys.argv[2], watch=WATCH)
print("ready", flush=True)
sys.stdin.readline()
if sys.argv[3] == "restore":
    s.restore(sys.argv[4])
else:
    s.capture(label="killed")
print("done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("operation", ["restore", "capture"])
def test_sigkill_at_random_points_leaves_store_clean_and_workspace_whole(
    tmp_path: Path, operation: str, write, watch_mode: bool
) -> None:
    import random
    import signal

    rng = random.Random(1234)
    ws = tmp_path / "ws"
    home = tmp_path / "home"
    for i in range(400):
        write(ws, f"d{i % 20}/f{i}.txt", f"version A {i}\n" * (1 + i % 7))
    store = ShadowStore.open(ws, home=home)
    a = store.capture(label="A")
    digest_a = tree_digest(ws)
    for i in range(0, 400, 2):
        write(ws, f"d{i % 20}/f{i}.txt", f"version B {i}\n")
    for i in range(0, 400, 7):
        (ws / f"d{i % 20}/f{i}.txt").unlink(missing_ok=True)
    for i in range(100):
        write(ws, f"newdir{i % 5}/n{i}.txt", f"new {i}\n")
    b = store.capture(label="B")
    digest_b = tree_digest(ws)
    store.restore(a.commit)
    assert tree_digest(ws) == digest_a

    # Time one uninterrupted run so kill points spread over the whole operation.
    t0 = time.monotonic()
    store.restore(b.commit)
    span = time.monotonic() - t0
    store.restore(a.commit)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    outcomes = {"before": 0, "target": 0}
    trials = (50 if operation == "restore" else 30) if watch_mode else 8  # off: a small subset
    for _trial in range(trials):
        if operation == "capture":
            write(ws, "d0/f0.txt", f"capture trial {_trial}\n")
        before = tree_digest(ws)
        child = subprocess.Popen(
            [sys.executable, "-c", KILL_CHILD, str(ws), str(home), operation, b.commit],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0, span * 1.2))
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        child.stdin.close()
        reopened = ShadowStore.open(ws, home=home)
        reopened.fsck()
        now = tree_digest(ws)
        if operation == "capture":
            assert now == before
            assert reopened.capture().tree
        else:
            assert now in (digest_a, digest_b)
            outcomes["before" if now == digest_a else "target"] += 1
            if now == digest_b:
                reopened.restore(a.commit)
        assert not list(ws.rglob(".*.ts-*"))
    if operation == "restore":
        assert outcomes["before"] and outcomes["target"], outcomes


def test_errors_are_treesearch_errors() -> None:
    for cls in (
        CaptureError,
        RestoreError,
        RefError,
        StoreLocationError,
        StoreLockedError,
        MaterializeError,
    ):
        assert issubclass(cls, TreesearchError)


def test_store_environment_is_never_exported(workspace: Path, home: Path, write) -> None:
    write(workspace, "a", "1")
    before = dict(os.environ)
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    store.diff("last")
    assert dict(os.environ) == before
    # An agent's own git in the workspace still sees no repository of ours.
    proc = subprocess.run(
        ["git", "rev-parse", "--git-dir"],
        cwd=workspace,
        env=clean_git_env(GIT_CEILING_DIRECTORIES=str(workspace.parent)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0


# ---------------------------------------------------------------------------- the scan's caches


def test_rapid_same_size_edits_are_each_captured(workspace: Path, home: Path, write) -> None:
    """Regression: a stat cache must not trust a file modified within the timestamp tick."""
    write(workspace, "counter.txt", "0")
    store = ShadowStore.open(workspace, home=home)
    seen = set()
    for i in range(10):
        write(workspace, "counter.txt", str(i))  # same size every time
        snap = store.capture()
        assert (workspace / "counter.txt").read_text() == str(i)
        seen.add(snap.tree)
        assert {e.path: e.size for e in store.files(snap.commit)} == {"counter.txt": 1}
    assert len(seen) == 10
    copy_dir = workspace.parent / "check"
    store.materialize(snap.commit, copy_dir)
    assert (copy_dir / "counter.txt").read_text() == "9"


MTIME_KEEPING_EDIT = """
import os, sys
from pathlib import Path
import os
from treesearch.store import ShadowStore
WATCH = os.environ.get("TREESEARCH_WATCH") != "0"  # the parent test's watch_mode
s = ShadowStore.open(sys.argv[1], home=sys.argv[2], watch=WATCH)
snap = s.capture()
s.materialize(snap.commit, sys.argv[3])
"""


@pytest.mark.parametrize("age", ["an old file", "a file just written"])
@pytest.mark.parametrize("capturer", ["same store", "fresh process"])
def test_capture_sees_a_same_size_edit_that_put_the_old_mtime_back(
    tmp_path: Path, workspace: Path, home: Path, capturer: str, age: str
) -> None:
    """Regression (#11): a same-size rewrite whose old mtime is put back (``cp -p``, ``rsync -a``,
    ``tar x``) in the same second as the recorded ctime was never captured, and a later restore
    destroyed it: git compares whole seconds, and the scan judged raciness by the mtime only."""
    f = workspace / "a.txt"
    f.write_text("v00\n")
    if age == "an old file":
        os.utime(f, ns=(1_600_000_000_000_000_000, 1_600_000_000_123_456_789))
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    same_second = 0
    for i in range(1, 30):
        before = f.stat()
        f.write_text(f"v{i:02d}\n")  # same size, in place (same inode)
        os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = f.stat()
        if after.st_ctime_ns // 10**9 == before.st_ctime_ns // 10**9:
            same_second += 1  # the case git's own whole-second compare cannot tell apart
        copy = tmp_path / f"copy{i}"
        if capturer == "fresh process":
            store.close()
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
            subprocess.run(
                [sys.executable, "-c", MTIME_KEEPING_EDIT, str(workspace), str(home), str(copy)],
                check=True,
                env=env,
            )
            store = ShadowStore.open(workspace, home=home)
        else:
            store.materialize(store.capture().commit, copy)
        assert (copy / "a.txt").read_text() == f"v{i:02d}\n", f"edit {i} was not captured"
        if same_second >= 3:
            break
    assert same_second >= 3
    # A restore (with its undo) must not destroy the edit.
    store.restore(first.commit)
    assert f.read_text() == "v00\n"
    store.undo()
    assert f.read_text() == f"v{i:02d}\n"


def test_new_ignored_files_and_new_ignore_rules_are_noticed(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, ".gitignore", "*.log\n")
    write(workspace, "src/a.py", "a")
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    write(workspace, "src/debug.log", "ignored")
    names = {e.path for e in store.files(store.capture(label="x").commit)}
    assert "src/debug.log" not in names
    write(workspace, "src/b.tmp", "captured until the rule comes")
    assert "src/b.tmp" in {e.path for e in store.files(store.capture(label="y").commit)}
    write(workspace, ".gitignore", "*.log\n*.tmp\n")
    names = {e.path for e in store.files(store.capture(label="z").commit)}
    assert "src/b.tmp" not in names and "src/a.py" in names


def test_capture_with_nothing_changed_runs_no_git_process(
    workspace: Path, home: Path, write
) -> None:
    for i in range(30):
        write(workspace, f"d{i % 3}/f{i}.txt", str(i))
    store = ShadowStore.open(workspace, home=home)
    first = store.capture()
    time.sleep(1.1)  # past the racy window
    store.capture()
    calls: list[list[str]] = []
    original = store._git.run

    def counting(args, **kw):  # observe (not replace) the real git runner
        calls.append(list(args))
        return original(args, **kw)

    store._git.run = counting  # type: ignore[method-assign]
    again = store.capture()
    assert again.tree == first.tree and calls == []


def test_a_new_process_compares_the_index_to_the_nanosecond_and_hashes_nothing_unchanged(
    workspace: Path, home: Path
) -> None:
    """A new process reads the index's stat data (``ls-files --debug``) and compares them itself,
    odd names included: with nothing changed, nothing is handed to git to hash."""
    names = [b"-dash", b"new\nline", b"tab\there", b"\xff\xfe not utf-8", b"  flags: 0"]
    for n in names:
        (workspace / os.fsdecode(n)).write_bytes(b"content of " + n)
    os.symlink("target", workspace / "link")
    first = ShadowStore.open(workspace, home=home).capture()
    time.sleep(0.1)  # past the racy window (fine timestamps) of the scan that recorded them
    store = ShadowStore.open(workspace, home=home)
    calls: list[list[str]] = []
    original = store._git.run

    def counting(args, **kw):  # observe (not replace) the real git runner
        calls.append(list(args))
        return original(args, **kw)

    store._git.run = counting  # type: ignore[method-assign]
    again = store.capture()
    assert again.commit == first.commit
    assert not [c for c in calls if "update-index" in c], calls


def test_an_entry_is_racy_by_its_ctime_too() -> None:
    """An mtime put back to an old value does not make an entry safe: a later edit in the same
    timestamp tick as its ctime could leave every stat field as it was."""
    from treesearch.store._stat import racy_key

    now = 1_700_000_000_000_000_000
    old = now - 86_400 * 10**9
    assert racy_key((old + 123_456, now - 1_000_001, 4, 7, 0o100644), now)
    assert not racy_key((old + 123_456, now - 900_000_001, 4, 7, 0o100644), now)
    assert racy_key((now, old, 4, 7, 0o100644), now)  # an mtime set into the future


def test_new_ignored_file_in_a_new_folder_is_classified_without_full_relisting(
    workspace: Path, home: Path, write
) -> None:
    write(workspace, ".gitignore", "*.log\ncache/\n")
    write(workspace, "src/a.py", "a")
    store = ShadowStore.open(workspace, home=home)
    store.capture()
    write(workspace, "src/new/deep/trace.log", "ignored")
    write(workspace, "src/new/deep/mod.py", "kept")
    write(workspace, "cache/blob.bin", "ignored folder")
    write(workspace, "notes.txt", "kept")
    names = {e.path for e in store.files(store.capture(label="after").commit)}
    assert names == {".gitignore", "src/a.py", "src/new/deep/mod.py", "notes.txt"}


def test_diffs_of_several_pairs_match_diff_of_each(workspace: Path, home: Path, write) -> None:
    write(workspace, "a.txt", "one\ntwo\n")
    write(workspace, "odd name\nwith newline", "x\n")
    store = ShadowStore.open(workspace, home=home)
    s1 = store.capture()
    write(workspace, "a.txt", "one\n2\nthree\n")
    (workspace / "odd name\nwith newline").unlink()
    write(workspace, "bin.dat", "\0\1\2")
    s2 = store.capture()
    write(workspace, "c d.txt", "new\n")
    s3 = store.capture()
    pairs = [(s1.tree, s2.tree), (s1.commit, s3.tree), (s3.tree, s1.tree), (s2.tree, s2.tree)]
    got = store.diffs(pairs)
    for (a, b), d in zip(pairs, got, strict=True):
        want = store.diff(a, b, max_patch_bytes=0)
        assert d.files == want.files and (d.a, d.b) == (want.a, want.b)
    assert got[0].files and not got[3].files
    assert {f.path for f in got[1].files} == {
        "a.txt",
        "odd name\nwith newline",
        "bin.dat",
        "c d.txt",
    }
