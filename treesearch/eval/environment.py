"""Per-instance environments: set-up commands run once per environment key into a cached venv.

The key is SWE-bench's (repo, version, environment_setup_commit) plus the commands themselves and
the interpreter. Set-up runs in a virtual environment created with ``--system-site-packages`` (so
the running interpreter's test tools stay visible), in a copy of the repository at the
environment commit kept next to it, with its own timeout and log. A failed set-up is recorded
(``failed`` + the log) and every instance of that key becomes an ``error`` row. Instances without
set-up commands use the running interpreter as is.

Where the ``swebench`` package is installed, its per-repo/version specs (install steps, test
command) and its log parsers are used for instances of the repositories it knows (see
``swebench_specs``, ``swebench_parser``). The driver looks the specs up once for the whole batch
(``look_up``) and hands each worker its instance's answer, so that a worker imports swebench only
for an instance that uses it (the package pulls in pandas, datasets and docker: about a second
of start-up and 150 MB in every worker, which also makes each fork of a worker slower).

Where set-up comes from (``env_spec_for``): the instance's own ``pre_install``/``install``
fields, else the user's set-up table (``setup_table``: packages, commands, ``.pth`` shims, test
command and variables per repository and version), else the swebench spec, else none. The test
command and variables come from the table, else from the swebench spec, whoever gave the set-up.

The tree under test is what the tests import. Set-up runs in a copy of the repository at the
environment commit (``home/src``): an editable install made there (``pip install -e .``) would
make every later test import that copy. After set-up, the editable installs that point into the
copy are undone (``repoint_editables``: their path lines, their finders' mappings, legacy
egg-links; their metadata stays, as entry points are read from it) and
``_treesearch_tree_under_test.pth`` puts the folders they pointed at (``.``, ``src``, ...), and
``src`` wherever the current folder has one, resolved against the *current folder* at
interpreter start, first on ``sys.path``: test runs start in the copy under test (a search's
worker folder, a grading copy), so no absolute path is written. A non-editable install of the
project cannot be repointed; ``check_tree_imports`` runs in a tree with the tests' variables
and says which of the tree's packages would be imported from elsewhere.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import site
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from treesearch import sandbox
from treesearch._environ import inherited
from treesearch.eval.instances import Instance
from treesearch.eval.setup_table import SetupEntry, SetupTable

__all__ = [
    "EnvResult",
    "EnvSpec",
    "ImportCheck",
    "Known",
    "Repointed",
    "check_tree_imports",
    "env_spec_for",
    "look_up",
    "prepare_env",
    "repoint_editables",
    "swebench_parser",
    "tree_packages",
]

_KEY_FORMAT = 2
"""Part of every environment key: bump it when what a build makes changes (2: editable installs
repointed at the tree under test, packages and shims), so that older venvs are not reused."""

PARENT_PTH = "_treesearch_parent.pth"
SHIMS_PTH = "_treesearch_shims.pth"
TREE_PTH = "_treesearch_tree_under_test.pth"
_REPLACED = ".treesearch-replaced"
"""Suffix of a file set aside by ``repoint_editables`` (kept to show what was there)."""


@dataclass(frozen=True)
class EnvSpec:
    """What an instance's environment needs."""

    repo: str
    version: str
    setup_commit: str | None
    pre_install: tuple[str, ...]
    install: tuple[str, ...]
    source: str
    """``instance`` (its own fields), ``table`` (the set-up table), ``swebench`` (the package's
    specs) or ``none``."""
    packages: tuple[str, ...] = ()
    """Requirements installed with ``python -m pip install`` after ``pre_install``."""
    shims: tuple[str, ...] = ()
    """Lines of a ``.pth`` file in the venv (written before the set-up commands run)."""
    test_cmd: str | None = None
    """The grade command (test files get appended): the table's, else the swebench spec's.
    Not part of the key."""
    test_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Variables of the test runs (the table's ``env``). Not part of the key: they do not
    change the venv."""

    @property
    def needed(self) -> bool:
        return bool(self.pre_install or self.install or self.packages or self.shims)

    def key(self) -> str:
        blob = json.dumps(
            [
                _KEY_FORMAT,
                self.repo,
                self.version,
                self.setup_commit,
                self.pre_install,
                self.packages,
                self.install,
                self.shims,
                sys.executable,
            ]
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class EnvResult:
    """A ready environment (``env`` holds the variables test runs need) or why there is none."""

    env: Mapping[str, str]
    log: Path | None
    error: str | None = None
    reused: bool = False


@dataclass(frozen=True)
class Known:
    """What the driver looked up for one instance before it is sent to a worker."""

    swebench_spec: dict[str, Any] | None
    """SWE-bench's spec for the instance's (repo, version); ``None`` when the installed
    swebench has none, or swebench is not installed."""
    setup_entry: SetupEntry | None = None
    """The set-up table's entry for the instance's (repo, version), if a table was given."""


def look_up(items: Iterable[Instance], table: SetupTable | None = None) -> dict[str, Known]:
    """``Known`` of each instance, by ``instance_id`` (imports swebench once, here)."""
    return {
        i.instance_id: Known(
            swebench_specs(i.repo, i.version) if i.repo else None,
            table.entry(i.repo, i.version) if table is not None and i.repo else None,
        )
        for i in items
    }


_SPECS: list[Mapping[str, Any] | None] = []


_CONSTANTS: list[str] = []


def _constants_text() -> str:
    """The text of the installed swebench's ``harness/constants`` files ("" without swebench),
    read once per process without importing the package."""
    if not _CONSTANTS:
        found = importlib.util.find_spec("swebench")  # a top-level name: nothing is imported
        parts: list[str] = []
        for folder in (found.submodule_search_locations or []) if found else []:
            constants = Path(folder) / "harness" / "constants"
            for file in sorted(constants.glob("*.py")) or [constants.with_suffix(".py")]:
                with contextlib.suppress(OSError):
                    parts.append(file.read_text(encoding="utf-8"))
        _CONSTANTS.append("\n".join(parts))
    return _CONSTANTS[0]


def _may_have_specs(repo: str) -> bool:
    """Can the installed swebench hold a spec of ``repo``? Its releases 5.x and later have no
    ``MAP_REPO_VERSION_TO_SPECS`` anywhere in ``swebench/harness/constants``, and a repository
    it knows is named there as a string: importing the package (two to five seconds: pandas,
    datasets, docker) to find out that it has no spec would be for nothing."""
    text = _constants_text()
    return "MAP_REPO_VERSION_TO_SPECS" in text and (f'"{repo}"' in text or f"'{repo}'" in text)


def _swebench_spec_map() -> Mapping[str, Any] | None:
    # Imported once per process (the package takes seconds to import).
    if not _SPECS:
        try:
            from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS  # type: ignore
        except Exception:  # noqa: BLE001 - not installed, or a release without per-version specs
            _SPECS.append(None)
        else:
            _SPECS.append(MAP_REPO_VERSION_TO_SPECS)
    return _SPECS[0]


def swebench_specs(repo: str, version: str) -> dict[str, Any] | None:
    """SWE-bench's spec for (repo, version) when the installed ``swebench`` has one (its 2.x-4.x
    releases keep them in ``swebench.harness.constants``; 5.x moved set-up to Dockerfiles)."""
    if not _SPECS and not _may_have_specs(repo):
        return None  # not imported for a repository it does not name
    specs = _swebench_spec_map()
    spec = (specs or {}).get(repo, {}).get(version)
    return dict(spec) if isinstance(spec, Mapping) else None


def swebench_parser(repo: str) -> Callable[[str], dict[str, str]] | None:
    """SWE-bench's log parser for ``repo`` (test name -> PASSED/FAILED/...), when installed."""
    try:
        from swebench.harness.log_parsers import MAP_REPO_TO_PARSER  # type: ignore
    except Exception:  # noqa: BLE001
        return None
    fn = MAP_REPO_TO_PARSER.get(repo)
    if fn is None:
        return None

    def parse(log: str) -> dict[str, str]:
        return dict(fn(log, None))

    return parse


