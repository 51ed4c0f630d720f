"""Fix-pattern families of the mutation agent (``agents/mutation/patterns``): each edit is exact
(the whole file after it is spelled out) and leaves every byte outside its span as it was."""

from __future__ import annotations

import textwrap

import pytest

from treesearch.agents.mutation import SourceFile, check
from treesearch.agents.mutation.operators import Edit
from treesearch.agents.mutation.patterns import PATTERN_FAMILIES
from treesearch.agents.mutation.ranking import ALL_FAMILIES, edits_at_all, rank_key


def source(text: str) -> SourceFile:
    return SourceFile("prog.py", textwrap.dedent(text).encode("utf-8"))


def find(src: SourceFile, line: int, family: str, operator: str, text: str | None = None) -> Edit:
    found = [
        e
        for e in edits_at_all(src, line, [family])
        if e.operator == operator and (text is None or e.text == text)
    ]
    assert len(found) == 1, [e.operator for e in edits_at_all(src, line, [family])]
    return found[0]


def assert_exact(src: SourceFile, edit: Edit, expected: str) -> None:
    after = edit.apply(src.source)
    assert after.decode("utf-8") == textwrap.dedent(expected)
    # Nothing outside the edit's span moved.
    assert after[: edit.start] == src.source[: edit.start]
    assert after[edit.start + len(edit.text.encode("utf-8")) :] == src.source[edit.end :]
    assert check(src, edit) is None


# Comments and odd spacing around the edited line must survive byte for byte.
PROG = """\
def search(x, seq):  # keep me
    for i in range(len(seq)):
        if x <= seq[i] and   x > 0:
            return i
    # trailing comment
"""


def test_clause_drops_one_operand_of_an_and_condition() -> None:
    src = source(PROG)
    edit = find(src, 3, "clause", "drop clause 2")
    assert_exact(src, edit, PROG.replace("if x <= seq[i] and   x > 0:", "if x <= seq[i]:"))


def test_clause_adds_a_condition_written_elsewhere_in_the_function() -> None:
    src = source(
        """\
        def f(a, b):
            if a > 0:
                return 1
            while b < 3:
                b += 1
            return b
        """
    )
    edit = find(src, 2, "clause", "add clause: and b < 3")
    assert_exact(
        src,
        edit,
        """\
        def f(a, b):
            if a > 0 and b < 3:
                return 1
            while b < 3:
                b += 1
            return b
        """,
    )


def test_missing_return_is_added_after_a_statement_in_tail_position() -> None:
    src = source(PROG)
    edit = find(src, 2, "missing", "add `return len(seq)` at the end")
    assert_exact(
        src,
        edit,
        """\
        def search(x, seq):  # keep me
            for i in range(len(seq)):
                if x <= seq[i] and   x > 0:
                    return i
            return len(seq)
            # trailing comment
        """,
    )


def test_missing_return_is_not_offered_inside_a_loop_body() -> None:
    src = source(PROG)
    assert not edits_at_all(src, 3, ["missing"])  # the ``if`` is the last of the loop's body


def test_missing_return_after_an_if_else_at_the_end_of_the_function() -> None:
    src = source(
        """\
        def f(seq):
            if seq == []:
                return 0
            else:
                for e in seq:
                    pass
        """
    )
    edit = find(src, 5, "missing", "add `return 0` at the end")
    assert_exact(
        src,
        edit,
        """\
        def f(seq):
            if seq == []:
                return 0
            else:
                for e in seq:
                    pass
                return 0
        """,
    )


def test_wrapper_wraps_a_variable_in_len() -> None:
    src = source("def f(xs, n):\n    return n < xs\n")
    edit = find(src, 2, "wrapper", "wrap in len()", "len(xs)")
    assert_exact(src, edit, "def f(xs, n):\n    return n < len(xs)\n")


def test_wrapper_drops_an_extra_wrapper() -> None:
    src = source("def f(xs):\n    return int(xs[0])\n")
    edit = find(src, 2, "wrapper", "drop int()")
    assert_exact(src, edit, "def f(xs):\n    return xs[0]\n")


def test_method_swaps_append_for_extend() -> None:
    src = source("def f(a, b):\n    a.append(b)  # x\n    return a\n")
    edit = find(src, 2, "method", ".append -> .extend")
    assert_exact(src, edit, "def f(a, b):\n    a.extend(b)  # x\n    return a\n")


