"""Mutation operators: each family on hand-written code, with the exact text each edit produces;
byte-exact splicing (comments, CRLF, non-ASCII text untouched); every edit parses."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from treesearch.agents.mutation import FAMILIES, Edit, SourceFile, check, edits_at

CORPUS = Path(__file__).resolve().parent.parent / "experiments" / "bugs"


def src_of(text: str, path: str = "m.py") -> SourceFile:
    return SourceFile(path, text.encode("utf-8"))


def results(text: str, line: int, family: str) -> list[str]:
    """The changed line(s) after each edit of ``family`` at ``line``, in the order listed."""
    src = src_of(text)
    out = []
    for edit in edits_at(src, line, [family]):
        after = edit.apply(src.source).decode("utf-8").splitlines()
        before = text.splitlines()
        # The text before the edit and after it is unchanged: report only the middle.
        head = 0
        while head < min(len(before), len(after)) and before[head] == after[head]:
            head += 1
        tail = 0
        while (
            tail < min(len(before), len(after)) - head
            and before[len(before) - 1 - tail] == after[len(after) - 1 - tail]
        ):
            tail += 1
        out.append("\n".join(after[head : len(after) - tail]))
    return out


def test_arith_replaces_the_operator_token_and_adds_parentheses_only_when_needed() -> None:
    text = "def f(a, b, c):\n    return a + b * c  # keep me\n"
    got = results(text, 2, "arith")
    assert got == [
        "    return a - b * c  # keep me",
        "    return a * (b * c)  # keep me",
        "    return a / (b * c)  # keep me",
        "    return a // (b * c)  # keep me",
        "    return a % (b * c)  # keep me",
        "    return a ** (b * c)  # keep me",
        "    return a + (b + c)  # keep me",
        "    return a + (b - c)  # keep me",
        "    return a + b / c  # keep me",
        "    return a + b // c  # keep me",
        "    return a + b % c  # keep me",
        "    return a + b ** c  # keep me",
    ]


def test_arith_wraps_a_node_that_would_bind_differently_in_its_parent() -> None:
    got = results("def f(a, b, c):\n    return c - a * b\n", 2, "arith")
    assert "    return c - (a + b)" in got
    assert "    return c - (a - b)" in got
    assert "    return c + a * b" in got


def test_arith_changes_augmented_assignment_and_drops_unary_minus() -> None:
    text = "def f(x, y):\n    x += y\n    y = -x\n    return y\n"
    assert results(text, 2, "arith") == [
        "    x -= y",
        "    x *= y",
        "    x /= y",
        "    x //= y",
        "    x %= y",
        "    x **= y",
    ]
    assert results(text, 3, "arith") == ["    y = x"]


def test_arith_weights_inverse_operators_above_the_rest() -> None:
    src = src_of("def f(a, b):\n    return a / b\n")
    weights = {e.operator: e.weight for e in edits_at(src, 2, ["arith"])}
    assert weights["/ -> *"] == weights["/ -> //"] == 1.0
    assert weights["/ -> +"] < 1.0 and weights["/ -> **"] < 1.0


def test_compare_replaces_each_operator_within_its_group() -> None:
    text = "def f(a, b, d, k):\n    if a < b and d is None and k in d:\n        return 1\n"
    assert results(text, 2, "compare") == [
        "    if a <= b and d is None and k in d:",
        "    if a > b and d is None and k in d:",
        "    if a >= b and d is None and k in d:",
        "    if a == b and d is None and k in d:",
        "    if a != b and d is None and k in d:",
        "    if a < b and d is not None and k in d:",
        "    if a < b and d is None and k not in d:",
    ]


def test_compare_handles_chained_comparisons_and_two_word_operators() -> None:
    text = "def f(lo, x, hi):\n    return lo <= x not in hi\n"
    got = results(text, 2, "compare")
    assert "    return lo < x not in hi" in got
    assert "    return lo <= x in hi" in got


def test_boolean_swaps_and_and_or() -> None:
    text = "def f(a, b, c):\n    return a and b and c\n"
    assert results(text, 2, "boolean") == ["    return a or b or c"]
    text = "def f(a, b, c):\n    return (a or b) and c\n"
    assert results(text, 2, "boolean") == ["    return (a or b) or c", "    return (a and b) and c"]


def test_negate_wraps_conditions_and_drops_a_not() -> None:
    text = (
        "def f(ready, done, a, b):\n"
        "    if ready:\n"
        "        pass\n"
        "    while not done:\n"
        "        done = True\n"
        "    if a and b:\n"
        "        pass\n"
        "    return [x for x in a if x > b]\n"
    )
    assert results(text, 2, "negate") == ["    if not ready:"]
    assert results(text, 4, "negate") == ["    while done:"]
    assert results(text, 6, "negate") == [
        "    if not (a and b):",
        "    if not a and b:",
        "    if a and not b:",
    ]
    assert results(text, 8, "negate") == ["    return [x for x in a if not x > b]"]


def test_negate_keeps_the_parentheses_of_a_negated_group() -> None:
    text = "def f(a, b):\n    if not (a or b):\n        return 1\n"
    assert results(text, 2, "negate") == ["    if (a or b):"]


def test_constant_moves_numbers_by_one_and_to_zero_or_one() -> None:
    text = "LIMIT = 10\nFLAG = True\nNAME = 'x'\nITEMS = [1, 2]\nRATE = 0.5\n"
    assert results(text, 1, "constant") == ["LIMIT = 11", "LIMIT = 9", "LIMIT = 0", "LIMIT = 1"]
    assert results(text, 2, "constant") == ["FLAG = False"]
    assert results(text, 3, "constant") == ["NAME = ''"]
    assert results(text, 4, "constant") == [
        "ITEMS = []",
        "ITEMS = [2, 2]",
        "ITEMS = [0, 2]",
        "ITEMS = [1, 3]",
        "ITEMS = [1, 1]",
        "ITEMS = [1, 0]",
    ]
    assert results(text, 5, "constant") == ["RATE = 1.5", "RATE = -0.5", "RATE = 0.0", "RATE = 1.0"]


def test_constant_leaves_docstrings_and_f_strings_alone() -> None:
    text = 'def f(x):\n    """Doc 1."""\n    return f"{x + 1}"\n'
    assert results(text, 2, "constant") == []
    assert results(text, 3, "constant") == []
    assert results(text, 3, "arith") == []


def test_name_replaces_a_variable_with_names_in_scope_siblings_first() -> None:
    text = (
        "SCALE = 3\n"
        "\n"
        "\n"
        "def f(lo, hi):\n"
        "    mid = lo + hi\n"
        "    for k, v in []:\n"
        "        mid = v\n"
        "    return mid\n"
    )
    src = src_of(text)
    edits = {e.operator: e for e in edits_at(src, 7, ["name"])}
    assert set(edits) == {
        "mid -> lo",
        "mid -> hi",
        "mid -> k",
        "mid -> v",
        "v -> lo",
        "v -> hi",
        "v -> mid",
        "v -> k",
        "v -> SCALE",
    }
    assert edits["v -> k"].weight == 1.0  # bound together by the same `for`
    assert edits["v -> lo"].weight == 0.5
    assert edits["v -> k"].apply(src.source).decode().splitlines()[6] == "        mid = k"


def test_name_swaps_attributes_and_related_calls() -> None:
    text = (
        "class R:\n"
        "    def __init__(self, w, h):\n"
        "        self.w = w\n"
        "        self.h = h\n"
        "\n"
        "    def area(self, xs):\n"
        "        xs.append(min(self.w, 0))\n"
        "        return self.w * self.w\n"
    )
    assert results(text, 8, "name") == [
        "        return self.h * self.w",
        "        return self.w * self.h",
    ]
    got = results(text, 7, "name")
    assert "        xs.extend(min(self.w, 0))" in got
    assert "        xs.append(max(self.w, 0))" in got
    assert "        xs.append(min(self.h, 0))" in got


def test_bounds_moves_indexes_slices_and_range_arguments() -> None:
    text = "def f(xs, i, n):\n    return xs[i] + sum(xs[1:n - 1]) + sum(range(n))\n"
    assert results(text, 2, "bounds") == [
        "    return xs[i + 1] + sum(xs[1:n - 1]) + sum(range(n))",
        "    return xs[i - 1] + sum(xs[1:n - 1]) + sum(range(n))",
        "    return xs[i] + sum(xs[2:n - 1]) + sum(range(n))",
        "    return xs[i] + sum(xs[0:n - 1]) + sum(range(n))",
        "    return xs[i] + sum(xs[:n - 1]) + sum(range(n))",
        "    return xs[i] + sum(xs[1:n]) + sum(range(n))",
        "    return xs[i] + sum(xs[1:n - 1 + 1]) + sum(range(n))",
        "    return xs[i] + sum(xs[1:n - 1 - 1]) + sum(range(n))",
        "    return xs[i] + sum(xs[1:]) + sum(range(n))",
        "    return xs[i] + sum(xs[1:n - 1]) + sum(range(n + 1))",
        "    return xs[i] + sum(xs[1:n - 1]) + sum(range(n - 1))",
        "    return xs[i] + sum(xs[1:n - 1]) + sum(range(1, n))",
    ]


def test_swap_exchanges_adjacent_arguments_and_non_commutative_operands() -> None:
    text = "def f(g, a, b, c):\n    return g(a, b, c) - a\n"
    assert results(text, 2, "swap") == [
        "    return a - g(a, b, c)",
        "    return g(b, a, c) - a",
        "    return g(a, c, b) - a",
    ]


def test_delete_removes_whole_lines_or_leaves_pass_in_a_one_statement_block() -> None:
    text = "def f(xs):\n    xs.sort()\n    xs.reverse()  # oops\n    if xs:\n        xs.pop()\n"
    src = src_of(text)
    (edit,) = edits_at(src, 3, ["delete"])
    assert (
        edit.apply(src.source).decode()
        == "def f(xs):\n    xs.sort()\n    if xs:\n        xs.pop()\n"
    )
    assert results(text, 5, "delete") == ["        pass"]
    assert results(text, 1, "delete") == []  # never a whole function


def test_insert_copies_a_statement_of_the_same_function_reindented() -> None:
    text = (
        "def f(a, b):\n"
        "    i = j = 0\n"
        "    while i < a:\n"
        "        if i > b:\n"
        "            j += 1\n"
        "        i += 1\n"
        "    return j\n"
    )
    src = src_of(text)
    by_op = {e.operator: e for e in edits_at(src, 7, ["insert"])}
    assert "copy line 5 before" in by_op
    assert by_op["copy line 5 before"].apply(src.source).decode().splitlines()[6:] == [
        "    j += 1",
        "    return j",
    ]
    assert "copy line 4 before" in by_op  # a two-line `if`, re-indented as a whole
    assert by_op["copy line 4 before"].text == "    if i > b:\n        j += 1\n"
    assert not any("after" in op for op in by_op)  # nothing after a return
    # A loop is never copied into itself.
    assert not any(
        op.startswith("copy line 3") for op in (e.operator for e in edits_at(src, 6, ["insert"]))
    )


def test_return_swaps_the_value_for_names_and_other_returned_expressions() -> None:
    text = "def f(xs, default):\n    if not xs:\n        return 0\n    return xs[0] * 2\n"
    assert results(text, 3, "return") == [
        "        return xs",
        "        return default",
        "        return xs[0] * 2",
    ]


def test_edits_splice_bytes_after_non_ascii_text_and_keep_crlf() -> None:
    text = 'def f(x):\r\n    s = "héllo wörld" + x  # ünïcode\r\n    return s\r\n'
    src = SourceFile("m.py", text.encode("utf-8"))
    edits = edits_at(src, 2, ["arith"])
    assert edits[0].apply(src.source).decode("utf-8") == text.replace('" + x', '" - x')
    assert all(e.apply(src.source).count(b"\r\n") == 3 for e in edits)


def test_edits_of_a_multiline_statement_keep_its_layout() -> None:
    text = "def f(a, b):\n    return (a +  # first\n            b)\n"
    src = src_of(text)
    (minus, *_) = edits_at(src, 2, ["arith"])
    assert minus.apply(src.source).decode() == text.replace("a +  #", "a -  #")


def test_check_refuses_edits_that_do_not_compile_or_change_nothing() -> None:
    src = src_of("def f(a):\n    return a\n")
    broken = Edit("m.py", 2, "arith", "test", 14, 20, "return (")
    assert check(src, broken) is not None and "does not compile" in str(check(src, broken))
    same = Edit("m.py", 2, "arith", "test", 21, 22, "(a)")
    assert check(src, same) == "changes no AST node"
    outside = Edit("m.py", 1, "insert", "test", 0, 0, "break\n")
    assert "does not compile" in str(check(src, outside))


def _corpus_files() -> list[Path]:
    files = sorted(CORPUS.glob("*/*.py"))
    assert len(files) >= 25
    return files


TRICKY = '''\
"""Module doc."""
import os

LIMIT = (10 +  # comment with + and -
         -2)


class Box:
    size: int = 3

    def grow(self, by=1, *args, **kw):
        total = self.size
        for i, (k, v) in enumerate(kw.items()):
            total += v if k not in args else -v
        while total > LIMIT and not args:
            total //= 2
        else:
            total = total ** 2 if total else 0
        try:
            self.size = total
        except (ValueError, TypeError) as exc:
            raise RuntimeError("é") from exc
        finally:
            pass
        with open(os.devnull) as fh:
            data = fh.read()[1:-1]
        if data:
            return lambda z=by: z * 2
        elif len(data) >= 3:
            return {k: v for k, v in kw.items() if v}
        return (yield_ := [x for x in []]) if False else f"{total!r:>{by}}"
'''


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_edit_of_every_line_of_the_corpus_parses(path: Path) -> None:
    src = SourceFile(path.name, path.read_bytes())
    edits = [e for line in sorted(set(src.heads.values())) for e in edits_at(src, line)]
    assert edits
    for edit in edits:
        ast.parse(edit.apply(src.source))  # raises if an operator produced broken text


def test_every_edit_of_tricky_code_parses_and_most_compile() -> None:
    src = src_of(TRICKY)
    edits = [e for line in sorted(set(src.heads.values())) for e in edits_at(src, line)]
    assert {e.family for e in edits} == set(FAMILIES)
    refused = []
    for edit in edits:
        new = edit.apply(src.source)
        tree = ast.parse(new)
        problem = check(src, edit)
        if problem is not None:
            refused.append((edit.operator, problem))
        else:
            compile(tree, "m.py", "exec")
    # Only statement copies may land where they cannot compile (a copied `return` outside...).
    assert all(op.startswith("copy") or "no AST node" in why for op, why in refused), refused
