//! A partition between one replica and PostgreSQL, healed, through the real `hookbox serve`:
//! replicas with separate data dirs on one PostgreSQL database and one Garage object store
//! (scripts/postgres.sh, scripts/objectstore.sh). Replica A reaches the database only through a
//! TCP forwarder on 127.0.0.1 that the test cuts and restores; the others reach it directly.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::lifecycle_cli::{STORE_UP, garage_url, retrying, wait_for};
use super::serve_cli::{Server, fresh_database, http, json_body, start_with};

const AGENT: &str = "antigravity-preview-09-2026";

/// The wait for anything the cluster does on its own (a lease lapsing, a heartbeat after the
/// heal): generous, it only fails a hung test.
const BOUND: Duration = Duration::from_secs(120);

/// A TCP forwarder from a port on 127.0.0.1 to `target`, which the test cuts (the listener
/// closes and every connection through it is shut down: whoever uses it is cut off) and
/// restores (it listens on the same port again).
struct Forwarder {
    port: u16,
    target: String,
    running: Option<Running>,
}

struct Running {
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
    accept: JoinHandle<()>,
}

impl Forwarder {
    fn start(target: &str) -> Forwarder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut forwarder = Forwarder {
            port,
            target: target.to_owned(),
            running: None,
        };
        forwarder.serve(listener);
        forwarder
    }

    fn serve(&mut self, listener: TcpListener) {
        let stop = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let target = self.target.clone();
        let accept = {
            let (stop, connections) = (stop.clone(), connections.clone());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(upstream) = TcpStream::connect(&target) else {
                        continue;
                    };
                    let mut kept = connections.lock().unwrap();
                    kept.push(client.try_clone().unwrap());
                    kept.push(upstream.try_clone().unwrap());
                    drop(kept);
                    pipe(client.try_clone().unwrap(), upstream.try_clone().unwrap());
                    pipe(upstream, client);
                }
            })
        };
        self.running = Some(Running {
            stop,
            connections,
            accept,
        });
    }

    /// Cuts every connection and stops listening: connecting is refused from now on.
    fn cut(&mut self) {
        let Some(running) = self.running.take() else {
            return;
        };
        running.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which sees `stop` and drops the listener.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        running.accept.join().unwrap();
        for stream in running.connections.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Listens on the same port again.
    fn restore(&mut self) {
        assert!(self.running.is_none(), "the forwarder is not cut");
        let listener = TcpListener::bind(("127.0.0.1", self.port)).unwrap();
        self.serve(listener);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Copies `from` to `to` on a thread of its own until either side closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn host_port(url: &str) -> &str {
    let rest = url.split_once('@').unwrap().1;
    rest.split_once('/').unwrap().0
}

fn psql(database: &str, sql: &str) -> String {
    let out = std::process::Command::new("psql")
        .arg(database)
        .args(["-tAc", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Whether replica `id`'s heartbeat row is live in the database.
fn heartbeating(database: &str, id: &str) -> bool {
    psql(
        database,
        &format!("SELECT count(*) FROM replicas WHERE id = '{id}' AND expires_at > now()"),
    ) == "1"
}

/// The owner of environment `env`'s lease row.
fn lease_owner(database: &str, env: &str) -> String {
    psql(
        database,
        &format!("SELECT owner FROM leases WHERE resource = 'env:{env}'"),
    )
}

fn served_by(resp: &str) -> Option<String> {
    resp.lines()
        .find_map(|l| l.strip_prefix("x-hookbox-replica: "))
        .map(|s| s.trim().to_owned())
}

fn status_of(resp: &str) -> &str {
    resp.lines()
        .next()
        .unwrap_or_default()
        .split(' ')
        .nth(1)
        .unwrap_or_default()
}

fn body_of(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

/// Runs `command` in `env` on the replica at `addr` (retrying its 503s, as the SDK does) and
/// checks it completed, served by `replica`: the write is acknowledged.
fn ack(addr: &str, env: &str, command: &str, replica: &str) {
    let body = serde_json::json!({"agent": AGENT, "input": format!("run `{command}`"), "environment": env})
        .to_string();
    let resp = retrying(addr, "POST", "/v1beta/interactions", &body);
    assert_eq!(served_by(&resp).as_deref(), Some(replica), "{resp}");
    let done = json_body(&resp);
    assert_eq!(done["status"], "completed", "{resp}");
    assert!(!resp.contains("checkpoint_failed"), "{resp}");
}

/// The environment's `/workspace/state.txt` as the replica at `addr` serves it, with the
/// replica that served it (503s retried until the lease of a dead replica lapses).
fn state_file(addr: &str, env: &str) -> (String, String) {
    let resp = retrying(
        addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/state.txt?alt=media"),
        "",
    );
    assert_eq!(status_of(&resp), "200", "{resp}");
    (served_by(&resp).unwrap(), body_of(&resp).to_owned())
}

/// Whether a request to `addr` about `env` is answered 503 (the replica is cut off).
fn cut_off(addr: &str, env: &str) -> bool {
    let resp = http(
        addr,
        "GET",
        &format!("/v1beta/environments/{env}/files/workspace/state.txt?alt=media"),
        "",
    );
    status_of(&resp) == "503"
}

// Regression (issue 36): A, cut off from PostgreSQL, lost its environment's lease to B; once the
// partition healed and B died, A claimed the lease again and served the copy it had open before
// the partition (`v1` only): B's two acknowledged writes were gone, and A's next checkpoint
// would have made that stale copy the newest snapshot.
#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL and HOOKBOX_TEST_SNAPSHOT_URL (scripts/test.sh starts both)"]
fn replicas_without_a_shared_disk_serve_no_stale_copy_after_a_healed_partition() {
    healed_partition(false);
}

// The same with a third replica in the cluster, which must not change what A serves.
#[test]
#[ignore = "needs HOOKBOX_TEST_POSTGRES_URL and HOOKBOX_TEST_SNAPSHOT_URL (scripts/test.sh starts both)"]
fn replicas_without_a_shared_disk_serve_no_stale_copy_after_a_healed_partition_with_a_third_replica()
 {
    healed_partition(true);
}

fn healed_partition(third_replica: bool) {
    // Acknowledged writes are uploaded ones: the store must stay up (another test stops it).
    let _store_up = STORE_UP.read().unwrap_or_else(|p| p.into_inner());
    let database = fresh_database();
    let store = garage_url();
    let mut forwarder = Forwarder::start(host_port(&database));
    let through_forwarder = database.replacen(
        host_port(&database),
        &format!("127.0.0.1:{}", forwarder.port),
        1,
    );
    let dir = hookbox_test_support::DataDir::new();
    // Separate data dirs that share only the credential key (copied from A's). Every write is
    // acknowledged only once its checkpoint is uploaded (--checkpoint-wait).
    let start = |name: &str, database: &str| -> Server {
        let data = dir.path().join(name);
        if name != "a" {
            std::fs::create_dir_all(&data).unwrap();
            std::fs::copy(dir.path().join("a/secret.key"), data.join("secret.key")).unwrap();
        }
        let args = [
            "--database",
            database,
            "--cluster-secret",
            "a-cluster-secret-for-tests",
            "--lease-ttl",
            "2",
            "--snapshot-store",
            store.as_str(),
            "--checkpoint-wait",
        ];
        start_with(&data, &args)
    };
    let mut a = start("a", &through_forwarder);
    let mut b = start("b", &database);
    let c = third_replica.then(|| start("c", &database));
    let replica_of = |server: &Server| {
        served_by(&http(&server.addr, "GET", "/v1beta/environments", "")).unwrap()
    };
    let (replica_a, replica_b) = (replica_of(&a), replica_of(&b));

    // A makes the environment and writes v1; A has it open.
    let made = super::serve_cli::post_json(
        &a.addr,
        "/v1beta/interactions",
        &serde_json::json!({"agent": AGENT, "input": "run `echo v1 > /workspace/state.txt`"}),
    );
    assert_eq!(made["status"], "completed", "{made}");
    let env = made["environment_id"].as_str().unwrap().to_owned();
    assert_eq!(
        state_file(&a.addr, &env),
        (replica_a.clone(), "v1\n".into())
    );
    assert_eq!(lease_owner(&database, &env), replica_a);

    // The partition: A cannot reach PostgreSQL and says so; its heartbeat lapses.
    forwarder.cut();
    wait_for(BOUND, "A to answer 503 while cut off", || {
        cut_off(&a.addr, &env).then_some(())
    });
    wait_for(BOUND, "A's heartbeat to lapse", || {
        (!heartbeating(&database, &replica_a)).then_some(())
    });
    // B takes the environment over from its snapshot and acknowledges a write.
    ack(
        &b.addr,
        &env,
        "echo from-B >> /workspace/state.txt",
        &replica_b,
    );
    assert_eq!(lease_owner(&database, &env), replica_b);

    // The partition heals: A heartbeats and is ready again; asked about the environment, it
    // sends the request to B, which holds it now.
    forwarder.restore();
    wait_for(BOUND, "A's heartbeat after the heal", || {
        heartbeating(&database, &replica_a).then_some(())
    });
    wait_for(BOUND, "A's /readyz after the heal", || {
        let resp = http(&a.addr, "GET", "/readyz", "");
        (status_of(&resp) == "200").then_some(())
    });
    assert_eq!(
        state_file(&a.addr, &env),
        (replica_b.clone(), "v1\nfrom-B\n".into())
    );
    ack(
        &b.addr,
        &env,
        "echo after-heal >> /workspace/state.txt",
        &replica_b,
    );

    // B dies. A (asked first, so A claims the lease) serves both acknowledged writes.
    b.child.kill().unwrap(); // SIGKILL
    b.child.wait().unwrap();
    let (served, content) = state_file(&a.addr, &env);
    assert_eq!(served, replica_a, "{content}");
    assert_eq!(
        content, "v1\nfrom-B\nafter-heal\n",
        "A served a stale copy of the environment"
    );
    // A closed the copy it had open when its lease lapsed, and restored the newest snapshot.
    let metrics = http(&a.addr, "GET", "/metrics", "");
    for operation in ["lease_lost", "restore"] {
        assert!(
            metrics.contains(&format!(
                "hookbox_environment_lifecycle_total{{operation=\"{operation}\"}}"
            )),
            "{operation}: {metrics}"
        );
    }
    if let Some(c) = &c {
        // The third replica is sent to A, and sees the same.
        assert_eq!(
            state_file(&c.addr, &env),
            (replica_a.clone(), "v1\nfrom-B\nafter-heal\n".into())
        );
    }

    // A's checkpoints continue the newest chain: once A writes and dies, a replica that never
    // had the environment restores the newest snapshot and finds every acknowledged write.
    ack(
        &a.addr,
        &env,
        "echo from-A >> /workspace/state.txt",
        &replica_a,
    );
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let reader = match c {
        Some(c) => c,
        None => start("d", &database),
    };
    let (served, content) = state_file(&reader.addr, &env);
    assert_eq!(served, replica_of(&reader));
    assert_eq!(content, "v1\nfrom-B\nafter-heal\nfrom-A\n");
}
