"""A FastMCP server for the test: streamable HTTP on 127.0.0.1:PORT/mcp. Every call is
appended to CALLS (one JSON line: tool, arguments, and what the request's headers said).

argv: PORT CALLS
"""
import asyncio
import json
import sys

from mcp.server.fastmcp import Context, FastMCP

port, calls = int(sys.argv[1]), sys.argv[2]
server = FastMCP("docs", host="127.0.0.1", port=port)


def record(ctx, tool, args):
    headers = ctx.request_context.request.headers
    seen = {"key_ok": headers.get("x-api-key") == "sekrit-123", "injected": headers.get("x-injected")}
    with open(calls, "a") as f:
        f.write(json.dumps({"tool": tool, "args": args, **seen}) + "\n")
    return seen


@server.tool()
def search(query: str, ctx: Context) -> str:
    """Search the docs."""
    seen = record(ctx, "search", {"query": query})
    return f"3 results for {query} (key ok: {seen['key_ok']}, injected: {seen['injected']})"


@server.tool()
def secret(ctx: Context) -> str:
    """Not for the model."""
    record(ctx, "secret", {})
    return "the crown jewels"


@server.tool()
async def hang(ctx: Context) -> str:
    """Never answers in time (without blocking the server's other requests)."""
    record(ctx, "hang", {})
    await asyncio.sleep(60)
    return "too late"


server.run(transport="streamable-http")
