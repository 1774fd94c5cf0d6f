"""A stock MCP client (the official Python SDK) against `baton mcp`.

Usage: mcp_client.py BATON WORKDIR MODE OUT
  BATON    the baton binary
  WORKDIR  a subdirectory of the repository; the server is started there and the client
           gives it as its root
  MODE     "up": list and call every tool, bad arguments included
           "down": the hub is unreachable: reads answer from the cached brief, writes queue
  OUT      a JSON file the Rust test reads (ids and answers)

Before starting the server it runs the SessionStart hook itself, so the conversation's
hooks and the MCP server share a parent (this process), as they share the agent's.
The environment (BATON_HOME, BATON_SERVER, HOME) comes from the Rust test.
"""

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
import mcp.types as types

BATON, WORKDIR, MODE, OUT = sys.argv[1:5]
TOOLS = {"brief", "remember", "forget", "recall", "sessions", "session", "checkpoint", "conflicts", "search",
         "reserve", "release", "reservations", "why"}


def text(result):
    return "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)


async def roots(_context):
    return types.ListRootsResult(roots=[types.Root(uri=pathlib.Path(WORKDIR).as_uri())])


async def expect_bad(session, tool, args, says):
    """Bad arguments: a tool error the model reads (the specification's input validation),
    saying what to fix."""
    result = await session.call_tool(tool, args)
    message = text(result)
    assert result.is_error, f"{tool} {args} was accepted: {message!r}"
    assert says in message, f"{tool} {args}: {message!r} should say {says!r}"
    return message


async def call(session, tool, args):
    started = time.monotonic()
    result = await session.call_tool(tool, args)
    elapsed = time.monotonic() - started
    assert elapsed < 15, f"{tool} took {elapsed:.1f}s"
    return result, text(result)


