"""Eval environments: the tree under test is what the tests import (editable installs of the
set-up copy repointed, checked at run time), and the set-up table.

Real venvs, real pip, real subprocesses. pip cannot build a setuptools project offline here (no
``wheel`` package), so the test projects carry their own PEP 517 backend (``backend-path``),
standard library only; it writes what setuptools writes for an editable install: a ``.pth`` path
line for a ``src/`` layout, a ``__editable___*_finder.py`` with a ``MAPPING`` for a flat one
(setuptools' own finder template when it is importable).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from treesearch import sandbox
from treesearch.eval.environment import (
    TREE_PTH,
    EnvResult,
    EnvSpec,
    Known,
    check_tree_imports,
    env_spec_for,
    interpreter_vars,
    look_up,
    prepare_env,
    repoint_editables,
    tree_packages,
)
from treesearch.eval.instances import Instance
from treesearch.eval.setup_table import (
    SetupEntry,
    SetupTable,
    SetupTableError,
    load_setup_table,
)
from treesearch.store.source import commit_folder, materialize_commit
from treesearch.types import ProcessResult

ROOT = Path(__file__).resolve().parent.parent
DEV_TABLE = ROOT / "experiments" / "swebench" / "setup-dev.yaml"
PIP = "python -m pip install --no-deps --no-build-isolation --no-index --disable-pip-version-check"
QUIET = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}

BACKEND = '''"""PEP 517 backend of a test project (standard library only): wheels and PEP 660 editable
wheels as setuptools makes them (a path line for a src/ layout, a finder for a flat one)."""
import base64, hashlib, os, zipfile

NAME = open("NAME").read().strip()
VERSION = "0.1"
DIST = NAME + "-" + VERSION + ".dist-info"


def _wheel(directory, files):
    files = dict(files)
    files[DIST + "/METADATA"] = (
        "Metadata-Version: 2.1\\nName: " + NAME + "\\nVersion: " + VERSION + "\\n"
    ).encode()
    files[DIST + "/WHEEL"] = (
        b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    )
    files[DIST + "/entry_points.txt"] = (
        "[acme.plugins]\\n" + NAME + " = " + NAME + ":where\\n"
    ).encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(path + ",sha256=" + digest.decode() + "," + str(len(data)))
    files[DIST + "/RECORD"] = ("\\n".join(record + [DIST + "/RECORD,,"]) + "\\n").encode()
    name = NAME + "-" + VERSION + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return name


def _root():
    return os.path.abspath("src" if os.path.isdir("src") else ".")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    root, files = _root(), {}
    for folder, _dirs, names in os.walk(os.path.join(root, NAME)):
        for n in names:
            full = os.path.join(folder, n)
            with open(full, "rb") as fh:
                files[os.path.relpath(full, root).replace(os.sep, "/")] = fh.read()
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = "__editable__." + NAME + "-" + VERSION + ".pth"
    if os.path.isdir("src"):
        return _wheel(wheel_directory, {pth: (_root() + "\\n").encode()})
    finder = "__editable___" + NAME + "_" + VERSION.replace(".", "_") + "_finder"
    mapping = {NAME: os.path.join(_root(), NAME)}
    try:
        from setuptools.command.editable_wheel import _finder_template
        source = _finder_template(finder, mapping, {})
    except ImportError:
        source = FALLBACK.replace("@MAPPING@", repr(mapping))
    line = "import " + finder + "; " + finder + ".install()\\n"
    return _wheel(wheel_directory, {finder + ".py": source.encode(), pth: line.encode()})


FALLBACK = """
import sys
from importlib.util import spec_from_file_location
from pathlib import Path

MAPPING = @MAPPING@
NAMESPACES = {}


class _EditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        for pkg, pkg_path in MAPPING.items():
            if fullname == pkg or fullname.startswith(pkg + "."):
                rest = fullname.replace(pkg, "", 1).strip(".").split(".")
                init = Path(pkg_path, *rest) / "__init__.py"
                if init.exists():
                    return spec_from_file_location(fullname, init)
        return None


