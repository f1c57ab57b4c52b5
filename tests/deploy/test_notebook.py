"""examples/walkthrough.ipynb, executed top to bottom in a Jupyter kernel (nbclient).

The kernel is its own process with its own SparkSession, pointed at the test
session's broker; what it prints is compared with tests/oracle.py's view of the
raw log (not with eoskafka reading its own output).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.oracle import assert_no_open_transactions, committed_values

pytestmark = pytest.mark.spark

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "walkthrough.ipynb"


def _printed(nb: nbformat.NotebookNode) -> str:
    """Everything the cells wrote to stdout/stderr, in order."""
    return "".join(
        out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
        for out in cell.get("outputs", []) if out.get("output_type") == "stream"
    )


def test_walkthrough_notebook_runs_top_to_bottom(
    bootstrap: str, unique: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EOSKAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("EOSKAFKA_NB_RUN", unique)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = _printed(nb)

    orders = committed_values(bootstrap, f"orders-{unique}")
    clean = committed_values(bootstrap, f"orders-clean-{unique}")
    assert len(orders) == 100 and not any(b"aborted" in (v or b"") for v in orders)
    assert Counter(clean) == Counter(
        (v or b"").replace(b'"new"', b'"clean"') for v in orders)
    assert f"committed orders read: {len(orders)}\n" in text
    assert f"rows written by the stream: {len(orders)}\n" in text
    assert f"committed output records: {len(clean)}\n" in text
    assert f"distinct output records: {len(clean)}\n" in text
    assert re.search(rf"OK: {len(clean)} committed, ", text), text  # eoskafka audit
    assert re.search(r"batch \d+: 0 offsets behind the last stable offset", text), text
    assert_no_open_transactions(bootstrap, f"orders-clean-{unique}")
