"""Prompt templates, their rendering, the tool schemas offered to the model, and text-mode parsing.

Templates are plain text in which ``{name}`` is replaced for the known names only (other braces,
as in code or JSON, are left alone); an unknown ``{name}`` is refused when the config is
validated, so a typo does not reach the model silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr

__all__ = [
    "DEFAULT_PROMPTS",
    "PLACEHOLDERS",
    "Prompts",
    "TextAction",
    "cut_middle",
    "format_history",
    "format_siblings",
    "parse_text_reply",
    "render",
    "tool_schemas",
]

PLACEHOLDERS = (
    "task",
    "feedback",
    "history",
    "siblings",
    "instructions",
    "max_steps",
    "attempt",
)
"""Names a template may use (see ``Prompts``)."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

_SYSTEM = """\
You are a careful software engineer working in a real code repository. You act only through \
the tools you are given; every path is relative to the repository root. Read the relevant code \
before you change it, make focused edits, and check them with run_tests. When the tests pass, \
or when you have done what you can, call finish with a one-line summary. You have at most \
{max_steps} turns.
{instructions}"""

_TASK = """\
{task}

{feedback}

How the code got to its current state:
{history}
{siblings}"""

_FEEDBACK = """\
Test results of the current code:
{feedback}"""

_SIBLINGS = """
Other attempts already made from this same state (do something different from them):
{siblings}"""

_TEXT_MODE = """
You have no tools. Answer every turn with a short thought and then exactly one fenced shell \
block, for example:

```bash
sed -n 1,40p src/module.py
```

The block runs in the repository root and you get its output back. Edit files with shell \
commands (sed, a heredoc, python). A block that holds only `run_tests` runs the test suite; a \
block that holds only `finish` ends your work."""


def _known_placeholders(text: str) -> str:
    for found in _PLACEHOLDER.findall(text):
        if found not in PLACEHOLDERS:
            raise ValueError(
                f"unknown placeholder {{{found}}}; known: "
                + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            )
    return text


_Template = Annotated[StrictStr, AfterValidator(_known_placeholders), Field(description="text")]


class Prompts(BaseModel):
    """The prompt templates (config ``prompts:``, validated with the strategy). Each may use
    ``{task}``, ``{feedback}``, ``{history}``, ``{siblings}``, ``{instructions}``,
    ``{max_steps}`` and ``{attempt}``; any other ``{name}`` is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: _Template = _SYSTEM
    """The system message. ``{instructions}`` is the strategy's ``instructions`` field."""
    task: _Template = _TASK
    """The first user message. ``{feedback}`` is the rendered ``feedback`` template,
    ``{siblings}`` the rendered ``siblings`` template (empty on a node's first expansion),
    ``{history}`` the path from the root, one line per edge."""
    feedback: _Template = _FEEDBACK
    """Wraps test results, both in the task message and as the ``run_tests`` tool's answer;
    here ``{feedback}`` is the raw test feedback text."""
    siblings: _Template = _SIBLINGS
    """The account of earlier expansions of the same node; here ``{siblings}`` is the list."""
    text_mode: _Template = _TEXT_MODE
    """Appended to the system message in text-only mode (``mode: text``)."""


DEFAULT_PROMPTS = Prompts()
"""The built-in templates."""


