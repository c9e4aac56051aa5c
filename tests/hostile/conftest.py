"""The hostile-input suite: configuration, budget and the read-only proof.

* Every test under ``tests/hostile`` carries the ``hostile`` marker (``pytest -m hostile``).
* Fuzzing budget: ``GPUTRIAGE_FUZZ_EXAMPLES`` examples per property (see
  :mod:`tests.hostile.budget`; the default keeps the suite to a few minutes on 2 cores).
  The long run: ``GPUTRIAGE_FUZZ_EXAMPLES=10000 .venv/bin/pytest -m hostile tests/hostile``.
* No example database is written (the repo stays clean); a failure prints its example and
  the ``@reproduce_failure`` blob to paste.
* The read-only proof: at the end of the session no test API server saw anything but GET
  (the same session check the integration suite runs, reused from its conftest).
"""

from __future__ import annotations

import os

import pytest

from tests.hostile.budget import fuzz_examples
from tests.integration.conftest import _kube_api_reads_only  # noqa: F401  (session check)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "hostile: adversarial input (fuzzing, escapes, shell metacharacters, huge "
        "files, killed writers); budget via GPUTRIAGE_FUZZ_EXAMPLES",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    # The suite-wide 300 s timeout fits the default budget; a long run scales it.
    timeout = 300 + 0.2 * fuzz_examples()
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.hostile)
            if not item.get_closest_marker("timeout"):
                item.add_marker(pytest.mark.timeout(timeout))