async def main():
    out = {}
    hook = subprocess.run(
        [BATON, "hook", "claude", "SessionStart"],
        input=json.dumps({"session_id": f"mcp-{MODE}", "cwd": WORKDIR, "hook_event_name": "SessionStart", "source": "startup"}),
        capture_output=True, text=True, cwd=WORKDIR, check=True,
    )
    out["hook"] = hook.stdout
    params = StdioServerParameters(command=BATON, args=["mcp", "--agent", "claude"], cwd=WORKDIR, env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, list_roots_callback=roots) as session:
            await session.initialize()
            listed = await session.list_tools()
            names = {t.name for t in listed.tools}
            assert names == TOOLS, names
            for t in listed.tools:
                assert t.description and len(t.description) > 40, t
                assert t.input_schema.get("type") == "object", t
            if MODE == "down":
                result, brief = await call(session, "brief", {})
                assert not result.is_error and "unreachable" in brief, brief
                out["brief"] = brief
                result, said = await call(session, "remember", {"category": "open_loop", "text": "retry the flaky upload"})
                assert not result.is_error and "queued" in said, said
                result, said = await call(session, "recall", {})
                assert "unreachable" in said, said
                print("mcp client ok (hub down)")
                pathlib.Path(OUT).write_text(json.dumps(out))
                return

            result, said = await call(session, "remember", {
                "category": "decision", "text": "Use SQLite for the local cache",
                "rationale": "one file, no server to run"})
            assert not result.is_error and "Remembered as a decision" in said, said
            result, said = await call(session, "remember", {"category": "constraint", "text": "no new dependencies"})
            assert "Remembered" in said, said
            result, said = await call(session, "remember", {"category": "constraint", "text": "no new dependencies"})
            assert "already holds" in said, said
            for i in range(4):
                result, said = await call(session, "remember", {"category": "constraint", "text": f"rule {i}"})
                assert not result.is_error, said
            result, said = await call(session, "remember", {"category": "constraint", "text": "one rule too many"})
            assert result.is_error and "not remembered" in said and "5" in said, said
            out["over_cap"] = said
            result, said = await call(session, "remember", {"category": "note", "key": "deploy", "text": "tag, then push"})
            assert "Remembered as a note" in said, said

            result, recalled = await call(session, "recall", {"category": "decision"})
            assert "Use SQLite for the local cache" in recalled and "one file, no server" in recalled, recalled
            result, everything = await call(session, "recall", {})
            assert "no new dependencies" in everything and "[note deploy]" in everything, everything
            out["recall"] = everything

            result, brief = await call(session, "brief", {"budget": 4000})
            assert "Use SQLite for the local cache" in brief, brief
            out["brief"] = brief

            result, listed_sessions = await call(session, "sessions", {"status": ["active"]})
            assert "this session" in listed_sessions, listed_sessions
            own = [l for l in listed_sessions.splitlines() if "this session" in l][0].split()[1]
            result, said = await call(session, "checkpoint", {
                "reason": "before switching storage",
                "tasks": [{"content": "port the cache to SQLite", "status": "in_progress"},
                          {"content": "write the migration", "status": "pending"}],
                "decisions": [{"decision": "keep the old cache readable", "rationale": "rollback"}],
                "open_questions": ["how big do caches get?"]})
            assert not result.is_error and "Saved a checkpoint" in said, said
            result, shown = await call(session, "session", {"id": own})
            for part in ["port the cache to SQLite", "(pending) write the migration", "keep the old cache readable", "how big do caches get?"]:
                assert part in shown, (part, shown)
            out["session"] = shown
            result, listed_sessions = await call(session, "sessions", {})
            assert "task (in_progress): port the cache to SQLite" in listed_sessions, listed_sessions
            result, found = await call(session, "search", {"query": "sqlite cache", "limit": 20})
            assert not result.is_error and "**SQLite**" in found and "port the **cache**" in found, found
            out["search"] = found
            result, found = await call(session, "search", {"query": "nothing-like-this"})
            assert not result.is_error and "No hits" in found, found
            result, said = await call(session, "conflicts", {})
            assert not result.is_error and "conflicts" in said.lower(), said

            # Reservations, for the conversation's own session, paths relative to where it works.
            result, said = await call(session, "reserve", {"paths": ["lib.rs"], "tasks": ["#12"], "reason": "porting the cache"})
            assert not result.is_error and "src/deep/lib.rs" in said, said
            result, said = await call(session, "reservations", {"paths": ["."]})
            assert "src/deep/lib.rs held" in said and "(this session)" in said and "porting the cache" in said, said
            out["reservations"] = said
            result, said = await call(session, "release", {"tasks": ["#12"]})
            assert not result.is_error and 'Released task "#12"' in said, said
            await expect_bad(session, "reserve", {"paths": ["../../../etc/passwd"]}, "outside the repository")
            await expect_bad(session, "reserve", {}, "at least one path or task")
            await expect_bad(session, "reserve", {"tasks": ["x"], "wait_seconds": 601}, "600")

            # Why: a commit the conversation's shell call made, explained to the agent.
            pathlib.Path(WORKDIR, "cache.rs").write_text("pub fn cache_get(key: &str) -> Option<String> {\n    None\n}\n")
            bash = {"session_id": f"mcp-{MODE}", "cwd": WORKDIR, "tool_name": "Bash",
                    "tool_input": {"command": "git commit -m cache"}, "tool_response": {"stdout": ""}}
            subprocess.run([BATON, "hook", "claude", "PreToolUse"], input=json.dumps({**bash, "hook_event_name": "PreToolUse"}),
                           capture_output=True, text=True, cwd=WORKDIR, check=True)
            git_env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
            subprocess.run(["git", "add", "cache.rs"], cwd=WORKDIR, check=True, env=git_env)
            subprocess.run(["git", "commit", "-qm", "Add the cache"], cwd=WORKDIR, check=True, env=git_env)
            subprocess.run([BATON, "hook", "claude", "PostToolUse"], input=json.dumps({**bash, "hook_event_name": "PostToolUse"}),
                           capture_output=True, text=True, cwd=WORKDIR, check=True)
            result, said = await call(session, "why", {"file": "cache.rs", "first_line": 1})
            assert not result.is_error and "its commit was recorded in the session" in said and "the agent" in said, said
            assert "src/deep/cache.rs:1 " in said, said
            out["why"] = said
            result, said = await call(session, "why", {"file": "../../README"})
            assert not result.is_error and "no session recorded" in said, said
            await expect_bad(session, "why", {"file": "cache.rs", "first_line": 0}, "counted from 1")
            await expect_bad(session, "why", {"file": "cache.rs", "first_line": 9}, "past its end")
            await expect_bad(session, "why", {"file": "nothing.rs"}, "no such file")

            entry = [l for l in everything.splitlines() if "[note deploy]" in l][0].split("id ")[1].split(",")[0]
            result, said = await call(session, "forget", {"id": entry})
            assert "Forgot entry" in said, said
            result, said = await call(session, "recall", {"category": "note"})
            assert "tag, then push" not in said, said

            # Bad arguments: MCP errors that say what to fix.
            out["errors"] = [
                await expect_bad(session, "remember", {"category": "note", "text": "x"}, "needs a key"),
                await expect_bad(session, "remember", {"category": "wish", "text": "x"}, "expected one of `goal`"),
                await expect_bad(session, "remember", {"category": "goal", "text": "  "}, "empty"),
                await expect_bad(session, "remember", {"category": "goal", "text": "x", "rationale": "y"}, "decisions only"),
                await expect_bad(session, "remember", {"text": "x"}, "category"),
                await expect_bad(session, "remember", {"category": "goal", "text": "x", "colour": "red"}, "colour"),
                await expect_bad(session, "forget", {"id": "x"}, "not an entry id"),
                await expect_bad(session, "sessions", {"limit": 0}, "1 to 50"),
                await expect_bad(session, "sessions", {"status": ["sleeping"]}, "unknown status"),
                await expect_bad(session, "recall", {"category": "secrets"}, "unknown category"),
                await expect_bad(session, "brief", {"budget": 10}, "500 to 50000"),
                await expect_bad(session, "checkpoint", {"reason": "x", "tasks": [{"content": "a", "status": "done"}]}, "pending, in_progress or completed"),
                await expect_bad(session, "session", {"id": "abc"}, "too short"),
                await expect_bad(session, "search", {"query": "\"open"}, "never closed"),
                await expect_bad(session, "search", {"query": "-only"}, "only excludes"),
                await expect_bad(session, "search", {"query": "x", "kinds": ["wish"]}, "unknown kind"),
                await expect_bad(session, "search", {"query": "x", "limit": 0}, "1 to 50"),
            ]
            try:
                await session.call_tool("memorize", {})
                raise AssertionError("an unknown tool was accepted")
            except MCPError as e:
                assert "not found" in str(e), e
            result = await session.call_tool("forget", {"id": "0000000000000000"})
            assert result.is_error and "no memory entry" in text(result), text(result)
            out["own_session"] = own
    pathlib.Path(OUT).write_text(json.dumps(out))
    print("mcp client ok")


asyncio.run(main())
