//! Issue 36 against the real binary: what a remote MCP server or an upload client can make
//! `hookbox serve` hold. The bound checked is the server process's resident memory (VmRSS of
//! /proc/PID/status), far below what the flaws took: a resource bound, not a timing one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

use super::serve_cli::{Server, post_json, start_with};

/// The most resident memory `hookbox serve` may have after (or while) being fed: the flaws
/// took 2.65 GB (one MCP server), 5.0 GB (two) and 1.99 GB (uploads).
const RSS_BOUND_KB: u64 = 300 * 1024;

/// The resident memory of process `pid`, in KiB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {status}"))
}

/// A hostile MCP server (rmcp, the official Rust SDK) whose listing never ends or is too big.
#[derive(Debug, Clone, Copy)]
enum Flood {
    /// 1 000 tools of ~3 KB on every page, and always a next page (the flaw's server).
    Huge,
    /// One small tool per page, and always a next page.
    Pages,
    /// 300 small tools on one page.
    Many,
    /// `a.b` and `a_b` (both `clash__a_b` to the model) and `ok`.
    Clash,
}

impl ServerHandler for Flood {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let page: u64 = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let schema: serde_json::Map<String, Value> =
            serde_json::from_value(json!({"type": "object"})).unwrap();
        let schema = Arc::new(schema);
        let tool = |name: String, description: String| Tool::new(name, description, schema.clone());
        let (tools, next): (Vec<Tool>, Option<u64>) = match self {
            Flood::Huge => (
                (0..1000)
                    .map(|i| tool(format!("t{page}_{i}"), "x".repeat(3000)))
                    .collect(),
                Some(page + 1),
            ),
            Flood::Pages => (vec![tool(format!("t{page}"), "one".into())], Some(page + 1)),
            Flood::Many => (
                (0..300)
                    .map(|i| tool(format!("t{i}"), String::new()))
                    .collect(),
                None,
            ),
            Flood::Clash => (
                ["a.b", "a_b", "ok"]
                    .into_iter()
                    .map(|n| tool(n.to_owned(), String::new()))
                    .collect(),
                None,
            ),
        };
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = next.map(|n| n.to_string());
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Ok(
            CallToolResult::success(vec![ContentBlock::text(format!("{} ran", request.name))])
                .into(),
        )
    }
}

