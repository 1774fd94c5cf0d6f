"""A LangGraph graph that stops to ask a person, and is continued on another machine.

    python resume_elsewhere.py start support-42          # plans, then waits for approval: exits
    python resume_elsewhere.py resume support-42 yes     # anywhere: continues with the answer

The hub is configured as for the ``baton`` CLI (``~/.config/baton/config.toml``, or
``BATON_SERVER`` and ``BATON_TOKEN``); ``BATON_PROJECT`` names the project the threads live
in (default ``examples/langgraph``). Each command prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from baton_client.langgraph import BatonSaver


class State(TypedDict, total=False):
    request: str
    plan: str
    approved: bool
    result: str


def plan(state: State) -> State:
    return {"plan": f"refund order {state['request']}"}


def approve(state: State) -> State:
    answer = interrupt({"question": f"approve: {state['plan']}?"})
    return {"approved": answer == "yes"}


def act(state: State) -> State:
    return {"result": f"done: {state['plan']}" if state["approved"] else "cancelled"}


def graph(saver: BatonSaver):  # type: ignore[no-untyped-def]
    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("approve", approve)
    builder.add_node("act", act)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "approve")
    builder.add_edge("approve", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("start", "resume") or (argv[0] == "resume" and len(argv) < 3):
        print(__doc__, file=sys.stderr)
        return 2
    command, thread = argv[0], argv[1]
    saver = BatonSaver(os.environ.get("BATON_PROJECT", "examples/langgraph"))
    app = graph(saver)
    config = {"configurable": {"thread_id": thread}}
    if command == "start":
        out = app.invoke({"request": thread}, config)
        waiting = out.get("__interrupt__", [])
        print(json.dumps({"interrupted": [w.value for w in waiting], "plan": out.get("plan")}))
    else:
        out = app.invoke(Command(resume=argv[2]), config)
        print(json.dumps({"result": out.get("result"), "plan": out.get("plan")}))
    saver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