def test_method_turns_sort_into_sorted() -> None:
    src = source("def f(a):\n    b = a.sort(key=len)\n    return b\n")
    edit = find(src, 2, "method", "x.sort() -> sorted(x)")
    assert_exact(src, edit, "def f(a):\n    b = sorted(a, key=len)\n    return b\n")


def test_method_assigns_a_discarded_sorted_result() -> None:
    src = source("def f(a):\n    sorted(a)\n    return a\n")
    edit = find(src, 2, "method", "sorted(x) -> x = sorted(x)")
    assert_exact(src, edit, "def f(a):\n    a = sorted(a)\n    return a\n")


def test_method_adds_and_drops_reverse_in_a_sort() -> None:
    src = source("def f(a):\n    return sorted(a, key=abs)\n")
    edit = find(src, 2, "method", "sorted(..., reverse=True)")
    assert_exact(src, edit, "def f(a):\n    return sorted(a, key=abs, reverse=True)\n")
    src = source("def f(a):\n    a.sort(reverse=True, key=abs)\n")
    edit = find(src, 2, "method", "sort: drop reverse")
    assert_exact(src, edit, "def f(a):\n    a.sort(key=abs)\n")


def test_method_turns_an_augmented_concatenation_into_append() -> None:
    src = source("def f(a, i):\n    a += i\n    return a\n")
    edit = find(src, 2, "method", "+= -> .append()")
    assert_exact(src, edit, "def f(a, i):\n    a.append(i)\n    return a\n")


def test_method_swaps_a_builtin() -> None:
    src = source("def f(a):\n    return min(a)\n")
    edit = find(src, 2, "method", "call min -> sum")
    assert_exact(src, edit, "def f(a):\n    return sum(a)\n")


def test_structure_swaps_an_empty_container_for_another() -> None:
    src = source("def f():\n    seen = []  # c\n    return seen\n")
    edit = find(src, 2, "structure", "[] -> set()")
    assert_exact(src, edit, "def f():\n    seen = set()  # c\n    return seen\n")


def test_structure_turns_a_list_literal_into_a_tuple() -> None:
    src = source("def f(a):\n    return [a]\n")
    edit = find(src, 2, "structure", "list -> tuple")
    assert_exact(src, edit, "def f(a):\n    return (a,)\n")


def test_offbyone_shifts_a_compared_expression_with_parentheses_when_needed() -> None:
    src = source("def f(i, xs):\n    return i * 2 < len(xs)\n")
    edit = find(src, 2, "offbyone", "expression -1", "len(xs) - 1")
    assert_exact(src, edit, "def f(i, xs):\n    return i * 2 < len(xs) - 1\n")


def test_offbyone_leaves_sequences_alone_when_typed() -> None:
    src = source("def f(i, xs):\n    for x in xs:\n        pass\n    return xs == i\n")
    typed = [e.text for e in edits_at_all(src, 4, ["offbyone"], typed=True)]
    untyped = [e.text for e in edits_at_all(src, 4, ["offbyone"])]
    assert "xs + 1" in untyped and "xs + 1" not in typed and "i + 1" in typed


def test_retval_returns_a_constant_instead() -> None:
    src = source("def f(xs):\n    return xs[0]\n")
    edit = find(src, 2, "retval", "return 0")
    assert_exact(src, edit, "def f(xs):\n    return 0\n")


def test_variable_replaces_an_undefined_name_by_the_closest_variable_first() -> None:
    src = source(
        """\
        def f(lst):
            new_lst = []
            for item in lst:
                new_list.append(item)
            return new_lst
        """
    )
    edits = edits_at_all(src, 4, ["variable"])
    assert edits[0].operator == "undefined new_list -> new_lst" and edits[0].weight == 1.0
    assert_exact(
        src,
        edits[0],
        """\
        def f(lst):
            new_lst = []
            for item in lst:
                new_lst.append(item)
            return new_lst
        """,
    )
    assert not edits_at_all(src, 5, ["variable"])  # defined names are the ``name`` family's


def test_variable_replaces_a_hard_coded_slice_bound_by_a_parameter() -> None:
    src = source("def top(xs, k):\n    return xs[:3]\n")
    edit = find(src, 2, "variable", "3 -> k")
    assert_exact(src, edit, "def top(xs, k):\n    return xs[:k]\n")