/// Serves every [`Flood`] at `/<name>/mcp` on 127.0.0.1; returns the port. The runtime lives
/// on its own thread for the rest of the test process.
fn flood_servers() -> u16 {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut router = axum::Router::new();
            for (name, flood) in [
                ("huge", Flood::Huge),
                ("pages", Flood::Pages),
                ("many", Flood::Many),
                ("clash", Flood::Clash),
            ] {
                let service = StreamableHttpService::new(
                    move || Ok(flood),
                    Arc::new(LocalSessionManager::default()),
                    StreamableHttpServerConfig::default(),
                );
                router = router.nest_service(&format!("/{name}/mcp"), service);
            }
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// The `mcp_server_tool_result` of the call named `name` in `interaction`, as text, and whether
/// it is an error.
fn mcp_result(interaction: &Value, name: &str) -> (String, bool) {
    let steps = interaction["steps"].as_array().unwrap();
    let call = steps
        .iter()
        .find(|s| s["type"] == "mcp_server_tool_call" && s["name"] == name)
        .unwrap_or_else(|| panic!("no call of {name}: {interaction:#}"));
    let result = steps
        .iter()
        .find(|s| s["type"] == "mcp_server_tool_result" && s["call_id"] == call["id"])
        .unwrap_or_else(|| panic!("no result for {name}: {interaction:#}"));
    (
        result["result"].to_string(),
        result["is_error"].as_bool().unwrap_or(false),
    )
}

/// Regression (issue 36, flaw 3): `tools/list` pagination was followed without limit for the
/// whole connect time-out, so one interaction against a server returning 1 000 tools of ~3 KB
/// per page took the server from 42 MB to 2.65 GB (5.0 GB with two such servers), and kept it.
/// Listings are bounded in pages, tools and bytes; a server past a bound is unavailable,
/// saying which, and the interaction completes. Tools whose model names clash are withheld.
#[test]
fn a_remote_mcp_server_cannot_take_the_servers_memory() {
    let port = flood_servers();
    let dir = hookbox_test_support::DataDir::new();
    let server: Server = start_with(
        &dir.path().join("data"),
        &["--egress-allow-cidr", "127.0.0.1/32"],
    );
    let pid = server.child.id();
    let before = rss_kb(pid);
    let server_tool = |name: &str, path: &str| json!({"type": "mcp_server", "name": name, "url": format!("http://127.0.0.1:{port}/{path}/mcp")});
    let done = post_json(
        &server.addr,
        "/v1beta/interactions",
        &json!({
            "agent": "antigravity-preview-09-2026",
            "input": "call `huge__t0_0` and call `huge2__t0_0` and call `pages__t0` and call `many__t0` and call `clash__a_b` and call `clash__ok`",
            "environment": {"type": "remote", "network": {"allowlist": [{"domain": "127.0.0.1"}]}},
            "tools": [server_tool("huge", "huge"), server_tool("huge2", "huge"), server_tool("pages", "pages"),
                      server_tool("many", "many"), server_tool("clash", "clash")],
        }),
    );
    let after = rss_kb(pid);
    eprintln!("hookbox serve VmRSS: {before} KiB before the run, {after} KiB after");
    assert_eq!(done["status"], "completed", "{done:#}");
    for (name, limit) in [
        ("huge__t0_0", "larger than 2097152 bytes of JSON"),
        ("huge2__t0_0", "larger than 2097152 bytes of JSON"),
        ("pages__t0", "goes on past 32 pages"),
        ("many__t0", "more than 256 tools"),
    ] {
        let (text, is_error) = mcp_result(&done, name);
        assert!(is_error, "{name}: {text}");
        assert!(
            text.contains("is unavailable") && text.contains(limit),
            "{name}: {text}"
        );
    }
    let (text, is_error) = mcp_result(&done, "clash__a_b");
    assert!(
        is_error && text.contains("would all be called `clash__a_b`"),
        "{text}"
    );
    // The positive control: a server within the bounds is reached, its tool runs (the step
    // names the tool as its server does).
    let (text, is_error) = mcp_result(&done, "ok");
    assert!(!is_error && text.contains("ok ran"), "{text}");
    assert!(
        after < RSS_BOUND_KB,
        "hookbox serve holds {after} KiB after the run (before: {before} KiB)"
    );
}

/// One HTTP/1.1 request with a body of raw bytes; returns the status line, headers and body.
pub(super) fn http_bytes(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// Regression (issue 36, flaw 4): each unfinished upload buffered its bytes in memory (up to
/// 1 GiB each), so two sessions of 15 × 64 MiB chunks took the server from 23 MB to 1.99 GB.
/// Chunks are spooled to disk: two uploads of 512 MiB in 64 MiB chunks, interleaved, keep the
/// server's memory bounded, and both files arrive whole.
#[test]
fn uploads_are_spooled_to_disk_not_held_in_memory() {
    let dir = hookbox_test_support::DataDir::new();
    let server = start_with(&dir.path().join("data"), &[]);
    let pid = server.child.id();
    let env = post_json(&server.addr, "/v1beta/environments", &json!({}));
    let env = env["id"].as_str().unwrap().to_owned();
    let start = |name: &str| {
        let resp = http_bytes(
            &server.addr,
            "PUT",
            &format!("/upload/v1beta/environments/{env}/files/workspace/{name}"),
            &[
                ("x-goog-upload-protocol", "resumable"),
                ("x-goog-upload-command", "start"),
            ],
            b"",
        );
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        resp.lines()
            .find_map(|l| l.strip_prefix("x-goog-upload-url: "))
            .and_then(|u| u.trim().rsplit('/').next())
            .unwrap()
            .to_owned()
    };
    let sessions = [start("one.bin"), start("two.bin")];
    const CHUNK: usize = 64 << 20;
    const CHUNKS: usize = 8;
    let mut max_rss = 0;
    for i in 0..CHUNKS {
        for (n, session) in sessions.iter().enumerate() {
            let data = vec![b'a' + n as u8; CHUNK];
            let command = if i + 1 == CHUNKS {
                "upload, finalize"
            } else {
                "upload"
            };
            let offset = (i * CHUNK).to_string();
            let resp = http_bytes(
                &server.addr,
                "POST",
                &format!("/upload/v1beta/sessions/{session}"),
                &[
                    ("x-goog-upload-command", command),
                    ("x-goog-upload-offset", &offset),
                ],
                &data,
            );
            assert!(resp.starts_with("HTTP/1.1 200"), "chunk {i} of {n}: {resp}");
            max_rss = max_rss.max(rss_kb(pid));
        }
    }
    eprintln!("hookbox serve VmRSS: at most {max_rss} KiB while 1 GiB was uploaded");
    assert!(
        max_rss < RSS_BOUND_KB,
        "hookbox serve held {max_rss} KiB while 1 GiB was being uploaded"
    );
    let listing = super::serve_cli::http(
        &server.addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace"),
        "",
    );
    let listing = super::serve_cli::json_body(&listing);
    let sizes: Vec<(String, u64)> = listing["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_owned(),
                // An int64 on the wire: a decimal string (docs/java.md).
                f["size_bytes"].as_str().unwrap().parse::<u64>().unwrap(),
            )
        })
        .collect();
    let whole = (CHUNK * CHUNKS) as u64;
    assert_eq!(
        sizes,
        [
            ("/workspace/one.bin".to_owned(), whole),
            ("/workspace/two.bin".to_owned(), whole)
        ],
        "{listing:#}"
    );
}
