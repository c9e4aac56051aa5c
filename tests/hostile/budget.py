"""The fuzzing budget: ``GPUTRIAGE_FUZZ_EXAMPLES`` examples per property.

CI runs the bounded default; the long run sets e.g. ``GPUTRIAGE_FUZZ_EXAMPLES=10000``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: Examples per property when GPUTRIAGE_FUZZ_EXAMPLES is not set.
DEFAULT_EXAMPLES = 120


def fuzz_examples() -> int:
    raw = os.environ.get("GPUTRIAGE_FUZZ_EXAMPLES", "")
    try:
        return max(1, int(raw)) if raw.strip() else DEFAULT_EXAMPLES
    except ValueError:
        raise ValueError(f"GPUTRIAGE_FUZZ_EXAMPLES must be a number, got {raw!r}") from None


def fuzz(scale: float = 1.0) -> settings:
    """Hypothesis settings for one property: the budget times ``scale`` (for the costly
    properties: whole bundles through every fact builder and the engine)."""
    return settings(
        max_examples=max(1, int(fuzz_examples() * scale)),
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
        print_blob=True,
    )
