"""Rewrite the golden graphs of ``tests/golden`` from the current code.

    python tests/update_golden.py            # every golden case
    python tests/update_golden.py calc-bfs.json calc-mcts.json

The only way the golden files change: the tests compare against them and never write them.
Review the diff (``git diff tests/golden``) before committing it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_search import GOLDEN, GOLDEN_CASES, build_golden_graph  # noqa: E402

from treesearch.search.graph import to_json  # noqa: E402


def main(argv: list[str]) -> int:
    names = argv or list(GOLDEN_CASES)
    unknown = [n for n in names if n not in GOLDEN_CASES]
    if unknown:
        print(f"unknown golden case(s): {', '.join(unknown)}; known: {', '.join(GOLDEN_CASES)}")
        return 2
    GOLDEN.mkdir(exist_ok=True)
    for name in names:
        with tempfile.TemporaryDirectory(prefix="treesearch-golden-") as tmp:
            got = to_json(build_golden_graph(name, Path(tmp)).graph, stable=True)
        path = GOLDEN / name
        old = path.read_text() if path.exists() else None
        path.write_text(got)
        print(f"{path}: {'unchanged' if old == got else 'written'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
