"""examples/resume_elsewhere.py: a graph stops at an interrupt on one machine and is
continued on another (another HOME, its own config file), through the hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="the langgraph test extra is not installed")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "resume_elsewhere.py"


def machine(home: Path, server: Any, token: str, project: str) -> dict[str, str]:
    """A machine set up for the baton CLI: its config file names the hub and the token."""
    config = home / ".config" / "baton"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(f'server = "{server.url}"\ntoken = "{token}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_") and k != "XDG_CONFIG_HOME"}
    return {**env, "HOME": str(home), "BATON_PROJECT": project}


def run(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_graph_stopped_at_an_interrupt_continues_on_another_machine(
    server: Any, admin_token: str, project: str, tmp_path: Path
) -> None:
    laptop = machine(tmp_path / "laptop", server, admin_token, project)
    desktop = machine(tmp_path / "desktop", server, admin_token, project)
    thread = f"order-{uuid.uuid4().hex[:8]}"
    started = run(laptop, "start", thread)
    assert started["interrupted"] == [{"question": f"approve: refund order {thread}?"}]
    resumed = run(desktop, "resume", thread, "yes")
    assert resumed == {"result": f"done: refund order {thread}", "plan": f"refund order {thread}"}
    # Another thread, answered no, from the first machine again.
    other = f"order-{uuid.uuid4().hex[:8]}"
    run(desktop, "start", other)
    assert run(laptop, "resume", other, "no")["result"] == "cancelled"
