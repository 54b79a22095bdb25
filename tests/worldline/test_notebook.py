"""Execute docs/notebooks/browse.ipynb in a real Jupyter kernel and check what it shows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "notebooks" / "browse.ipynb"


@pytest.fixture
def kernel_in_this_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return kernel_spec(tmp_path, monkeypatch)


def kernel_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A `python3` kernelspec that runs this interpreter, found before any system-wide one.

    A fresh machine may have no kernelspec at all, or one for another Python without worldline; a
    spec under JUPYTER_PATH takes precedence over both.
    """
    spec_dir = tmp_path / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (worldline tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    return "python3"


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return str(output.get("text", ""))
    data = output.get("data", {})
    return str(data.get("text/html", "")) + str(data.get("text/plain", ""))


def test_browse_notebook_executes_and_shows_the_dataset(kernel_in_this_environment: str) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name=kernel_in_this_environment,
        timeout=180,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    outputs = ["".join(_text(o) for o in c.outputs) for c in code]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]

    assert "24 samples -> 7 trajectories" in outputs[0]
    assert "'turns'" in outputs[1] and "'source'" in outputs[1]
    counts = outputs[2]
    for domain in ("android", "mcp", "os", "search", "swe", "terminal", "web"):
        assert domain in counts
    per_trajectory = outputs[3]
    assert "shape: (7, 3)" in per_trajectory
    # The terminal trajectory is the longest (7 turns) and sorts first.
    plain = code[3].outputs[0]["data"]["text/plain"]
    rows = [line for line in plain.splitlines() if "awb-" in line]
    assert len(rows) == 7 and "terminal" in rows[0] and rows[0].rstrip(" │").endswith("7")
    assert "read_query" in outputs[4] and "Bash" in outputs[4]
    card = code[5].outputs[0]["data"]["text/html"]
    assert 'class="wl-traj"' in card
    assert "Sum the &#x27;amount&#x27; column" in card
    assert card.count('class="wl-turn"') == 7
    assert "9874.15" in outputs[6]


def test_browse_notebook_runs_on_a_pool_build_with_several_terminal_trajectories(
    kernel_in_this_environment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real build output: the eval pool of a `pools build` (several terminal trajectories of
    different lengths), browsed through WORLDLINE_DATASET; the card shows the longest one."""
    from typer.testing import CliRunner

    from schemas.shards import iter_trajectories
    from tests.helpers.pools_data import build_fixture
    from worldline.cli import app

    build_fixture(tmp_path)
    config = tmp_path / "pools.yaml"
    config.write_text("assignment:\n  by_kind: {infra: eval, public: cpt, knowledge: cpt, inhouse: eval}\n")
    out = tmp_path / "pools"
    args = ["pools", "build", "--in", str(tmp_path / "shards"), "--out", str(out), "--config", str(config)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    pooled = list(iter_trajectories(out / "eval"))
    terminal = sorted((t for t in pooled if t.domain.value == "terminal"), key=lambda t: -t.num_turns)
    assert len(terminal) > 1

    monkeypatch.setenv("WORLDLINE_DATASET", str(out / "eval"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name=kernel_in_this_environment, timeout=180).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert f"browsing {out / 'eval'}" in "".join(_text(o) for o in code[0].outputs)
    assert f"shape: ({len(pooled)}, 3)" in "".join(_text(o) for o in code[3].outputs)
    card = code[5].outputs[0]["data"]["text/html"]
    assert card.count('class="wl-turn"') == terminal[0].num_turns