def install():
    if _EditableFinder not in sys.meta_path:
        sys.meta_path.append(_EditableFinder)
"""
'''

PYPROJECT = """[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]
"""


def _package(folder: Path, name: str, value: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text(
        f"VALUE = {value!r}\n\n\ndef where():\n    return __file__\n"
    )


def _project(folder: Path, name: str) -> Path:
    """A project folder with the test backend, building the distribution ``name``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "backend.py").write_text(BACKEND)
    (folder / "NAME").write_text(name + "\n")
    return folder


def _repo_with(tmp: Path, folder: Path) -> tuple[Path, str]:
    repo = tmp / f"{folder.name}.git"
    return repo, commit_folder(repo, folder, message="environment commit")


def _build(
    tmp: Path, folder: Path, install: tuple[str, ...], **more: Any
) -> tuple[EnvResult, Path]:
    repo, commit = _repo_with(tmp, folder)
    spec = EnvSpec("acme/acme", "1.0", commit, (), install, "instance", **more)
    root = tmp / "envs"

    def materialize(dest: Path) -> None:
        materialize_commit(repo, commit, dest)

    return prepare_env(spec, root, materialize, timeout=600), root / spec.key()


def _copy(tmp: Path, folder: Path, name: str) -> Path:
    dest = tmp / name / "tree"
    dest.parent.mkdir(parents=True)
    shutil.copytree(folder, dest)
    return dest


def _python(code: str, cwd: Path, env: dict[str, str] | Any) -> ProcessResult:
    return sandbox.run(["python", "-c", code], cwd, timeout=120, extra_env={**env, **QUIET})


# --- editable installs of the set-up copy are repointed at the tree under test --------------


