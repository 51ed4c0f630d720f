"""Tests of ``treesearch.sandbox``: real processes, real files, no mocks."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from treesearch.errors import PathEscapeError, SandboxError, ToolError
from treesearch.sandbox import (
    Limits,
    list_dir,
    read_file,
    replace_in_file,
    resolve_in_workspace,
    run,
    write_file,
)

PY = sys.executable


# --- helpers --------------------------------------------------------------------------------------


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (``Z`` for a zombie), or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as gone (our init may be slow to reap orphans)."""
    if os.path.isdir("/proc"):
        state = _state(pid)
        return state is not None and state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process belongs to process group ``pgid``."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _eventually(condition: Callable[[], bool], seconds: float = 3.0) -> bool:
    """Poll ``condition()`` until true or ``seconds`` pass (SIGKILL takes effect asynchronously)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


def _read_pid(path: Path) -> int:
    return int(path.read_text().split()[0])


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a test started indirectly; killed afterwards so a failing test leaks nothing."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder next to an ``outside`` folder holding a secret."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    return workspace


# --- run: exit codes, inputs, environment ---------------------------------------------------------


def test_run_shell_string_reports_exit_code_and_both_streams(tmp_path: Path) -> None:
    result = run("echo out; echo err >&2; exit 3", tmp_path, timeout=10)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.timed_out and not result.ok


def test_run_argv_runs_without_a_shell(tmp_path: Path) -> None:
    result = run(["echo", "$HOME", "a b"], tmp_path, timeout=10)
    assert result.ok and result.stdout == "$HOME a b\n"


def test_run_in_cwd_runs_there(tmp_path: Path) -> None:
    assert run(["pwd", "-P"], tmp_path, timeout=10).stdout == f"{tmp_path.resolve()}\n"


def test_run_killed_by_signal_gives_negative_exit_code(tmp_path: Path) -> None:
    result = run(["sh", "-c", "kill -TERM $$"], tmp_path, timeout=10)
    assert result.exit_code == -signal.SIGTERM and not result.timed_out


def test_run_missing_program_returns_result_without_exit_code(tmp_path: Path) -> None:
    result = run(["no-such-program-xyz"], tmp_path, timeout=10)
    assert result.exit_code is None and not result.ok
    assert "no-such-program-xyz" in result.stderr and "No such file" in result.stderr


def test_run_missing_cwd_raises_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="does not exist"):
        run(["true"], tmp_path / "missing", timeout=10)


def test_run_nonpositive_timeout_raises_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="timeout"):
        run(["true"], tmp_path, timeout=0)


def test_run_stdin_text_and_bytes_reach_the_command(tmp_path: Path) -> None:
    assert run(["cat"], tmp_path, timeout=10, stdin="héllo\n").stdout == "héllo\n"
    assert run(["cat"], tmp_path, timeout=10, stdin=b"\x00raw").stdout == "\x00raw"


def test_run_large_stdin_while_output_flows_does_not_deadlock(tmp_path: Path) -> None:
    data = b"y" * 4_000_000  # far beyond both pipe buffers
    result = run(["cat"], tmp_path, timeout=20, stdin=data, output_limit=1000)
    assert result.ok
    assert result.stdout_dropped == len(data) - 1000


def test_run_without_stdin_does_not_inherit_callers_stdin(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"leaked from the caller")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)  # pytest already puts /dev/null on fd 0; give it something to leak
    try:
        result = run(["cat"], tmp_path, timeout=5)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert result.ok and result.stdout == ""


def test_run_env_replaces_environment_wholesale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TREESEARCH_PROBE", "inherited")
    result = run(["/usr/bin/env"], tmp_path, timeout=10, env={"ONLY": "1"})
    assert result.stdout == "ONLY=1\n"


def test_run_env_none_inherits_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TREESEARCH_PROBE", "inherited")
    assert run('echo "$TREESEARCH_PROBE"', tmp_path, timeout=10).stdout == "inherited\n"


def test_run_invalid_utf8_output_is_replaced(tmp_path: Path) -> None:
    assert run(["printf", "a\\377b"], tmp_path, timeout=10).stdout == "a\ufffdb"


def test_run_seconds_measures_wall_time(tmp_path: Path) -> None:
    # Bounds that cannot flake: the sleep itself below, the caller's own clock above.
    before = time.monotonic()
    result = run(["sleep", "0.3"], tmp_path, timeout=10)
    around = time.monotonic() - before
    assert 0.3 <= result.seconds <= around


# --- run: timeouts and process groups -------------------------------------------------------------


def test_run_timeout_kills_whole_group_including_sleeping_grandchild(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pids, after = tmp_path / "pids", tmp_path / "after-sleep"
    # The shell would leave ``after-sleep`` had its sleep run to its end: run() returning
    # without it shows the group was ended before the sleep was, not after.
    cmd = f"sleep 1000 & echo $$ $! > {pids}; sleep 60; touch {after}"
    result = run(cmd, tmp_path, timeout=0.5)
    pgid, grandchild = (int(word) for word in pids.read_text().split())
    leftovers.append(grandchild)
    assert result.timed_out and not result.ok
    assert result.exit_code == -signal.SIGTERM
    assert _eventually(lambda: not _alive(grandchild))
    assert _eventually(lambda: not _group_alive(pgid))
    assert not after.exists()  # and, the group being gone, never will


def test_run_timeout_sigkills_group_that_ignores_sigterm(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pids = tmp_path / "pids"
    # The ignored SIGTERM is inherited by the background sleep: neither process obeys it.
    cmd = f"trap '' TERM; sleep 1000 & echo $$ $! > {pids}; wait"
    result = run(cmd, tmp_path, timeout=0.3, kill_grace=0.5)
    pgid, grandchild = (int(word) for word in pids.read_text().split())
    leftovers.append(grandchild)
    assert result.timed_out
    assert result.exit_code == -signal.SIGKILL
    assert result.seconds >= 0.3 + 0.5  # the grace was granted before SIGKILL
    assert _eventually(lambda: not _alive(grandchild))
    assert _eventually(lambda: not _group_alive(pgid))


def test_run_timeout_grandchild_ignoring_sigterm_is_sigkilled_after_grace(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pid_file = tmp_path / "pid"
    cmd = f"(trap '' TERM; exec sleep 1000) & echo $! > {pid_file}; sleep 1000"
    result = run(cmd, tmp_path, timeout=0.3, kill_grace=0.5)
    grandchild = _read_pid(pid_file)
    leftovers.append(grandchild)
    assert result.timed_out and result.exit_code == -signal.SIGTERM
    assert result.seconds >= 0.3 + 0.5  # the survivor held the grace to its end
    assert _eventually(lambda: not _alive(grandchild))


def test_run_timeout_lets_grandchild_clean_up_on_sigterm_and_ends_grace_early(
    tmp_path: Path, leftovers: list[int]
) -> None:
    ready, cleaned = tmp_path / "ready", tmp_path / "cleaned"
    grandchild = textwrap.dedent(
        f"""
        import os, pathlib, signal, sys, time
        def cleanup(signum, frame):
            time.sleep(0.3)
            pathlib.Path({str(cleaned)!r}).write_text("done")
            sys.exit(0)
        signal.signal(signal.SIGTERM, cleanup)
        pathlib.Path({str(ready)!r}).write_text(str(os.getpid()))
        time.sleep(1000)
        """
    )
    script = tmp_path / "grandchild.py"
    script.write_text(grandchild)
    cmd = f"{PY} {script} & while [ ! -s {ready} ]; do sleep 0.01; done; sleep 1000"
    grace = 600.0
    results: list = []
    runner = threading.Thread(
        target=lambda: results.append(run(cmd, tmp_path, timeout=1.0, kill_grace=grace)),
        daemon=True,
    )
    runner.start()
    # Not a speed figure: the claim is that run() returns before its grace is over, and the
    # grace is 10 minutes against the fraction of a second the clean-up takes.
    runner.join(grace)
    assert results, "run() sat out its kill grace although the group was gone"
    result = results[0]
    leftovers.append(_read_pid(ready))
    assert result.timed_out
    assert cleaned.read_text() == "done"  # SIGTERM reached the grandchild, SIGKILL waited


def test_run_normal_exit_kills_background_leftovers_holding_stdout(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pid_file = tmp_path / "pid"
    result = run(f"sleep 1000 & echo $! > {pid_file}; echo done", tmp_path, timeout=10)
    grandchild = _read_pid(pid_file)
    leftovers.append(grandchild)
    # Had the leftover kept stdout open, run() would have waited for it until its timeout.
    assert result.ok and not result.timed_out and result.stdout == "done\n"
    assert _eventually(lambda: not _alive(grandchild))


def test_run_normal_exit_bounds_wait_for_escaped_daemon_holding_stdout(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pid_file, daemon_done = tmp_path / "pid", tmp_path / "daemon-done"
    daemon = f"import os, time; os.setsid(); open({str(pid_file)!r}, 'w').write(str(os.getpid()))"
    # The daemon holds stdout open for 60 s, then leaves ``daemon-done`` and closes it.
    cmd = f"""{PY} -c "{daemon}; time.sleep(60); open({str(daemon_done)!r}, 'w')" &
    while [ ! -s {pid_file} ]; do sleep 0.01; done; echo done"""
    result = run(cmd, tmp_path, timeout=300)
    leftovers.append(_read_pid(pid_file))
    assert result.ok and not result.timed_out and result.stdout == "done\n"
    assert not daemon_done.exists()  # run() returned before the daemon let go of stdout


# --- run: output limits ---------------------------------------------------------------------------


def test_run_output_keeps_head_and_tail_and_counts_dropped_bytes(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.write('HEAD' + 'x' * 100000 + 'TAIL')"
    result = run([PY, "-c", script], tmp_path, timeout=10, output_limit=100)
    assert result.stdout.startswith("HEAD" + "x" * 46 + "\n[... ")
    assert result.stdout.endswith("\n" + "x" * 46 + "TAIL")
    assert result.stdout_dropped == 100008 - 100
    assert f"\n[... {100008 - 100} bytes dropped ...]\n" in result.stdout
    assert result.stderr_dropped == 0


def test_run_output_within_limit_is_kept_whole(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.write('a' * 100); sys.stderr.write('b' * 101)"
    result = run([PY, "-c", script], tmp_path, timeout=10, output_limit=100)
    assert result.stdout == "a" * 100 and result.stdout_dropped == 0
    assert (
        result.stderr_dropped == 1
        and result.stderr == "b" * 50 + "\n[... 1 bytes dropped ...]\n" + "b" * 50
    )


def test_run_one_gigabyte_of_output_costs_bounded_memory(tmp_path: Path) -> None:
    # A fresh interpreter, so that the peak RSS is not hidden by what earlier tests allocated.
    probe = textwrap.dedent(
        """
        import resource, sys
        from treesearch.sandbox import run
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = run(["head", "-c", "1000000000", "/dev/zero"], ".", timeout=120)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        scale = 1 if sys.platform == "darwin" else 1024
        print((after - before) * scale, r.stdout_dropped, len(r.stdout), r.exit_code)
        """
    )
    done = subprocess.run([PY, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    growth, dropped, length, exit_code = (int(word) for word in done.stdout.split())
    assert growth < 50 * 1024 * 1024
    assert exit_code == 0
    assert dropped == 1_000_000_000 - 64 * 1024
    assert length == 64 * 1024 + len(f"\n[... {dropped} bytes dropped ...]\n")


# --- run: resource limits -------------------------------------------------------------------------


def test_run_memory_limit_makes_big_allocation_fail(tmp_path: Path) -> None:
    limits = Limits(memory_bytes=256 * 1024 * 1024)
    result = run([PY, "-c", "bytearray(512 * 1024 * 1024)"], tmp_path, timeout=20, limits=limits)
    assert result.exit_code == 1 and "MemoryError" in result.stderr


def test_run_file_size_limit_stops_file_growth(tmp_path: Path) -> None:
    result = run(
        "head -c 2000000 /dev/zero > big",
        tmp_path,
        timeout=10,
        limits=Limits(file_size_bytes=1_000_000),
    )
    assert not result.ok
    assert (tmp_path / "big").stat().st_size == 1_000_000


def test_run_cpu_limit_stops_busy_loop(tmp_path: Path) -> None:
    result = run(
        ["sh", "-c", "while :; do :; done"], tmp_path, timeout=20, limits=Limits(cpu_seconds=1)
    )
    assert result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL)
    assert not result.timed_out  # the CPU limit ended it, long before the 20 s timeout


def test_run_open_files_limit_refuses_more_descriptors(tmp_path: Path) -> None:
    script = "import os\nfor _ in range(100): os.open('/dev/null', os.O_RDONLY)"
    result = run([PY, "-c", script], tmp_path, timeout=10, limits=Limits(open_files=16))
    assert result.exit_code == 1 and "Too many open files" in result.stderr


def test_limits_negative_value_raises_sandbox_error() -> None:
    with pytest.raises(SandboxError, match="cpu_seconds"):
        Limits(cpu_seconds=-1)


# --- file tools: path guard -----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside/secret.txt", "a/../../outside/secret.txt", "a/../b"])
def test_read_file_dotdot_component_is_refused(ws: Path, path: str) -> None:
    with pytest.raises(PathEscapeError, match="relative to the workspace") as info:
        read_file(ws, path)
    assert path in str(info.value)


def test_read_file_absolute_path_is_refused(ws: Path) -> None:
    secret = str(ws.parent / "outside" / "secret.txt")
    with pytest.raises(PathEscapeError, match="relative to the workspace") as info:
        read_file(ws, secret)
    assert secret in str(info.value)


def test_file_tools_symlinked_file_to_outside_are_refused(ws: Path) -> None:
    outside = ws.parent / "outside"
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PathEscapeError, match="link.txt"):
        read_file(ws, "link.txt")
    with pytest.raises(PathEscapeError):
        write_file(ws, "link.txt", "pwned\n")
    with pytest.raises(PathEscapeError):
        replace_in_file(ws, "link.txt", "secret", "pwned")
    assert (outside / "secret.txt").read_text() == "secret\n"


def test_file_tools_symlinked_folder_to_outside_are_refused(ws: Path) -> None:
    outside = ws.parent / "outside"
    (ws / "out").symlink_to(outside)
    with pytest.raises(PathEscapeError):
        read_file(ws, "out/secret.txt")
    with pytest.raises(PathEscapeError):
        list_dir(ws, "out")
    with pytest.raises(PathEscapeError):
        write_file(ws, "out/new/planted.txt", "x")
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_read_file_relative_symlink_climbing_out_is_refused(ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "up").symlink_to("../../outside")
    with pytest.raises(PathEscapeError):
        read_file(ws, "sub/up/secret.txt")


def test_read_file_symlink_chain_through_outside_is_refused(ws: Path) -> None:
    (ws / "inside.txt").write_text("inside\n")
    hop = ws.parent / "outside" / "hop"
    hop.symlink_to(ws / "inside.txt")
    (ws / "chain").symlink_to(hop)
    with pytest.raises(PathEscapeError):
        read_file(ws, "chain")


def test_read_file_symlink_inside_workspace_is_followed(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("A\n")
    (ws / "alias").symlink_to("src")
    (ws / "abs_alias").symlink_to(ws / "src" / "a.py")
    assert read_file(ws, "alias/a.py") == "A\n"
    assert read_file(ws, "abs_alias") == "A\n"
    assert resolve_in_workspace(ws, "alias/a.py") == (ws / "src" / "a.py").resolve()


def test_write_file_through_symlink_inside_workspace_is_refused(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("A\n")
    (ws / "alias").symlink_to("src")
    (ws / "a_link.py").symlink_to("src/a.py")
    with pytest.raises(ToolError, match="symlink"):
        write_file(ws, "alias/a.py", "B\n")
    with pytest.raises(ToolError, match="symlink"):
        replace_in_file(ws, "a_link.py", "A", "B")
    assert (ws / "src" / "a.py").read_text() == "A\n"
    assert (ws / "a_link.py").is_symlink()


@pytest.mark.parametrize("path", [".git/config", "sub/.git/HEAD", ".GIT/config", ".git"])
def test_file_tools_paths_inside_git_folder_are_refused(ws: Path, path: str) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "sub" / ".git").mkdir(parents=True)
    (ws / "sub" / ".git" / "HEAD").write_text("ref\n")
    with pytest.raises(PathEscapeError, match=r"\.git"):
        read_file(ws, path)
    with pytest.raises(PathEscapeError, match=r"\.git"):
        write_file(ws, path + "/x" if path == ".git" else path, "x")
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert sorted(os.listdir(ws / ".git")) == ["config"]


def test_file_tools_symlink_into_git_folder_is_refused(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "meta").symlink_to(".git")
    with pytest.raises(PathEscapeError, match=r"\.git"):
        read_file(ws, "meta/config")
    with pytest.raises(PathEscapeError, match=r"\.git"):
        list_dir(ws, "meta")


def test_list_dir_git_folder_contents_are_refused(ws: Path) -> None:
    (ws / ".git").mkdir()
    with pytest.raises(PathEscapeError):
        list_dir(ws, ".git")


# --- file tools: operations -----------------------------------------------------------------------


def test_read_file_missing_file_raises_tool_error_naming_path(ws: Path) -> None:
    with pytest.raises(ToolError, match="src/missing.py"):
        read_file(ws, "src/missing.py")


def test_read_file_folder_raises_tool_error(ws: Path) -> None:
    (ws / "src").mkdir()
    with pytest.raises(ToolError, match="folder"):
        read_file(ws, "src")


def test_read_file_over_max_bytes_raises_tool_error_with_size(ws: Path) -> None:
    (ws / "big.txt").write_bytes(b"x" * 2000)
    assert read_file(ws, "big.txt", max_bytes=2000) == "x" * 2000
    with pytest.raises(ToolError, match="2000 bytes"):
        read_file(ws, "big.txt", max_bytes=1999)


def test_read_file_fifo_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            read_file(ws, "pipe")
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=attempt)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked in open(): release it, then fail
        os.close(os.open(ws / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
        pytest.fail("read_file blocked on a FIFO")
    assert len(errors) == 1 and isinstance(errors[0], ToolError)
    assert "not a regular file" in str(errors[0])


def test_read_file_invalid_utf8_is_replaced(ws: Path) -> None:
    (ws / "bin").write_bytes(b"a\xffb")
    assert read_file(ws, "bin") == "a\ufffdb"


def test_write_file_creates_missing_parent_folders(ws: Path) -> None:
    write_file(ws, "a/b/c.txt", "hello\n")
    assert (ws / "a" / "b" / "c.txt").read_text() == "hello\n"


def test_write_file_new_file_gets_umask_default_mode(ws: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_file(ws, "new.txt", "x")
    finally:
        os.umask(umask)
    assert stat.S_IMODE((ws / "new.txt").stat().st_mode) == 0o644


def test_write_file_replaces_atomically_by_rename(ws: Path) -> None:
    target = ws / "f.txt"
    target.write_text("old\n")
    os.link(target, ws.parent / "old-reader")  # a reader holding the old inode
    write_file(ws, "f.txt", "new\n")
    assert target.read_text() == "new\n"
    assert (ws.parent / "old-reader").read_text() == "old\n"  # not truncated in place
    assert sorted(os.listdir(ws)) == ["f.txt"]  # no temp file left behind


def test_write_file_failure_leaves_original_untouched(ws: Path) -> None:
    (ws / "f.txt").write_text("old\n")
    with pytest.raises(ToolError):
        write_file(ws, "f.txt", "bad \ud800 surrogate")
    assert (ws / "f.txt").read_text() == "old\n"
    assert sorted(os.listdir(ws)) == ["f.txt"]


def test_write_file_keeps_existing_permission_bits(ws: Path) -> None:
    target = ws / "run.sh"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o751)
    write_file(ws, "run.sh", "#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o751


def test_write_file_onto_folder_raises_tool_error(ws: Path) -> None:
    (ws / "src").mkdir()
    with pytest.raises(ToolError, match="folder"):
        write_file(ws, "src", "x")


def test_write_file_under_a_file_raises_tool_error(ws: Path) -> None:
    (ws / "a.txt").write_text("a")
    with pytest.raises(ToolError, match=r"a\.txt/b\.txt"):
        write_file(ws, "a.txt/b.txt", "x")


def test_replace_in_file_single_match_is_replaced(ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\ny = 2\n")
    replace_in_file(ws, "a.py", "y = 2", "y = 3")
    assert (ws / "a.py").read_text() == "x = 1\ny = 3\n"


def test_replace_in_file_no_match_raises_and_leaves_file(ws: Path) -> None:
    (ws / "a.py").write_text("x = 1\n")
    with pytest.raises(ToolError, match=r"found 0 matches of the text in a\.py"):
        replace_in_file(ws, "a.py", "x  = 1", "x = 2")
    assert (ws / "a.py").read_text() == "x = 1\n"


def test_replace_in_file_two_matches_raises_with_count(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(
        ToolError, match=r"found 2 matches of the text in src/a\.py; give more context"
    ):
        replace_in_file(ws, "src/a.py", "x = 1", "x = 2")
    assert (ws / "src" / "a.py").read_text() == "x = 1\nx = 1\n"


def test_replace_in_file_overlapping_matches_count_as_several(ws: Path) -> None:
    (ws / "a.txt").write_text("aaa")
    with pytest.raises(ToolError, match="found 2 matches"):
        replace_in_file(ws, "a.txt", "aa", "b")


def test_replace_in_file_keeps_undecodable_bytes_and_mode(ws: Path) -> None:
    target = ws / "latin1.txt"
    target.write_bytes(b"caf\xe9\r\nold\r\n")
    target.chmod(0o600)
    replace_in_file(ws, "latin1.txt", "old", "new")
    assert target.read_bytes() == b"caf\xe9\r\nnew\r\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_replace_in_file_missing_file_raises_tool_error_naming_path(ws: Path) -> None:
    with pytest.raises(ToolError, match="nope.py"):
        replace_in_file(ws, "nope.py", "a", "b")


def test_list_dir_sorts_names_and_marks_folders(ws: Path) -> None:
    (ws / "b.txt").write_text("")
    (ws / ".hidden").write_text("")
    (ws / "src").mkdir()
    (ws / "src" / "inner.py").write_text("")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("")
    (ws / "alias").symlink_to("src")
    assert list_dir(ws) == [".git/", ".hidden", "alias", "b.txt", "src/"]
    assert list_dir(ws, "src") == ["inner.py"]
    assert list_dir(ws, "alias") == ["inner.py"]


def test_list_dir_missing_folder_or_file_raises_tool_error(ws: Path) -> None:
    (ws / "f.txt").write_text("")
    with pytest.raises(ToolError, match="nothere"):
        list_dir(ws, "nothere")
    with pytest.raises(ToolError, match="f.txt is a file"):
        list_dir(ws, "f.txt")


def test_resolve_in_workspace_returns_path_inside_real_root(ws: Path) -> None:
    assert resolve_in_workspace(ws, "new/file.txt") == ws.resolve() / "new" / "file.txt"
    assert resolve_in_workspace(ws, ".") == ws.resolve()
