"""The fast CEL path: the compiled extension without the package's command-line tool.

If a new ``common-expression-language`` release moves its extension, these fail (the loader
would silently fall back to the slow ``import cel``, costing ~0.1-0.35 s per run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

from gputriage.playbook.cel_runtime import extension_path

#: Modules of the package's CLI that the fast path must never import.
CLI_MODULES = ("cel.cli", "typer", "prompt_toolkit", "pygments")


def _fresh(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_the_installed_version_is_the_pinned_range() -> None:
    major, minor = (int(x) for x in metadata.version("common-expression-language").split(".")[:2])
    assert (major, minor) == (0, 10), "re-check cel_runtime's layout before moving the pin"


def test_the_extension_is_found_without_importing_the_package() -> None:
    result = _fresh(
        "import json, sys\n"
        "from gputriage.playbook.cel_runtime import extension_path\n"
        "path = extension_path()\n"
        "print(json.dumps({'path': str(path), 'cel': 'cel' in sys.modules}))\n"
    )
    assert result["path"].endswith(".so") or result["path"].endswith(".pyd")
    assert result["cel"] is False
    assert extension_path() is not None


def test_conditions_compile_and_run_without_the_cli_modules() -> None:
    result = _fresh(
        "import json, sys\n"
        "from gputriage.playbook.conditions import compile_condition, new_context\n"
        "c = compile_condition('pod.phase == \"Pending\" && kernel.xids.exists(x, x == 79)')\n"
        "ctx = new_context({'pod': {'phase': 'Pending'}, 'kernel': {'xids': [13, 79]}})\n"
        "print(json.dumps({'value': c.program.execute(ctx),\n"
        "                  'vars': sorted(c.program.variables()),\n"
        "                  'loaded': sorted(m for m in sys.modules\n"
        "                                   if m.split('.')[0] in ('cel', 'typer',\n"
        "                                   'prompt_toolkit', 'pygments'))}))\n"
    )
    assert result["value"] is True
    assert {"kernel", "pod"} <= set(result["vars"])
    assert result["loaded"] == ["cel.cel"]


def test_a_later_import_cel_reuses_the_same_extension() -> None:
    result = _fresh(
        "import json\n"
        "from gputriage.playbook.cel_runtime import cel_module\n"
        "fast = cel_module()\n"
        "import cel\n"
        "print(json.dumps({'same': cel.compile is fast.compile,\n"
        "                  'value': cel.evaluate('1 + 2 == 3')}))\n"
    )
    assert result == {"same": True, "value": True}


def test_after_import_cel_the_loaded_module_is_used() -> None:
    result = _fresh(
        "import json, cel\n"
        "from gputriage.playbook.cel_runtime import cel_module\n"
        "print(json.dumps({'same': cel_module().compile is cel.compile}))\n"
    )
    assert result == {"same": True}
