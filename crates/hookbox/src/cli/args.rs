//! Arguments several subcommands share.

/// `--database`, for every command that reads or writes the store: the same value as
/// `hookbox serve --database` (or `HOOKBOX_DATABASE_URL`), so the CLI and the server see the
/// same projects, keys and credentials.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DatabaseArg {
    /// The PostgreSQL database `hookbox serve --database` uses (`postgres://…`, with libpq's
    /// `sslmode` and `sslrootcert`); default: SQLite in the data dir.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = hookbox_store::env_vars::HOOKBOX_DATABASE_URL,
        hide_env_values = true
    )]
    pub database: Option<String>,
}

/// A JSON argument given inline or as `@FILE` (`--args`, `--network`): the parsed value, or a
/// usage error naming `flag`.
pub fn json_arg(flag: &str, raw: &str) -> anyhow::Result<serde_json::Value> {
    let text = match raw.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| super::usage(format!("cannot read {flag} file {path}: {e}")))?,
        None => raw.to_owned(),
    };
    serde_json::from_str(&text)
        .map_err(|e| super::usage(format!("{flag} is not valid JSON ({e}): {text}")))
}

/// A listen address: `IP:PORT`, or `NAME:PORT` resolved now (`localhost:8080`). A name that
/// resolves to several addresses takes a loopback one if there is one, so that `localhost`
/// never becomes a public address.
pub fn parse_listen(raw: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    if let Ok(addr) = raw.parse() {
        return Ok(addr);
    }
    if raw.rsplit_once(':').is_none_or(|(host, _)| host.is_empty()) {
        return Err(format!(
            "{raw:?} is not HOST:PORT (like 127.0.0.1:8080 or localhost:8080)"
        ));
    }
    let addrs: Vec<std::net::SocketAddr> = raw
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {raw:?}: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.ip().is_loopback())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("{raw:?} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_addresses_and_localhost() {
        assert_eq!(
            parse_listen("127.0.0.1:8080").unwrap().to_string(),
            "127.0.0.1:8080"
        );
        let local = parse_listen("localhost:8080").unwrap();
        assert!(local.ip().is_loopback(), "{local}");
        assert_eq!(local.port(), 8080);
        assert!(parse_listen("8080").is_err());
        assert!(parse_listen(":8080").is_err());
    }
}