def test_name_swaps_against_a_variables_kind_are_left_out_when_typed() -> None:
    src = source("def f(seq, n):\n    for x in seq:\n        n += 1\n    return n\n")
    typed = {e.operator for e in edits_at_all(src, 4, ["return", "name"], typed=True)}
    untyped = {e.operator for e in edits_at_all(src, 4, ["return", "name"])}
    assert "n -> seq" in untyped and "n -> seq" not in typed and "n -> x" in typed


@pytest.mark.parametrize("family", PATTERN_FAMILIES)
def test_every_pattern_edit_splices_only_its_own_span(family: str) -> None:
    text = textwrap.dedent(
        """\
        LIMIT = 3


        def pick(xs, k):  # comment
            out = []
            if not xs or k < 0:
                return None
            for i in range(len(xs)):
                if xs[i] > LIMIT and i < k:
                    out.append(xs[i])
            out.sort()
            return out[:3]


        def tail(xs):
            for x in xs:
                if x:
                    return x


        def drain(xs):
            for x in xs:
                xs.remove(x)
                acc.append(x)
            xs.sort
            return acc


        def first(x, seq):
            top = seq[0]
            for i in seq:
                top == seq[0]
                if i > x:
                    return i
                else:
                    return len(seq)
            rest = seq.sort()
            return rest


        def top(xs, k):
            n = 0
            out = []
            while n < k:
                out.append(xs.pop[0])
            return out
        """
    )
    src = SourceFile("prog.py", text.encode("utf-8"))
    count = 0
    for line in sorted(set(src.heads.values())):
        for edit in edits_at_all(src, line, [family]):
            after = edit.apply(src.source)
            assert after[: edit.start] == src.source[: edit.start]
            assert after[len(after) - (len(src.source) - edit.end) :] == src.source[edit.end :]
            count += 1
    assert count > 0


def test_ranked_order_puts_the_smaller_change_first_among_equals() -> None:
    src = source("def f(a, b):\n    return a - b\n")
    edits = [e for e in edits_at_all(src, 2, ALL_FAMILIES) if e.family in ("arith", "missing")]
    small = next(e for e in edits if e.operator == "- -> +")
    key_small = rank_key(1.0, small, 1.0)
    bigger = Edit(small.path, 2, "arith", "x", small.start, small.end, "a + b + 0")
    assert key_small < rank_key(1.0, bigger, 1.0)


def test_init_adds_the_missing_initialisation_of_an_accumulator_at_the_top() -> None:
    src = source(
        '''\
        def oldest_first(lst):
            """Doc."""
            while lst:
                best = max(lst)
                lst.remove(best)
                order.append(best)  # keep
            return order
        '''
    )
    edits = edits_at_all(src, 6, ["init"])
    assert edits[0].operator == "initialise order = []" and edits[0].weight == 1.0
    assert_exact(
        src,
        edits[0],
        '''\
        def oldest_first(lst):
            """Doc."""
            order = []
            while lst:
                best = max(lst)
                lst.remove(best)
                order.append(best)  # keep
            return order
        ''',
    )
    assert {e.operator for e in edits} >= {"initialise order = 0", "initialise order = set()"}


def test_init_values_follow_the_use_and_a_near_spelling_halves_them() -> None:
    src = source("def f(xs):\n    for x in xs:\n        total += x\n    return total\n")
    edit = edits_at_all(src, 3, ["init"])[0]
    assert_exact(
        src,
        edit,
        "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n",
    )
    typo = source("def f(xs):\n    new_lst = []\n    new_list.append(1)\n    return new_lst\n")
    assert edits_at_all(typo, 3, ["init"])[0].weight == 0.5
    # A name read but never accumulated into is a misspelling, not a missing initialisation.
    assert not edits_at_all(source("def f(xs):\n    return lenght\n"), 2, ["init"])


def test_iterate_loops_over_a_copy_of_a_list_the_body_removes_from() -> None:
    text = (
        "def f(lst):\n    out = []\n    for i in lst:  # c\n        lst.remove(i)\n    return out\n"
    )
    src = source(text)
    edit = find(src, 3, "iterate", "iterate over a copy")
    assert_exact(src, edit, text.replace("for i in lst:", "for i in lst[:]:"))
    untouched = source("def f(lst):\n    for i in lst:\n        print(i)\n")
    assert not edits_at_all(untouched, 2, ["iterate"])