def env_spec_for(
    inst: Instance, known: Known | None = None, *, table: SetupTable | None = None
) -> EnvSpec:
    """The instance's environment: set-up from its own ``pre_install``/``install`` fields, else
    from the set-up table's entry for its repo and version, else from SWE-bench's spec, else
    none. The test command and variables come from the table's entry, else (the command) from
    SWE-bench's spec, wherever the set-up came from. ``known``: what the driver looked up; without
    it, the entry is taken from ``table`` and the spec looked up here."""
    repo = inst.repo or f"local/{inst.instance_id}"
    if known is not None:
        entry = known.setup_entry
    else:
        entry = table.entry(inst.repo, inst.version) if table is not None and inst.repo else None
    looked: list[dict[str, Any] | None] = []

    def swebench() -> dict[str, Any] | None:  # looked up once, and only when needed
        if not looked:
            if known is not None:
                looked.append(known.swebench_spec)
            else:
                looked.append(swebench_specs(inst.repo, inst.version) if inst.repo else None)
        return looked[0]

    test_cmd = entry.test_cmd if entry is not None else None
    if test_cmd is None:
        test_cmd = _test_cmd((swebench() or {}).get("test_cmd"))

    def make(
        source: str,
        pre_install: Sequence[str] = (),
        install: Sequence[str] = (),
        packages: Sequence[str] = (),
        shims: Sequence[str] = (),
    ) -> EnvSpec:
        return EnvSpec(
            repo,
            inst.version,
            inst.environment_setup_commit,
            tuple(pre_install),
            tuple(install),
            source,
            packages=tuple(packages),
            shims=tuple(shims),
            test_cmd=test_cmd,
            test_env=dict(entry.env) if entry is not None else {},
        )

    if inst.pre_install or inst.install:
        return make("instance", inst.pre_install, inst.install)
    if entry is not None:
        return make("table", entry.pre_install, entry.install, entry.packages, entry.shims)
    spec = swebench()
    if spec:
        install: list[str] = []
        if spec.get("pip_packages"):  # as the harness does: one shell word list
            install.append("python -m pip install " + " ".join(spec["pip_packages"]))
        if spec.get("install"):
            install.append(str(spec["install"]))
        pre = spec.get("pre_install") or ()
        return make("swebench", [pre] if isinstance(pre, str) else pre, install)
    return make("none")


