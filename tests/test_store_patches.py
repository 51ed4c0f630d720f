"""``store.patches``: the patch texts of many pairs of snapshots from one git process, the same
as ``ShadowStore.diff`` gives one pair at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from treesearch.errors import RefError
from treesearch.store import ShadowStore, patches


def test_patches_of_many_pairs_equal_one_diff_at_a_time_including_cut_ones(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("x = 1\n")
    store = ShadowStore.open(ws, home=tmp_path / "home")
    trees = [store.capture().tree]
    (ws / "a.py").write_text("x = 2\n")
    (ws / "b.txt").write_text("".join(f"line {i}\n" for i in range(5000)))  # ~44 KB
    trees.append(store.capture().tree)
    (ws / "b.txt").unlink()
    (ws / "c.bin").write_bytes(b"\0\1\2" * 100)
    (ws / "a.py").chmod(0o755)
    trees.append(store.capture().tree)
    pairs = [(a, b) for a in trees for b in trees]  # with identical pairs and both directions
    for cap in (1_000_000, 1000):
        got = patches(store, pairs, max_patch_bytes=cap)
        want = [
            (d.patch, d.truncated)
            for d in (store.diff(a, b, max_patch_bytes=cap) for a, b in pairs)
        ]
        assert got == want
    assert any(t for _, t in patches(store, pairs, max_patch_bytes=1000))
    assert patches(store, []) == []
    with pytest.raises(RefError, match="no snapshot matches"):  # as store.diff says
        patches(store, [(trees[0], "0" * 40)])
    store.close()