@pytest.fixture(scope="module")
def editable_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One venv: the project (``src/acme``, plus a stale top-level module ``acme_old``) installed
    editable, and a flat sub-project ``plugins/`` (package ``acme_plugins``, a PEP 660 finder)
    installed editable too, both from the set-up copy."""
    tmp = tmp_path_factory.mktemp("editable")
    proj = _project(tmp / "proj", "acme")
    _package(proj / "src" / "acme", "acme", "setup copy")
    (proj / "src" / "acme_old.py").write_text("GONE = False\n")
    plugins = _project(proj / "plugins", "acme_plugins")
    _package(plugins / "acme_plugins", "acme_plugins", "setup copy")
    result, home = _build(
        tmp,
        proj,
        (f"{PIP} -e .", f"{PIP} -e ./plugins"),
        test_env={"ACME_TEST_VAR": "on"},
    )
    assert result.error is None, Path(result.log or "").read_text()
    trees = {}
    for label in ("one", "two"):
        tree = _copy(tmp, proj, label)
        (tree / "src" / "acme_old.py").unlink()  # removed since the environment commit
        _package(tree / "src" / "acme", "acme", label)
        _package(tree / "plugins" / "acme_plugins", "acme_plugins", label)
        (tree / "tests").mkdir()
        (tree / "tests" / "test_acme.py").write_text(
            "import importlib.metadata as md\n\nimport acme\nimport acme_plugins\n\n\n"
            f"def test_the_tree_under_test_is_imported():\n"
            f"    assert acme.VALUE == {label!r}\n"
            f"    assert acme_plugins.VALUE == {label!r}\n\n\n"
            "def test_entry_points_kept_and_loaded_from_the_tree():\n"
            "    (ep,) = md.entry_points(group='acme.plugins', name='acme_plugins')\n"
            f"    assert ep.load()().startswith({str(tree)!r})\n"
        )
        trees[label] = tree
    return {"result": result, "home": home, "trees": trees}


@pytest.mark.slow
def test_each_tree_under_test_imports_its_own_code_not_the_editable_set_up_copy(
    editable_env: dict[str, Any],
) -> None:
    env = dict(editable_env["result"].env)
    for label, tree in editable_env["trees"].items():
        res = _python(
            "import acme, acme_plugins; print(acme.__file__); print(acme_plugins.__file__)",
            tree,
            env,
        )
        assert res.ok, res.stderr
        assert res.stdout.split() == [
            str(tree / "src" / "acme" / "__init__.py"),
            str(tree / "plugins" / "acme_plugins" / "__init__.py"),
        ], label
        run = sandbox.run(
            "python -m pytest -q -p no:cacheprovider tests",
            tree,
            timeout=120,
            extra_env={**env, **QUIET},
        )
        assert run.exit_code == 0, run.stdout + run.stderr
        assert "2 passed" in run.stdout
        check = check_tree_imports(tree, env)
        assert check.ok and check.reason() == "", check
        assert check.imported == {"acme": str(tree / "src" / "acme" / "__init__.py")}
        assert not check.failed


@pytest.mark.slow
def test_a_module_only_in_the_set_up_copy_is_not_importable(
    editable_env: dict[str, Any],
) -> None:
    tree = editable_env["trees"]["one"]
    res = _python("import acme_old", tree, dict(editable_env["result"].env))
    assert res.exit_code == 1 and "No module named 'acme_old'" in res.stderr


@pytest.mark.slow
def test_the_set_up_log_says_what_was_replaced_and_metadata_stays(
    editable_env: dict[str, Any],
) -> None:
    result, home = editable_env["result"], editable_env["home"]
    log = Path(result.log).read_text()
    assert "replaced __editable__.acme-0.1.pth: path " in log
    assert "replaced acme_plugins -> " in log and "by plugins" in log
    assert f"{TREE_PTH}: the tree under test first on sys.path" in log
    assert "the editable installs pointed at (src, plugins)" in log
    (site_dir,) = (home / "venv").glob("lib/python*/site-packages")
    assert (site_dir / "acme-0.1.dist-info" / "entry_points.txt").is_file()
    assert (site_dir / "__editable__.acme-0.1.pth.treesearch-replaced").is_file()
    assert not (site_dir / "__editable__.acme-0.1.pth").exists()  # nothing left in it
    assert result.env["ACME_TEST_VAR"] == "on"  # the spec's test_env, on top of the venv's


# --- a non-editable install cannot be repointed: the check says so --------------------------


@pytest.mark.slow
def test_a_non_editable_install_of_the_project_is_reported(tmp_path: Path) -> None:
    proj = _project(tmp_path / "flat", "beta")
    _package(proj / "beta", "beta", "setup copy")
    shim = "import builtins; builtins.ACME_SHIM = 'active'"
    result, home = _build(tmp_path, proj, (f"{PIP} .",), shims=(shim,))
    assert result.error is None, Path(result.log or "").read_text()
    tree = _copy(tmp_path, proj, "graded")
    check = check_tree_imports(tree, result.env)
    (site_dir,) = (home / "venv").glob("lib/python*/site-packages")
    installed = str((site_dir / "beta" / "__init__.py").resolve())
    assert not check.ok
    assert check.outside == {"beta": installed}
    assert check.reason().startswith(
        f"the tests would import beta from {installed}, not from the tree under test "
        f"{tree / 'beta'}"
    )
    res = _python("import builtins; print(builtins.ACME_SHIM)", tree, dict(result.env))
    assert res.stdout.strip() == "active", res.stderr  # the shim runs at every start


@pytest.mark.slow
def test_a_shim_that_fails_at_start_up_fails_the_set_up(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "README").write_text("x\n")
    result, _home = _build(tmp_path, proj, (), shims=("import no_such_module_for_the_shim",))
    assert result.error is not None
    assert "fails at start-up with the shims (_treesearch_shims.pth)" in result.error
    assert "Error processing line 1" in result.error
    assert "no_such_module_for_the_shim" in Path(result.log or "").read_text()


# --- the check without a venv: the running interpreter -------------------------------------


def test_check_reports_a_package_installed_elsewhere_and_import_errors(tmp_path: Path) -> None:
    """Without a venv: the running interpreter, with ``PYTHONPATH=src`` (relative: the current
    folder's). A package at the tree's root comes only from what the environment puts on
    ``sys.path``, not from the current folder (a ``pytest`` script run does not have it)."""
    tree = tmp_path / "tree"
    packages = {
        "yaml": "X = 1\n",  # PyYAML is installed for this interpreter
        "src/mine": "print('noise at import')\n",
        "src/broken": "raise RuntimeError('cannot start\\nsecond line')\n",
        "flat": "",
        "tests": "",
        "src/_private": "",
    }
    for name, body in packages.items():
        (tree / name).mkdir(parents=True)
        (tree / name / "__init__.py").write_text(body)
    assert sorted(tree_packages(tree)) == ["broken", "flat", "mine", "yaml"]
    check = check_tree_imports(tree, {**interpreter_vars(), "PYTHONPATH": "src"})
    import yaml

    assert check.outside == {"yaml": str(Path(yaml.__file__).resolve())}
    assert check.imported["mine"] == str((tree / "src" / "mine" / "__init__.py").resolve())
    assert check.failed["broken"] == "RuntimeError: cannot start"
    assert check.failed["flat"] == "ModuleNotFoundError: No module named 'flat'"
    assert not check.ok
    assert check.reason().startswith(
        f"the tests would import yaml from {Path(yaml.__file__).resolve()}, not from the tree "
        f"under test {tree / 'yaml'}"
    )
    assert not list(tree.rglob("__pycache__"))  # no bytecode written into the tree


def test_check_that_cannot_run_is_not_ok(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    check = check_tree_imports(tmp_path, {"PATH": str(tmp_path / "nowhere")})
    assert not check.ok and check.error is not None
    assert check.reason().startswith(f"cannot tell which code the tests of {tmp_path} import")


# --- repointing, file by file (a site-packages folder written here) -------------------------


def test_repoint_handles_finders_egg_links_and_path_lines(tmp_path: Path) -> None:
    src = tmp_path / "home" / "src"
    (src / "lib" / "pkg").mkdir(parents=True)
    (src / "lib" / "legacy.egg-info").mkdir()
    (src / "lib" / "legacy.egg-info" / "entry_points.txt").write_text("[x]\ny = pkg\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    finder = site_dir / "__editable___proj_1_0_finder.py"
    finder.write_text(
        "import sys\n"
        f"MAPPING: dict[str, str] = {{'proj': {str(src / 'proj')!r}, 'proj.sub': "
        f"{str(src / 'proj' / 'sub')!r}, 'keep': {str(other / 'keep')!r}}}\n"
        f"NAMESPACES: dict[str, list[str]] = {{'ns': [{str(src / 'ns')!r}, "
        f"{str(other / 'ns')!r}]}}\n"
        "def install():\n    pass\n"
    )
    (site_dir / "__pycache__").mkdir()
    (site_dir / "__pycache__" / f"{finder.stem}.cpython-311.pyc").write_bytes(b"old")
    (site_dir / "__editable__.proj-1.0.pth").write_text(
        f"import {finder.stem}; {finder.stem}.install()\n"
    )
    (site_dir / "legacy.egg-link").write_text(f"{src / 'lib'}\n../\n")
    (site_dir / "easy-install.pth").write_text(f"{src / 'lib'}\n{other}\n")
    (site_dir / "custom.pth").write_text(f"import sys; sys.path.insert(0, {str(src)!r})\n")
    (site_dir / "unrelated.pth").write_text(f"{other}\n")

    done = repoint_editables(site_dir, src)

    assert done.roots == ("lib", ".")
    ns: dict[str, Any] = {}
    exec(finder.read_text(), ns)
    assert ns["MAPPING"] == {"keep": str(other / "keep")}
    assert ns["NAMESPACES"] == {"ns": [str(other / "ns")]}
    assert not (site_dir / "__pycache__" / f"{finder.stem}.cpython-311.pyc").exists()
    assert (site_dir / f"{finder.name}.treesearch-replaced").is_file()
    assert (site_dir / "easy-install.pth").read_text() == f"{other}\n"
    assert (site_dir / "unrelated.pth").read_text() == f"{other}\n"
    assert (site_dir / "legacy.egg-info" / "entry_points.txt").is_file()  # metadata kept
    assert not (site_dir / "legacy.egg-link").exists()
    notes = "\n".join(done.notes)
    assert "replaced the legacy editable install legacy.egg-link" in notes
    assert "custom.pth runs code that names the set-up copy" in notes
    assert f"replaced proj.sub -> {src / 'proj' / 'sub'}" in notes


def test_tree_pth_resolves_against_the_current_folder(tmp_path: Path) -> None:
    """The .pth line itself, run as ``site`` runs it (``exec``), in three folders: the recorded
    roots and ``src`` of the current folder go first, and only those that exist."""
    from treesearch.eval.environment import tree_pth

    (comment, line) = tree_pth(["lib", "."]).splitlines()
    assert comment.startswith("#") and line.startswith("import ")
    for name, folders in {"a": ["lib", "src"], "b": ["lib"], "c": []}.items():
        cwd = tmp_path / name
        for f in folders:
            (cwd / f).mkdir(parents=True)
        cwd.mkdir(exist_ok=True)
        code = f"import json, sys\nbefore = list(sys.path)\nexec({line!r})\n"
        code += "print(json.dumps(sys.path[: len(sys.path) - len(before)]))"
        res = sandbox.run([sys.executable, "-c", code], cwd, timeout=60)
        assert res.ok, res.stderr
        added = [str(cwd / f) for f in folders if f == "lib"] + [str(cwd)]
        added += [str(cwd / f) for f in folders if f == "src"]
        assert json.loads(res.stdout) == added, name


# --- the set-up table -----------------------------------------------------------------------


def test_the_shipped_dev_table_loads() -> None:
    table = load_setup_table(DEV_TABLE)
    assert sorted(table.entries) == [
        ("marshmallow-code/marshmallow", "2.20"),
        ("marshmallow-code/marshmallow", "3.0"),
        ("sqlfluff/sqlfluff", "0.6"),
        ("sqlfluff/sqlfluff", "0.8"),
    ]
    old = table.entry("marshmallow-code/marshmallow", "2.20")
    assert old is not None and old.packages[0] == "pytest==7.4.4"
    assert old.shims[0].startswith("import collections, collections.abc;")
    assert old.test_cmd == "python -m pytest -rA -p no:cacheprovider"
    assert old.env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    fluff = table.entry("sqlfluff/sqlfluff", "0.6")
    assert fluff is not None and "sqlfluff-$V.dist-info" in fluff.install[0]
    assert "\n" not in fluff.install[0]
    assert not any("_swe_src_path" in s for e in table.entries.values() for s in e.shims)
    assert table.entry("sqlfluff/sqlfluff", "9.9") is None


def _table(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "setup.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "o/n:\n  2.20:\n    packages: [pytest]\n",
            'o/n: 2.20: the version key was read as the number 2.2; quote it: "2.20":',
        ),
        (
            'o/n:\n  "1.0":\n    pakages: [pytest]\n',
            "o/n: 1.0: pakages: unknown field; the fields are packages, pre_install, install",
        ),
        (
            'o/n:\n  "1.0":\n    packages: pytest\n',
            "o/n: 1.0: packages: must be a list of requirements for `python -m pip install`",
        ),
        (
            'o/n:\n  "1.0":\n    env: {A: 1}\n',
            "o/n: 1.0: env: A: must be text, got int 1; quote it",
        ),
        (
            'o/n:\n  "1.0":\n    shims: ["collections.Mapping = 1"]\n',
            "o/n: 1.0: shims: item 0 'collections.Mapping = 1' does not start with `import `",
        ),
        (
            'o/n:\n  "1.0":\n    packages: ["--pre"]\n',
            "o/n: 1.0: packages: item 0 '--pre' is a pip option, not a requirement",
        ),
        (
            'o/n:\n  "1.0": {}\n  "1.0": {}\n',
            "o/n: 1.0: given twice (YAML would keep only the last one)",
        ),
        ('notarepo:\n  "1.0": {}\n', "notarepo: a repository key must look like owner/name"),
        ('o/n:\n  "1.0": [pytest]\n', "o/n: 1.0: must be a mapping of fields"),
    ],
)
def test_a_bad_table_names_file_repo_version_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = _table(tmp_path, text)
    with pytest.raises(SetupTableError) as err:
        load_setup_table(path)
    assert f"{path}: {expected}" in str(err.value), str(err.value)


def test_every_problem_of_a_table_is_reported(tmp_path: Path) -> None:
    path = _table(tmp_path, 'o/n:\n  "1.0":\n    packages: 3\n    test_cmd: 4\n')
    with pytest.raises(SetupTableError) as err:
        load_setup_table(path)
    lines = str(err.value).splitlines()
    assert [line.split(": ")[3] for line in lines] == ["packages", "test_cmd"]


def test_a_table_entry_travels_to_workers(tmp_path: Path) -> None:
    import pickle

    table = load_setup_table(DEV_TABLE)
    entry = table.entry("sqlfluff/sqlfluff", "0.8")
    assert pickle.loads(pickle.dumps(Known(None, entry))) == Known(None, entry)


# --- where set-up comes from ----------------------------------------------------------------


def _instance(**fields: Any) -> Instance:
    return Instance(
        instance_id="o__n-1",
        fail_to_pass=("t.py::t",),
        repo="o/n",
        base_commit="0" * 40,
        version="1.0",
        **fields,
    )


ENTRY = SetupEntry(
    "o/n",
    "1.0",
    packages=("pytest==7.4.4",),
    install=("echo table",),
    shims=("import sys",),
    test_cmd="python -m pytest -rA",
    env={"X": "1"},
)
SWEBENCH = {"pip_packages": ["a", "b"], "install": "pip install -e .", "test_cmd": ["pytest -x"]}


def test_set_up_precedence_instance_then_table_then_swebench() -> None:
    own = env_spec_for(_instance(install=("echo own",)), Known(SWEBENCH, ENTRY))
    assert (own.source, own.install, own.packages) == ("instance", ("echo own",), ())
    assert (own.test_cmd, dict(own.test_env)) == ("python -m pytest -rA", {"X": "1"})

    table = env_spec_for(_instance(), Known(SWEBENCH, ENTRY))
    assert table.source == "table"
    assert (table.packages, table.install, table.shims) == (
        ("pytest==7.4.4",),
        ("echo table",),
        ("import sys",),
    )

    swe = env_spec_for(_instance(), Known(SWEBENCH, None))
    assert swe.source == "swebench" and swe.install == (
        "python -m pip install a b",
        "pip install -e .",
    )
    assert (swe.test_cmd, dict(swe.test_env)) == ("pytest -x", {})

    none = env_spec_for(_instance(), Known(None, None))
    assert (none.source, none.needed, none.test_cmd) == ("none", False, None)


def test_look_up_takes_entries_from_the_table() -> None:
    table = SetupTable(Path("t.yaml"), {("o/n", "1.0"): ENTRY})
    known = look_up([_instance()], table)
    assert known["o__n-1"].setup_entry == ENTRY
    assert env_spec_for(_instance(), table=table).source == "table"  # without the driver
    assert look_up([_instance()])["o__n-1"].setup_entry is None


def test_env_key_follows_packages_and_shims_not_the_test_command() -> None:
    base = env_spec_for(_instance(), Known(None, ENTRY))
    key = base.key()
    assert EnvSpec(**{**base.__dict__, "test_cmd": "other"}).key() == key
    assert EnvSpec(**{**base.__dict__, "test_env": {"Y": "2"}}).key() == key
    assert EnvSpec(**{**base.__dict__, "packages": ("pytest==8",)}).key() != key
    assert EnvSpec(**{**base.__dict__, "shims": ()}).key() != key
    assert EnvSpec(**{**base.__dict__, "install": ()}).key() != key


def test_a_table_spec_with_test_env_only_runs_with_the_interpreter() -> None:
    entry = SetupEntry("o/n", "1.0", env={"X": "1"}, test_cmd="python -m pytest")
    spec = env_spec_for(_instance(), Known(None, entry))
    assert not spec.needed
    res = prepare_env(spec, Path("/nonexistent"), lambda dest: None, timeout=1)
    assert res.error is None and res.env["X"] == "1"
    assert res.env["PATH"].startswith(str(Path(sys.executable).parent))