def _test_cmd(cmd: Any) -> str | None:
    if isinstance(cmd, (list, tuple)):
        cmd = " && ".join(str(c) for c in cmd)
    return str(cmd) if cmd else None


def interpreter_vars() -> dict[str, str]:
    """Without set-up commands, ``python`` in test commands is the running interpreter (its
    folder first on ``PATH``), whatever the shell that started the batch has first."""
    path = inherited().get("PATH", os.defpath)
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{path}"}


def _venv_vars(venv: Path) -> dict[str, str]:
    path = inherited().get("PATH", os.defpath)
    return {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{path}"}


def prepare_env(
    spec: EnvSpec,
    root: Path,
    materialize: Callable[[Path], None],
    *,
    timeout: float,
) -> EnvResult:
    """Make (or reuse) the environment of ``spec`` under ``root``.

    ``materialize(dest)`` writes the source tree the set-up commands run in. Several processes
    may ask for the same key at once: one builds, the others wait on its lock and reuse it.
    The result's ``env`` holds the venv's variables and the spec's ``test_env``.
    """
    tests = dict(spec.test_env)
    if not spec.needed:
        return EnvResult({**interpreter_vars(), **tests}, None)
    root.mkdir(parents=True, exist_ok=True)
    home = root / spec.key()
    log = root / f"{spec.key()}.log"
    with open(root / f"{spec.key()}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        venv = home / "venv"
        if (home / "ok").is_file():
            return EnvResult({**_venv_vars(venv), **tests}, log, reused=True)
        if (home / "failed").is_file():
            reason = (home / "failed").read_text(encoding="utf-8").strip()
            return EnvResult({}, log, f"{reason} (set-up of this environment failed before)")
        if home.exists():
            shutil.rmtree(home, ignore_errors=True)  # a set-up cut short: start again
        home.mkdir(parents=True)
        error = _build(spec, home, venv, log, materialize, timeout)
        if error is not None:
            (home / "failed").write_text(error + "\n", encoding="utf-8")
            return EnvResult({}, log, error)
        (home / "ok").write_text(json.dumps({"time": time.time()}) + "\n", encoding="utf-8")
        return EnvResult({**_venv_vars(venv), **tests}, log)


class _Steps:
    """Set-up commands run one after the other in ``cwd`` under one deadline, into the log."""

    def __init__(self, out: Any, cwd: Path, log: Path, timeout: float) -> None:
        self.out, self.cwd, self.log, self.timeout = out, cwd, log, timeout
        self.deadline = time.monotonic() + timeout
        self.env = inherited()

    def run(self, cmd: str) -> str | None:
        """Run ``cmd``; the error of the set-up when it fails, else ``None``."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.out.write(f"$ {cmd}\n(not run: set-up timeout of {self.timeout:g}s spent)\n")
            return f"environment set-up timed out after {self.timeout:g}s (log: {self.log})"
        self.out.write(f"$ {cmd}\n")
        self.out.flush()
        res = sandbox.run(cmd, self.cwd, timeout=left, env=self.env, output_limit=256 * 1024)
        self.out.write(res.stdout)
        self.out.write(res.stderr)
        self.out.write(f"\n(exit {res.exit_code}, {res.seconds:.1f}s)\n")
        if res.timed_out:
            return (
                f"environment set-up timed out after {self.timeout:g}s at `{cmd}` (log: {self.log})"
            )
        if not res.ok:
            return f"environment set-up failed: `{cmd}` exited {res.exit_code} (log: {self.log})"
        return None

    def start_python(self, what: str) -> str | None:
        """Start the venv's ``python``: a ``.pth`` line that fails is only printed by Python
        (the interpreter starts anyway), so it is looked for in what it prints."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return f"environment set-up timed out after {self.timeout:g}s (log: {self.log})"
        res = sandbox.run(["python", "-c", "pass"], self.cwd, timeout=left, env=self.env)
        bad = [
            line
            for line in res.stderr.splitlines()
            if line.startswith("Error processing line") or "Remainder of file ignored" in line
        ]
        if res.ok and not bad:
            return None
        self.out.write(f"$ python -c pass  ({what})\n{res.stdout}{res.stderr}\n")
        self.out.write(f"(exit {res.exit_code})\n")
        detail = bad[0] if bad else f"exit {res.exit_code}"
        return (
            f"environment set-up: the venv's python fails at start-up {what}: {detail}; "
            f"see the traceback in the log and fix the line (log: {self.log})"
        )


def _build(
    spec: EnvSpec,
    home: Path,
    venv: Path,
    log: Path,
    materialize: Callable[[Path], None],
    timeout: float,
) -> str | None:
    src = home / "src"
    with open(log, "w", encoding="utf-8") as out:
        out.write(f"# environment {spec.key()}: {spec.repo} {spec.version} ({spec.source})\n")
        try:
            materialize(src)
        except Exception as exc:  # noqa: BLE001 - any failure here is the set-up's
            out.write(f"cannot write the source tree: {exc}\n")
            return f"environment set-up: cannot write the source tree: {exc}"
        steps = _Steps(out, src, log, timeout)
        error = steps.run(
            f"{shlex.quote(sys.executable)} -m venv --system-site-packages {shlex.quote(str(venv))}"
        )
        if error is not None:
            return error
        site_dir = _site_packages(venv)
        if site_dir is None:
            out.write(f"no lib/python*/site-packages folder in {venv}\n")
            return f"environment set-up: {venv} has no site-packages folder (log: {log})"
        steps.env.update(_venv_vars(venv))
        _see_parent_packages(site_dir)
        if spec.shims:
            (site_dir / SHIMS_PTH).write_text("".join(s + "\n" for s in spec.shims))
            out.write(f"# shims: {len(spec.shims)} line(s) in {site_dir / SHIMS_PTH}\n")
            error = steps.start_python(f"with the shims ({SHIMS_PTH})")
            if error is not None:
                return error
        commands = list(spec.pre_install)
        if spec.packages:
            commands.append(
                "python -m pip install --disable-pip-version-check "
                + " ".join(shlex.quote(p) for p in spec.packages)
            )
        commands += spec.install
        for cmd in commands:
            error = steps.run(cmd)
            if error is not None:
                return error
        try:
            done = repoint_editables(site_dir, src)
        except OSError as exc:
            out.write(f"cannot repoint the editable installs: {exc}\n")
            return (
                "environment set-up: cannot repoint the editable installs at the tree under "
                f"test: {exc} (log: {log})"
            )
        for note in done.notes:
            out.write(f"# {note}\n")
        (site_dir / TREE_PTH).write_text(tree_pth(done.roots), encoding="utf-8")
        roots = ", ".join(done.roots) or "none"
        out.write(
            f"# {TREE_PTH}: the tree under test first on sys.path: the folders the editable "
            f"installs pointed at ({roots}) and src/, of the current folder, where they exist\n"
        )
        return steps.start_python("after set-up")


def _site_packages(venv: Path) -> Path | None:
    found = sorted(venv.glob("lib/python*/site-packages"))
    return found[0] if found else None


def _see_parent_packages(site_dir: Path) -> None:
    # The running interpreter's packages (its test tools, treesearch's pytest probe) stay
    # importable in the new venv, after whatever the set-up installs there.
    parents = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_dir / PARENT_PTH).write_text("".join(p + "\n" for p in parents))


# --- the tree under test is what runs --------------------------------------------------------


@dataclass(frozen=True)
class Repointed:
    """What ``repoint_editables`` did."""

    roots: tuple[str, ...]
    """Folders the editable installs pointed at, relative to the set-up copy (``.``, ``src``,
    ...), in the order found."""
    notes: tuple[str, ...]
    """One line per install replaced (or that could not be), for the set-up log."""


def repoint_editables(site_dir: Path, src: Path) -> Repointed:
    """Undo the editable installs in ``site_dir`` that point into ``src`` (the set-up copy):
    path lines of ``.pth`` files, the ``MAPPING``/``NAMESPACES`` of PEP 660 finders
    (``__editable___*_finder.py``, as setuptools writes them) and legacy ``*.egg-link`` files.
    Their metadata stays (``.dist-info``; a legacy install's ``.egg-info``, which lives in the
    source folder, is copied into ``site_dir``): entry points are read from it. Each file
    changed is first kept as ``NAME.treesearch-replaced``. Returns the folders they pointed at,
    relative to ``src``."""
    base = os.path.realpath(src)
    roots: list[str] = []
    notes: list[str] = []

    def inside(path: str) -> str | None:
        real = os.path.realpath(path)
        if real == base:
            return "."
        if real.startswith(base + os.sep):
            return Path(os.path.relpath(real, base)).as_posix()
        return None

    def add(rel: str) -> None:
        if rel not in roots:
            roots.append(rel)

    for link in sorted(site_dir.glob("*.egg-link")):
        notes += _egg_link(link, site_dir, inside, add)
    for pth in sorted(site_dir.glob("*.pth")):
        if pth.name in (PARENT_PTH, SHIMS_PTH, TREE_PTH):
            continue
        notes += _pth_file(pth, site_dir, base, inside, add)
    return Repointed(tuple(roots), tuple(notes))


def _set_aside(path: Path) -> None:
    shutil.copy2(path, path.with_name(path.name + _REPLACED))


def _egg_link(
    link: Path, site_dir: Path, inside: Callable[[str], str | None], add: Callable[[str], None]
) -> list[str]:
    lines = link.read_text(encoding="utf-8", errors="replace").splitlines()
    target = lines[0].strip() if lines else ""
    rel = inside(target) if target else None
    if rel is None:
        return []
    add(rel)
    kept = []
    wanted = _normal(link.name.removesuffix(".egg-link"))
    for info in sorted(Path(target).glob("*.egg-info")):
        if _normal(info.name.removesuffix(".egg-info")).startswith(wanted) and info.is_dir():
            dest = site_dir / info.name
            if not dest.exists():
                shutil.copytree(info, dest)
            kept.append(info.name)
    link.rename(link.with_name(link.name + _REPLACED))
    meta = (
        f"its metadata {', '.join(kept)} copied into site-packages"
        if kept
        else ("no .egg-info found there to keep (entry points of the project will be missing)")
    )
    return [f"replaced the legacy editable install {link.name} -> {target} ({rel}); {meta}"]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _pth_file(
    pth: Path,
    site_dir: Path,
    base: str,
    inside: Callable[[str], str | None],
    add: Callable[[str], None],
) -> list[str]:
    try:
        lines = pth.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return [f"cannot read {pth.name}: left as it is (the import check tells if it matters)"]
    notes: list[str] = []
    kept: list[str] = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            kept.append(line)
        elif line.startswith(("import ", "import\t")):
            kept.append(line)
            finders = re.findall(r"\b(__editable___\w+_finder)\b", line)
            for name in dict.fromkeys(finders):
                notes += _finder(site_dir / f"{name}.py", inside, add)
            if not finders and (base in line or str(Path(base)) in line):
                notes.append(
                    f"{pth.name} runs code that names the set-up copy {base}: left as it is "
                    "(the import check tells if it matters)"
                )
        else:
            rel = inside(os.path.join(site_dir, line.rstrip()))  # as site.addpackage reads it
            if rel is None:
                kept.append(line)
            else:
                add(rel)
                notes.append(f"replaced {pth.name}: path {line.rstrip()} -> {rel}")
    if len(kept) != len(lines):
        _set_aside(pth)
        if any(line.strip() and not line.startswith("#") for line in kept):
            pth.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        else:
            pth.unlink()
    return notes


def _finder(
    file: Path, inside: Callable[[str], str | None], add: Callable[[str], None]
) -> list[str]:
    """Drop the entries of a PEP 660 finder's ``MAPPING`` (name -> folder or file) and
    ``NAMESPACES`` (name -> folders) that point into the set-up copy."""
    try:
        source = file.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        return [f"cannot read the finder {file.name} ({exc}): left as it is"]
    notes: list[str] = []
    edits: list[tuple[ast.expr, dict[str, Any]]] = []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if not isinstance(target, ast.Name) or target.id not in ("MAPPING", "NAMESPACES"):
            continue
        if not isinstance(value, ast.expr):
            continue
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            notes.append(f"{file.name}: {target.id} is not a literal: left as it is")
            continue
        if isinstance(literal, dict):
            kept = _kept_entries(file.name, literal, inside, add, notes)
            if kept != literal:
                edits.append((value, kept))
    if edits:
        _set_aside(file)
        file.write_text(_replace_values(source, edits), encoding="utf-8")
        for pyc in (file.parent / "__pycache__").glob(f"{file.stem}.*.pyc"):
            pyc.unlink(missing_ok=True)
    return notes


def _kept_entries(
    finder: str,
    literal: dict[Any, Any],
    inside: Callable[[str], str | None],
    add: Callable[[str], None],
    notes: list[str],
) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for name, where in literal.items():
        paths = [where] if isinstance(where, str) else list(where)
        outside = [p for p in paths if inside(str(p)) is None]
        notes += [
            _mapped_root(finder, str(name), str(p), inside, add)
            for p in paths
            if inside(str(p)) is not None
        ]
        if outside:
            kept[name] = where if isinstance(where, str) else outside
    return kept


def _replace_values(source: str, edits: list[tuple[ast.expr, dict[str, Any]]]) -> str:
    """``source`` with the text of each expression replaced by the repr of its new value."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    # ast offsets count UTF-8 bytes within a line; the finder's lines before the literals
    # are ASCII, and the literals' own text is replaced whole.
    for value, kept in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        start = starts[value.lineno - 1] + value.col_offset
        end = starts[(value.end_lineno or value.lineno) - 1] + (value.end_col_offset or 0)
        source = source[:start] + repr(kept) + source[end:]
    return source


def _mapped_root(
    finder: str,
    name: str,
    path: str,
    inside: Callable[[str], str | None],
    add: Callable[[str], None],
) -> str:
    parts = name.split(".")
    p = Path(os.path.realpath(path))
    if parts[-1] not in (p.name, p.stem) or len(p.parents) < len(parts):
        return (
            f"removed {name} -> {path} from {finder}: the folder is not named after the "
            "package, so it cannot be found in the tree under test by its name"
        )
    rel = inside(str(p.parents[len(parts) - 1]))
    if rel is None:
        return f"removed {name} -> {path} from {finder}"
    add(rel)
    return f"replaced {name} -> {path} in {finder} by {rel}"


def tree_pth(roots: Sequence[str]) -> str:
    """The text of ``_treesearch_tree_under_test.pth``: at interpreter start, ``roots`` and
    ``src`` (when the current folder has one), resolved against the current folder, go first
    on ``sys.path``."""
    code = (
        "def _tree_under_test(roots):\n"
        "    import os, sys\n"
        "    try:\n"
        "        cwd = os.getcwd()\n"
        "    except OSError:\n"
        "        return\n"
        "    if 'src' not in roots and os.path.isdir(os.path.join(cwd, 'src')):\n"
        "        roots = roots + ['src']\n"
        "    new = []\n"
        "    for root in roots:\n"
        "        path = os.path.normpath(os.path.join(cwd, root))\n"
        "        if os.path.isdir(path) and path not in new:\n"
        "            new.append(path)\n"
        "    sys.path[:0] = new\n"
        f"_tree_under_test({list(roots)!r})\n"
    )
    return (
        "# treesearch: the tree under test (the current folder) first on sys.path\n"
        f"import os; exec({code!r})\n"
    )


_SKIP_PACKAGES = frozenset(
    {
        "tests",
        "test",
        "testing",
        "docs",
        "doc",
        "examples",
        "benchmarks",
        "scripts",
        "tools",
        "build",
        "dist",
    }
)
_MARK = "@@treesearch-import-check@@"
_CHECK = f"""
import importlib, json, os, sys
if sys.path and sys.path[0] in ('', os.getcwd()) and not getattr(sys.flags, 'safe_path', False):
    del sys.path[0]
out = {{}}
for name in sys.argv[1:]:
    try:
        mod = importlib.import_module(name)
    except BaseException as exc:
        text = (type(exc).__name__ + ': ' + str(exc)).strip().splitlines()
        out[name] = {{'error': (text[0] if text else type(exc).__name__)[:300]}}
        continue
    where = getattr(mod, '__file__', None) or next(iter(getattr(mod, '__path__', None) or []), None)
    out[name] = {{'file': os.path.realpath(where) if isinstance(where, str) else None}}
sys.stdout.flush()
sys.stdout.write('\\n{_MARK}' + json.dumps(out) + '\\n')
"""


def tree_packages(tree: Path) -> dict[str, Path]:
    """The top-level packages of a tree: folders with ``__init__.py`` under ``src/`` and at the
    root (tests, docs, examples, build output and private names left out)."""
    out: dict[str, Path] = {}
    for folder in (tree / "src", tree):
        if not folder.is_dir():
            continue
        for child in sorted(folder.iterdir()):
            name = child.name
            if name in _SKIP_PACKAGES or name.startswith(("_", ".")) or not name.isidentifier():
                continue
            if (child / "__init__.py").is_file():
                out.setdefault(name, child)
    return out


@dataclass(frozen=True)
class ImportCheck:
    """Where the tests of a tree would import its packages from (``check_tree_imports``)."""

    tree: Path
    packages: Mapping[str, str]
    """The tree's top-level packages: name -> folder in the tree."""
    imported: Mapping[str, str]
    """Packages that imported: name -> resolved path of the module's file."""
    outside: Mapping[str, str]
    """Of those, the ones whose file is not inside the (resolved) tree."""
    failed: Mapping[str, str]
    """Packages that did not import: name -> one-line error (not a mismatch: the tests show
    it)."""
    error: str | None = None
    """The check itself could not run (then nothing is known: not ``ok``)."""

    @property
    def ok(self) -> bool:
        return not self.outside and self.error is None

    def reason(self) -> str:
        """One line: why not ``ok`` ('' when it is)."""
        if self.error is not None:
            return f"cannot tell which code the tests of {self.tree} import: {self.error}"
        if not self.outside:
            return ""
        wrong = "; ".join(
            f"{name} from {path}, not from the tree under test {self.packages[name]}"
            for name, path in self.outside.items()
        )
        return (
            f"the tests would import {wrong} (an install of the project in the environment "
            "that is not editable? install it with `pip install -e .`, or not at all)"
        )


def check_tree_imports(tree: Path, env: Mapping[str, str], *, timeout: float = 120) -> ImportCheck:
    """Import each of ``tree``'s top-level packages in one ``python`` started in ``tree`` with
    ``env`` on top of this process's environment (the variables the test runs get, so the
    venv's ``python``), and say where each came from. The current folder is taken off the front
    of ``sys.path`` first: a test run does not always have it there (the ``pytest`` script,
    ``--import-mode``), so a package must come from the tree through what the environment
    itself puts on ``sys.path``. No bytecode is written into the tree."""
    tree = Path(tree)
    real = os.path.realpath(tree)
    packages = {name: str(folder) for name, folder in tree_packages(tree).items()}
    if not packages:
        return ImportCheck(tree, {}, {}, {}, {})
    cmd = shlex.join(["python", "-c", _CHECK, *packages])
    extra = {**dict(env), "PYTHONDONTWRITEBYTECODE": "1"}
    res = sandbox.run(cmd, tree, timeout=timeout, extra_env=extra, output_limit=256 * 1024)
    if res.timed_out:
        return ImportCheck(
            tree, packages, {}, {}, {}, f"the import check timed out after {timeout:g}s"
        )
    report = None
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(_MARK):
            with contextlib.suppress(ValueError):
                report = json.loads(line[len(_MARK) :])
            break
    if not isinstance(report, dict):
        last = (res.stderr.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
        return ImportCheck(
            tree, packages, {}, {}, {}, f"`python` in {tree} gave no report ({last[:300]})"
        )
    imported: dict[str, str] = {}
    outside: dict[str, str] = {}
    failed: dict[str, str] = {}
    for name in packages:
        got = report.get(name) or {}
        if "error" in got:
            failed[name] = str(got["error"])
            continue
        file = got.get("file")
        path = file if isinstance(file, str) else "<no file>"
        imported[name] = path
        if not (path == real or path.startswith(real + os.sep)):
            outside[name] = path
    return ImportCheck(tree, packages, imported, outside, failed)


def remove_tree(path: Path) -> None:
    """Remove a folder that may hold read-only folders."""
    for dirpath, dirs, _files in os.walk(path):
        for name in dirs:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                with contextlib.suppress(OSError):
                    os.chmod(full, 0o700)
    shutil.rmtree(path, ignore_errors=True)
