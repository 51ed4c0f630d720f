"""Grading through SWE-bench's own spec and log parser (where the ``swebench`` extra has them).

For an instance of a repository/version that the installed ``swebench`` knows (its releases
2.x-4.x keep ``MAP_REPO_VERSION_TO_SPECS`` and ``MAP_REPO_TO_PARSER``), the grading command is
the spec's ``test_cmd`` followed by the test files that ``test_patch`` touches (as the harness's
``get_test_directives`` does for pytest repositories), and the per-test statuses come from the
repository's own log parser. Resolved follows the same rule as everywhere else: every
FAIL_TO_PASS and every PASS_TO_PASS test PASSED (or XFAIL); anything else, or missing, fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["NON_TEST_EXTS", "grade_statuses", "test_directives", "test_command"]

NON_TEST_EXTS = (
    ".json",
    ".png",
    "csv",
    ".txt",
    ".md",
    ".jpg",
    ".jpeg",
    ".pkl",
    ".yml",
    ".yaml",
    ".toml",
)
_DIFF = re.compile(r"^diff --git a/.* b/(.*)$", re.MULTILINE)
_PASSING = ("PASSED", "XFAIL")


def test_directives(test_patch: str) -> list[str]:
    """The test files a ``test_patch`` touches (non-test files left out)."""
    out = []
    for path in _DIFF.findall(test_patch):
        if not path.endswith(NON_TEST_EXTS) and path not in out:
            out.append(path)
    return out


def test_command(spec: Mapping[str, Any], test_patch: str) -> str | None:
    """The harness's test command for this instance, or ``None`` when the spec has none."""
    cmd = spec.get("test_cmd")
    if isinstance(cmd, (list, tuple)):
        cmd = " && ".join(str(c) for c in cmd)
    if not cmd:
        return None
    return " ".join([str(cmd), *test_directives(test_patch)])


def grade_statuses(
    statuses: Mapping[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's ``tests_status`` table from a parsed log (strict: a skip is not a pass)."""

    def split(tests: Sequence[str]) -> dict[str, list[str]]:
        part: dict[str, list[str]] = {"success": [], "failure": []}
        for t in tests:
            part["success" if statuses.get(t) in _PASSING else "failure"].append(t)
        return part

    return {"FAIL_TO_PASS": split(fail_to_pass), "PASS_TO_PASS": split(pass_to_pass)}