def test_call_calls_a_method_named_as_a_statement() -> None:
    text = "def f(xs):\n    if xs:\n        xs.pop  # drop\n    return xs\n"
    src = source(text)
    edit = find(src, 3, "call", "call it")
    assert_exact(src, edit, text.replace("xs.pop  #", "xs.pop()  #"))
    assert not edits_at_all(source("def f(xs):\n    xs.pop()\n"), 2, ["call"])


def test_indent_moves_the_tail_of_a_loop_body_out_of_the_loop() -> None:
    text = textwrap.dedent(
        """\
        def f(lst):
            out = []
            while lst:
                best = lst[0]
                for x in lst:
                    if x > best:
                        best = x
                    lst.remove(best)
                    # moved too
                    out.append(best)
            return out
        """
    )
    src = source(text)
    edit = find(src, 8, "indent", "dedent 2 statement(s) out of the loop")
    expected = text.replace(
        "            lst.remove(best)\n            # moved too\n            out.append(best)\n",
        "        lst.remove(best)\n        # moved too\n        out.append(best)\n",
    )
    assert_exact(src, edit, expected)
    one = find(src, 10, "indent", "dedent 1 statement(s) out of the loop")
    assert one.weight == 1.0 and edit.weight < 1.0
    assert not edits_at_all(src, 6, ["indent"])  # the first statement of a body stays


def test_variable_renames_an_undefined_name_at_all_its_uses() -> None:
    text = textwrap.dedent(
        """\
        def unique(date, days):
            n = 0
            for d in days:
                if d == day:
                    n += 1
                elif d != day:
                    n += 0
            return n == 1
        """
    )
    src = source(text)
    edit = find(src, 4, "variable", "undefined day -> date at its 2 uses")
    assert_exact(src, edit, text.replace("day:", "date:"))


def test_variable_prefers_the_parameter_the_function_never_reads() -> None:
    src = source("def top(xs, k, n):\n    return sorted(xs)[:3] if n else []\n")
    unused = find(src, 2, "variable", "3 -> k")
    used = find(src, 2, "variable", "3 -> n")
    assert unused.weight == 1.0 and used.weight == 0.5


