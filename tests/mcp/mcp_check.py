"""`hookbox mcp` driven by the official MCP Python SDK (from PyPI): list the tools, call each,
see a hook deny arrive as a tool error with the gate's reason, over stdio and streamable HTTP.
Usage: mcp_check.py HOOKBOX_BIN DATA_DIR FIXTURES_DIR. Ends with `N passed, M failed`."""

import asyncio
import json
import os
import re
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

hookbox, data, fixtures = sys.argv[1], sys.argv[2], sys.argv[3]
REASON = "Destructive command blocked by security gate."
TOOLS = {"code_execution", "view_file", "write_to_file", "replace_file_content", "list_dir", "delete_file"}
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok  " if ok else "FAIL"), name, "" if ok else detail, flush=True)


def text(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def field(obj, *names):
    """The first of `names` the SDK's model has (it moved from camelCase to snake_case)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError(names)


def is_error(result):
    return bool(field(result, "is_error", "isError"))


async def exercise(session, label):
    await session.initialize()
    listed = await session.list_tools()
    names = {t.name for t in listed.tools}
    check(f"{label}: lists the six tools", names == TOOLS, names)
    schema = field(next(t for t in listed.tools if t.name == "code_execution"), "input_schema", "inputSchema")
    check(f"{label}: code_execution has its schema", "code" in schema.get("properties", {}), schema)

    r = await session.call_tool("write_to_file", {"path": "/workspace/notes.txt", "content": "alpha beta"})
    check(f"{label}: write_to_file", not is_error(r), text(r))
    r = await session.call_tool("view_file", {"path": "/workspace/notes.txt"})
    check(f"{label}: view_file", not is_error(r) and "alpha beta" in text(r), text(r))
    r = await session.call_tool("replace_file_content", {"path": "/workspace/notes.txt", "old_content": "beta", "new_content": "gamma"})
    check(f"{label}: replace_file_content", not is_error(r), text(r))
    r = await session.call_tool("list_dir", {"path": "/workspace"})
    check(f"{label}: list_dir", not is_error(r) and "notes.txt" in text(r), text(r))
    if label == "http":
        check(f"{label}: a hook's additional_context reaches the caller",
              "[context from hooks] the notes are drafts" in text(r), text(r))
    r = await session.call_tool("code_execution", {"code": "cat /workspace/notes.txt; id -u", "language": "bash"})
    check(f"{label}: code_execution runs in the sandbox", not is_error(r) and "alpha gamma" in text(r), text(r))
    r = await session.call_tool("delete_file", {"path": "/workspace/notes.txt"})
    check(f"{label}: delete_file", not is_error(r), text(r))
    r = await session.call_tool("code_execution", {"code": "rm -rf /tmp/forbidden", "language": "bash"})
    check(f"{label}: a hook deny is a tool error with the reason", is_error(r) and REASON in text(r), text(r))
    r = await session.call_tool("code_execution", {"code": "test -f /tmp/forbidden/keep && echo survived", "language": "bash"})
    check(f"{label}: the denied command did not run", "survived" in text(r), text(r))
    r = await session.call_tool("code_execution", {"code": "exit 3", "language": "bash"})
    check(f"{label}: a failing command is a tool error", is_error(r), text(r))
    # The kernel the sandbox runs on is the runtime asked for (HOOKBOX_RUNTIME, as hookbox reads).
    r = await session.call_tool("code_execution", {"code": "dmesg 2>&1 | head -1", "language": "bash"})
    gvisor = os.environ.get("HOOKBOX_RUNTIME", "namespaces") == "gvisor"
    check(f"{label}: runs on the {'gVisor' if gvisor else 'host'} kernel", ("Starting gVisor" in text(r)) == gvisor, text(r))


async def over_stdio():
    params = StdioServerParameters(
        command=hookbox,
        args=[
            "mcp", "--data-dir", data, "--disk-limit", "0",
            "--source", f"inline:.agents/hooks.json=@{fixtures}/hooks.json",
            "--source", f"inline:.agents/hooks-scripts/gate.py=@{fixtures}/gate.py",
            "--source", "inline:tmp/forbidden/keep=precious",
        ],
        # The SDK passes only a few variables by default; HOOKBOX_RUNTIME must reach hookbox.
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio")


async def over_http():
    # A workspace hooks file beside the gate: a post hook that gives the model context.
    context_hooks = os.path.join(data, "context-hooks.json")
    with open(context_hooks, "w") as f:
        json.dump({"ctx": {"post_tool_execution": [{"matcher": "list_dir", "hooks": [{"type": "command",
                   "command": "cat >/dev/null; echo '{\"additional_context\": \"the notes are drafts\"}'"}]}]}}, f)
    created = subprocess.run(
        [hookbox, "env", "create", "--data-dir", data, "--disk-limit", "0",
         "--source", f"inline:.agents/hooks.json=@{fixtures}/hooks.json",
         "--source", f"inline:.agents/hooks-scripts/gate.py=@{fixtures}/gate.py",
         "--source", f"inline:workspace/.agents/hooks.json=@{context_hooks}",
         "--source", "inline:tmp/forbidden/keep=precious"],
        capture_output=True, text=True, check=True)
    env_id = created.stdout.strip()
    server = subprocess.Popen(
        [hookbox, "mcp", "--data-dir", data, "--env-id", env_id, "--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in server.stderr:
            m = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
            if m:
                url = m.group(1)
                break
        check("http: the server says where it listens", url is not None)
        async with streamable_http_client(url) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await exercise(session, "http")
    finally:
        server.terminate()
        server.wait(timeout=30)


asyncio.run(over_stdio())
asyncio.run(over_http())
passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if all(results) else 1)
