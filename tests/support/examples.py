"""How many examples a property test tries: all of them under CI (``CI=true``: the thorough profile),
a quarter of them otherwise (the quick profile, for the default run a developer waits for)."""

from __future__ import annotations

import os

from hypothesis import settings

THOROUGH = os.environ.get("CI", "").lower() in ("1", "true", "yes")
#: The quick profile keeps this share of each test's examples (at least MIN_QUICK).
QUICK_SHARE, MIN_QUICK = 4, 20

settings.register_profile("thorough", max_examples=100)
settings.register_profile("quick", max_examples=100 // QUICK_SHARE)
settings.load_profile("thorough" if THOROUGH else "quick")


def examples(count: int) -> int:
    """``count`` under the thorough profile; a quarter (at least 20) under the quick one."""
    return count if THOROUGH else max(MIN_QUICK, count // QUICK_SHARE)