def test_edits_at_all_lists_a_line_once_per_file_content_and_then_reuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression (issue 15, repair throughput): the agent listed the same line's edits twice per
    expansion and again at every expansion of a node; the listing is now kept per (path, bytes,
    line, families, typed), and a reused one equals a fresh one."""
    from treesearch.agents.mutation import ranking

    computed: list[tuple[str, int]] = []
    real = ranking._edits_at_all

    def counting(src: SourceFile, line: int, chosen: frozenset[str], typed: bool) -> list[Edit]:
        computed.append((src.path, line))
        return real(src, line, chosen, typed)

    monkeypatch.setattr(ranking, "_edits_at_all", counting)
    text = "def total(xs):\n    s = 1\n    for x in xs:\n        s += x\n    return s\n"
    first = edits_at_all(SourceFile("memo_prog.py", text.encode()), 2, ALL_FAMILIES, typed=True)
    # Another parse of the same bytes (as the next expansion makes): listed from the memo.
    again_src = SourceFile("memo_prog.py", text.encode())
    again = edits_at_all(again_src, 2, ALL_FAMILIES, typed=True)
    assert computed == [("memo_prog.py", 2)]
    assert again == first == real(again_src, 2, frozenset(ALL_FAMILIES), True)
    again.clear()  # the caller's list is its own
    assert edits_at_all(again_src, 2, ALL_FAMILIES, typed=True) == first
    # Other families, typed, line or bytes are other listings.
    edits_at_all(again_src, 2, ["constant"], typed=True)
    edits_at_all(again_src, 2, ALL_FAMILIES, typed=False)
    edits_at_all(again_src, 4, ALL_FAMILIES, typed=True)
    changed = SourceFile("memo_prog.py", text.replace("s = 1", "s = 0").encode())
    fixed = edits_at_all(changed, 2, ALL_FAMILIES, typed=True)
    assert len(computed) == 5
    assert fixed != first and all(e.apply(changed.source) != changed.source for e in fixed)


def test_exit_moves_the_final_else_of_a_loop_after_the_loop() -> None:
    text = textwrap.dedent(
        """\
        def search(x, seq):
            for i in range(len(seq)):
                if x <= seq[i]:
                    return i
                elif x < 0:  # negative
                    return -1
                else:
                    # past this item
                    return len(seq)
            pass
        """
    )
    src = source(text)
    edit = find(src, 3, "exit", "move the loop's final else after the loop")
    expected = text.replace(
        "        else:\n            # past this item\n            return len(seq)\n",
        "    # past this item\n    return len(seq)\n",
    )
    assert_exact(src, edit, expected)
    # An else that does not return (the loop goes on), or an if that is not last: no edit.
    assert not edits_at_all(
        source(
            "def f(xs):\n    for x in xs:\n        if x:\n            return x\n"
            "        else:\n            x += 1\n"
        ),
        3,
        ["exit"],
    )
    assert not edits_at_all(
        source(
            "def f(xs):\n    for x in xs:\n        if x:\n            return x\n"
            "        else:\n            return 0\n        x += 1\n"
        ),
        3,
        ["exit"],
    )


def test_exit_without_a_newline_at_the_end_of_the_file() -> None:
    text = "def f(xs):\n    for x in xs:\n        if x:\n            return x\n        else:\n            return 0"
    src = source(text)
    edit = find(src, 3, "exit", "move the loop's final else after the loop")
    assert_exact(
        src, edit, "def f(xs):\n    for x in xs:\n        if x:\n            return x\n    return 0"
    )


def test_guard_returns_early_for_an_empty_parameter() -> None:
    text = "def f(seq, x):\n    first = seq[0]\n    if x < first:\n        return 0\n    return first\n"
    src = source(text)
    ops = {e.operator: e for e in edits_at_all(src, 2, ["guard"])}
    assert "guard empty seq: return seq" in ops and "guard empty seq: return 0" in ops
    assert "guard empty seq: return first" not in ops  # a local not bound yet
    assert ops["guard empty seq: return seq"].weight > ops["guard empty seq: return []"].weight
    edit = ops["guard empty seq: return 0"]
    assert_exact(
        src, edit, text.replace("    first =", "    if not seq:\n        return 0\n    first =", 1)
    )
    # In a loop, leaving the loop is an option; a local's index is no parameter's emptiness.
    loop = source(
        "def f(xs):\n    out = []\n    while True:\n        out.append(max(xs))\n    return out\n"
    )
    assert "guard empty xs: break" in {e.operator for e in edits_at_all(loop, 4, ["guard"])}
    assert not edits_at_all(source("def f(xs):\n    ys = xs\n    return ys[0]\n"), 3, ["guard"])


def test_effect_turns_a_dropped_value_into_the_assignment() -> None:
    text = "def f(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n            best  - x\n    return best\n"
    src = source(text)
    edit = find(src, 5, "effect", "- -> =")
    assert_exact(src, edit, text.replace("best  - x", "best = x"))
    eq = source("def f(a):\n    b = 0\n    b == a\n    return b\n")
    assert_exact(
        eq, find(eq, 3, "effect", "== -> ="), "def f(a):\n    b = 0\n    b = a\n    return b\n"
    )
    inc = source("def f(n):\n    n + 1\n    return n\n")
    assert_exact(inc, find(inc, 2, "effect", "+ -> +="), "def f(n):\n    n += 1\n    return n\n")
    assert not edits_at_all(source("def f(xs):\n    print(xs)\n"), 2, ["effect"])


def test_inplace_calls_the_method_first_and_uses_its_receiver() -> None:
    text = "def f(lst, h):\n    if lst:\n        return [h] + f(lst.remove(h), h)  # rest\n    return []\n"
    src = source(text)
    edit = find(src, 3, "inplace", "call it first, use its receiver")
    assert_exact(
        src,
        edit,
        text.replace(
            "        return [h] + f(lst.remove(h), h)  # rest\n",
            "        lst.remove(h)\n        return [h] + f(lst, h)  # rest\n",
        ),
    )
    assign = source("def f(xs):\n    ys = xs.sort()\n    return ys\n")
    assert_exact(
        assign,
        find(assign, 2, "inplace", "call it as a statement, then assign its receiver"),
        "def f(xs):\n    xs.sort()\n    ys = xs\n    return ys\n",
    )
    assert_exact(
        assign,
        find(assign, 2, "inplace", "call it on the target"),
        "def f(xs):\n    ys.sort()\n    return ys\n",
    )
    same = source("def f(xs):\n    xs = xs.sort()\n    return xs\n")
    assert_exact(
        same,
        find(same, 2, "inplace", "call it as a statement"),
        "def f(xs):\n    xs.sort()\n    return xs\n",
    )
    assert not edits_at_all(source("def f(xs):\n    xs.sort()\n"), 2, ["inplace"])


def test_element_uses_the_loop_variable_for_a_fixed_item_of_the_collection() -> None:
    text = "def f(lst):\n    a, b = [], []\n    for i in lst:\n        a = a + [lst[0]]\n        b = b + [lst[0]]\n        lst = lst[1:]\n    return a, b\n"
    src = source(text)
    one = find(src, 4, "element", "lst[0] -> i")
    assert_exact(src, one, text.replace("a + [lst[0]]", "a + [i]"))
    both = find(src, 4, "element", "lst[0] -> i at its 2 uses in the loop")
    assert_exact(src, both, text.replace("[lst[0]]", "[i]"))
    assert not edits_at_all(source("def f(lst):\n    return lst[0]\n"), 2, ["element"])


def test_method_respells_a_method_no_type_has() -> None:
    text = "def f(lst, x):\n    lst.removal(x)\n    return lst\n"
    src = source(text)
    edit = find(src, 2, "method", "unknown .removal -> .remove")
    assert_exact(src, edit, text.replace(".removal(", ".remove("))
    # A method the module defines, or a name it imports, is not a misspelling.
    own = source("class A:\n    def removal(self):\n        pass\n\n\ndef f(a):\n    a.removal()\n")
    assert not [e for e in edits_at_all(own, 7, ["method"]) if "unknown" in e.operator]
    mod = source("import math\n\n\ndef f(x):\n    return math.sqroot(x)\n")
    assert not [e for e in edits_at_all(mod, 5, ["method"]) if "unknown" in e.operator]


def test_wrapper_makes_a_one_item_tuple_for_a_tuple_concatenation() -> None:
    text = "def f(xs):\n    days = ()\n    for d in xs:\n        days = days + d\n    return days\n"
    src = source(text)
    edit = find(src, 4, "wrapper", "wrap in ( ,)")
    assert_exact(src, edit, text.replace("days + d", "days + (d,)"))


def test_advance_steps_a_while_counter_the_body_never_changes() -> None:
    text = "def f(xs, k):\n    n = 0\n    out = []\n    while n < k:\n        out.append(xs[n])  # take\n    return out\n"
    src = source(text)
    edit = find(src, 4, "advance", "n += 1 at the end of the loop")
    assert_exact(src, edit, text.replace("  # take\n", "  # take\n        n += 1\n"))
    assert edit.weight > find(src, 4, "advance", "n -= 1 at the end of the loop").weight
    down = source("def f(k):\n    while k > 0:\n        print(k)\n")
    assert find(down, 2, "advance", "k -= 1 at the end of the loop").weight == 1.0
    # A counter the body changes (the limit, a parameter, stays), a body that leaves: no edit.
    assert not edits_at_all(
        source("def f(k):\n    n = 0\n    while n < k:\n        n = n + 2\n"), 3, ["advance"]
    )
    assert not edits_at_all(
        source("def f(k):\n    n = 0\n    while n < k:\n        return n\n"), 3, ["advance"]
    )


def test_call_calls_a_method_that_is_indexed_instead() -> None:
    text = "def f(xs):\n    return [xs.pop[0]]\n"
    src = source(text)
    assert_exact(
        src, find(src, 2, "call", "call it with the index"), text.replace("pop[0]", "pop(0)")
    )
    assert not edits_at_all(source("def f(d):\n    return d.items[0]\n"), 2, ["call"])


def test_init_gives_a_boolean_accumulator_its_neutral_value() -> None:
    text = "def f(xs):\n    for x in xs:\n        ok = ok or x > 0\n    return ok\n"
    src = source(text)
    edit = find(src, 3, "init", "initialise ok = False")
    assert edit.weight == 1.0
    assert_exact(src, edit, text.replace("    for x", "    ok = False\n    for x"))


def test_variable_respells_a_called_function_and_a_lowercase_constant() -> None:
    text = "def unique_day(d):\n    return d\n\n\ndef g(ds):\n    if unique_date(ds[0]):\n        return true\n    return False\n"
    src = source(text)
    call = find(src, 6, "variable", "undefined unique_date -> unique_day")
    assert call.weight == 1.0
    assert_exact(src, call, text.replace("unique_date(", "unique_day("))
    assert_exact(
        src,
        find(src, 7, "variable", "undefined true -> True"),
        text.replace("return true", "return True"),
    )
    # A called name spelled like nothing the module or the builtins define: no guess.
    assert not edits_at_all(source("def g(x):\n    return zzqy(x)\n"), 2, ["variable"])
