"""treesearch: branch search over a real codebase, each workspace state a git tree hash."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