def render(template: str, values: Mapping[str, object]) -> str:
    """Replace ``{name}`` for the names in ``values``; every other brace stays as it is."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(values[name]) if name in values else match.group(0)

    return _PLACEHOLDER.sub(sub, template)


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "not scored"


def format_history(history: Sequence[Mapping[str, Any]]) -> str:
    """One line per edge of the path from the root (``AgentContext.history``)."""
    if not history:
        return "This is the original code: no change has been made yet."
    lines = []
    for n, edge in enumerate(history, 1):
        parts = [f"{n}. {edge.get('strategy', '?')}: score {_score(edge.get('score'))}"]
        if edge.get("summary"):
            parts.append(f"tests {edge['summary']}")
        if edge.get("diffstat"):
            parts.append(f"changed {edge['diffstat']}")
        lines.append("; ".join(parts))
    return "\n".join(lines)


def format_siblings(siblings: Sequence[Mapping[str, Any]]) -> str:
    """One line per earlier expansion of this node (``AgentContext.siblings``)."""
    lines = []
    for sib in siblings:
        outcome = sib.get("outcome", "?")
        what = {
            "new": "reached a new state",
            "transposition": "reached a state found before",
            "noop": "changed nothing",
            "error": "failed with an error",
            "failed": "failed",
        }.get(str(outcome), str(outcome))
        line = f"- {sib.get('strategy', '?')}: {what}, score {_score(sib.get('score'))}"
        if sib.get("summary"):
            line += f" ({sib['summary']})"
        lines.append(line)
    return "\n".join(lines)


def _fn(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": required},
        },
    }


_PATH = {"type": "string", "description": "Path relative to the repository root."}


def tool_schemas(*, run_tests: bool) -> list[dict[str, Any]]:
    """The tools offered to the model, in OpenAI form (``run_tests`` only when available)."""
    tools = [
        _fn("read_file", "Read a text file.", {"path": _PATH}, ["path"]),
        _fn(
            "list_dir",
            "List a folder (folders end with '/').",
            {"path": {**_PATH, "description": "Folder relative to the root ('.' for the root)."}},
            [],
        ),
        _fn(
            "write_file",
            "Create or overwrite a file with the given content.",
            {"path": _PATH, "content": {"type": "string"}},
            ["path", "content"],
        ),
        _fn(
            "replace_in_file",
            "Replace text in a file; 'old' must occur exactly once (include enough context).",
            {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}},
            ["path", "old", "new"],
        ),
        _fn(
            "run",
            "Run a shell command in the repository root; returns the exit code and output.",
            {
                "command": {"type": "string"},
                "timeout": {"type": "number", "description": "Seconds (optional)."},
            },
            ["command"],
        ),
    ]
    if run_tests:
        tools.append(
            _fn(
                "run_tests",
                "Run the project's test suite on the current code; returns the failing tests "
                "and the end of the error output.",
                {},
                [],
            )
        )
    tools.append(
        _fn(
            "finish",
            "End your work (when the tests pass, or when you cannot do more).",
            {"summary": {"type": "string", "description": "What you changed, in one line."}},
            ["summary"],
        )
    )
    return tools


@dataclass(frozen=True)
class TextAction:
    """What a text-mode reply asks for."""

    kind: str
    """``run`` (a shell command), ``run_tests``, ``finish``, or ``error`` (a format problem)."""
    text: str
    """The command for ``run``; the problem for ``error``; empty otherwise."""


_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def parse_text_reply(content: str | None) -> TextAction:
    """The one fenced block of a text-mode reply (a format error when there is not exactly one)."""
    blocks = _FENCE.findall(content or "")
    if len(blocks) != 1:
        return TextAction(
            "error",
            f"your reply holds {len(blocks)} fenced code blocks; it must hold exactly one "
            "(```bash ... ```), or one with only `finish` to end",
        )
    command = blocks[0].strip()
    if not command:
        return TextAction("error", "the code block is empty")
    if command in ("finish", "run_tests"):
        return TextAction(command, "")
    return TextAction("run", command)


_CUT_NOTE = "[... {n} characters cut ...]"


def cut_middle(text: str, limit: int) -> str:
    """``text`` cut in the middle to ``limit`` characters, with a note of how many were cut (the
    end of an output, errors and summaries, tends to matter more: it keeps 3/5 of the room)."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 5
    tail = limit - head
    return f"{text[:head]}\n{_CUT_NOTE.format(n=len(text) - limit)}\n{text[len(text) - tail :]}"
