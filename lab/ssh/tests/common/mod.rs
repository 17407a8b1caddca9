//! Real SSH servers on 127.0.0.1 for the tests: Debian's dropbear and OpenSSH's sshd.
//!
//! The test owns a listener on port 0 and starts one server per connection in inetd mode
//! (`dropbear -i`, `sshd -i`), each inside its own PID namespace (`unshare --pid --fork
//! --kill-child`): killing that one process kills the server and every command it started, and
//! `setpriv --pdeathsig KILL` kills it when the test process dies without unwinding. The
//! bytes pass through a small proxy that can cut a connection after a byte budget, which is how
//! tests drop connections mid-transfer. Dropping [`TestServer`] kills every server process.
//!
//! dropbear reads `~/.ssh/authorized_keys` of the login user from the passwd database, so it runs
//! under nss_wrapper with a passwd file whose home is the test's temp dir.

#![expect(
    dead_code,
    reason = "each test binary uses a different part of the helpers"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rackproof_ssh::SshTarget;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

const INSTALL: &str =
    "apt-get install -y dropbear-bin openssh-server openssh-client libnss-wrapper util-linux";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dropbear,
    OpenSsh,
}

#[derive(Default)]
struct State {
    children: HashMap<u32, Child>,
    connections: u32,
    cut_next_after: Option<u64>,
}

/// A running SSH server on 127.0.0.1, killed on drop.
pub(crate) struct TestServer {
    pub(crate) kind: Kind,
    pub(crate) dir: TempDir,
    pub(crate) port: u16,
    /// The server's host key as an OpenSSH public-key line.
    pub(crate) host_key: String,
    /// A client private key the server accepts (ed25519).
    pub(crate) client_key: PathBuf,
    /// A second accepted client key (RSA).
    pub(crate) rsa_client_key: PathBuf,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

fn require(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing; install it with: {INSTALL}"
    );
}

fn nss_wrapper() -> PathBuf {
    for dir in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ] {
        let path = Path::new(dir).join("libnss_wrapper.so");
        if path.exists() {
            return path;
        }
    }
    panic!("libnss_wrapper.so is missing; install it with: {INSTALL}");
}

fn run_tool(program: &str, args: &[&str]) -> String {
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}; install it with: {INSTALL}"));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Makes an unencrypted OpenSSH client key pair (`kind` is `ed25519` or `rsa`); returns the private key path.
pub(crate) fn client_key(dir: &Path, name: &str, kind: &str) -> PathBuf {
    let path = dir.join(name);
    let mut args = vec![
        "-q",
        "-t",
        kind,
        "-N",
        "",
        "-C",
        "rackproof-test",
        "-f",
        path.to_str().unwrap(),
    ];
    if kind == "rsa" {
        args.extend(["-b", "2048"]);
    }
    run_tool("ssh-keygen", &args);
    path
}

pub(crate) fn public_line(private_key: &Path) -> String {
    std::fs::read_to_string(private_key.with_extension("pub"))
        .unwrap()
        .trim()
        .to_owned()
}

fn current_user() -> (String, String) {
    (
        run_tool("id", &["-un"]).trim().to_owned(),
        run_tool("id", &["-u"]).trim().to_owned(),
    )
}

impl TestServer {
    pub(crate) async fn dropbear() -> Self {
        Self::start(Kind::Dropbear).await
    }

    pub(crate) async fn openssh() -> Self {
        Self::start(Kind::OpenSsh).await
    }

    async fn start(kind: Kind) -> Self {
        require("/usr/bin/unshare");
        require("/usr/bin/setpriv");
        require("/usr/bin/ssh-keygen");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let client_key = client_key(root, "client_ed25519", "ed25519");
        let rsa_client_key = client_key_rsa(root);
        let authorized = format!(
            "{}\n{}\n",
            public_line(&client_key),
            public_line(&rsa_client_key)
        );
        let (user, uid) = current_user();
        let (program, args, env, host_key) = match kind {
            Kind::Dropbear => {
                require("/usr/sbin/dropbear");
                require("/usr/bin/dropbearkey");
                let home = root.join("home");
                std::fs::create_dir_all(home.join(".ssh")).unwrap();
                std::fs::write(home.join(".ssh/authorized_keys"), &authorized).unwrap();
                set_mode(&home, 0o700);
                set_mode(&home.join(".ssh"), 0o700);
                set_mode(&home.join(".ssh/authorized_keys"), 0o600);
                std::fs::write(
                    root.join("passwd"),
                    format!("{user}:x:{uid}:{uid}:test:{}:/bin/sh\n", home.display()),
                )
                .unwrap();
                std::fs::write(root.join("group"), format!("{user}:x:{uid}:\n")).unwrap();
                let host_key_path = root.join("dropbear_ed25519_host_key");
                run_tool(
                    "dropbearkey",
                    &["-t", "ed25519", "-f", host_key_path.to_str().unwrap()],
                );
                let public = run_tool(
                    "dropbearkey",
                    &["-y", "-f", host_key_path.to_str().unwrap()],
                );
                let line = public
                    .lines()
                    .find(|l| l.starts_with("ssh-"))
                    .expect("dropbearkey printed a public key");
                let host_key = line
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                let env = vec![
                    ("LD_PRELOAD".to_owned(), nss_wrapper().display().to_string()),
                    (
                        "NSS_WRAPPER_PASSWD".to_owned(),
                        root.join("passwd").display().to_string(),
                    ),
                    (
                        "NSS_WRAPPER_GROUP".to_owned(),
                        root.join("group").display().to_string(),
                    ),
                ];
                // `-E` (log to stderr) is refused in inetd mode; dropbear logs to syslog.
                let args = vec!["-i", "-s", "-r", host_key_path.to_str().unwrap()]
                    .into_iter()
                    .map(str::to_owned)
                    .collect::<Vec<_>>();
                ("/usr/sbin/dropbear", args, env, host_key)
            }
            Kind::OpenSsh => {
                require("/usr/sbin/sshd");
                // sshd insists on its privilege-separation directory even in inetd mode.
                std::fs::create_dir_all("/run/sshd").unwrap();
                std::fs::write(root.join("authorized_keys"), &authorized).unwrap();
                let host_key_path = self::client_key(root, "ssh_host_ed25519_key", "ed25519");
                let config = format!(
                    "HostKey {}\nAuthorizedKeysFile {}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     UsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\nPidFile none\nLogLevel VERBOSE\n",
                    host_key_path.display(),
                    root.join("authorized_keys").display()
                );
                std::fs::write(root.join("sshd_config"), config).unwrap();
                let host_key = public_line(&host_key_path)
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                let args = vec![
                    "-i".to_owned(),
                    "-e".to_owned(),
                    "-f".to_owned(),
                    root.join("sshd_config").display().to_string(),
                ];
                ("/usr/sbin/sshd", args, Vec::new(), host_key)
            }
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let log = root.join("server.log");
        let accept = tokio::spawn(accept_loop(
            listener,
            state.clone(),
            program,
            args,
            env,
            log,
        ));
        Self {
            kind,
            dir,
            port,
            host_key,
            client_key,
            rsa_client_key,
            state,
            accept,
        }
    }

    /// A target for this server with the accepted ed25519 key and the host key pinned.
    pub(crate) fn target(&self) -> SshTarget {
        let mut target = SshTarget::new("127.0.0.1", current_user().0, &self.client_key);
        target.port = self.port;
        target.host_key = Some(self.host_key.parse().unwrap());
        target.connect_timeout = Duration::from_secs(20);
        target
    }

    /// An absolute path inside the server's temp dir (the server runs on this machine).
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn path_text(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// The next accepted connection is cut once this many bytes (both directions) passed.
    pub(crate) fn cut_next_connection_after(&self, bytes: u64) {
        self.state.lock().unwrap().cut_next_after = Some(bytes);
    }

    /// Kills the servers of all open connections (the clients see the connection drop).
    pub(crate) fn drop_connections(&self) {
        for child in self.state.lock().unwrap().children.values_mut() {
            let _ = child.start_kill();
        }
    }

    /// How many connections the server accepted.
    pub(crate) fn connections(&self) -> u32 {
        self.state.lock().unwrap().connections
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }
}

fn client_key_rsa(root: &Path) -> PathBuf {
    client_key(root, "client_rsa", "rsa")
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.accept.abort();
        if let Ok(mut state) = self.state.lock() {
            for child in state.children.values_mut() {
                let _ = child.start_kill();
            }
        }
        if std::thread::panicking() {
            eprintln!("--- {:?} server log ---\n{}", self.kind, self.log());
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<Mutex<State>>,
    program: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: PathBuf,
) {
    let mut proxies = tokio::task::JoinSet::new();
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            return;
        };
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        // dropbear's inetd mode reads and writes fd 0, so the server gets one end of a socket
        // pair as stdin and stdout, and the proxy the other.
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let theirs_out = theirs.try_clone().unwrap();
        // setpriv: the server dies with the test process even when that is SIGKILLed (no Drop).
        let child = Command::new("setpriv")
            .args([
                "--pdeathsig",
                "KILL",
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                program,
            ])
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}; install it with: {INSTALL}"));
        ours.set_nonblocking(true).unwrap();
        let server_side = UnixStream::from_std(ours).unwrap();
        let (id, budget) = {
            let mut state = state.lock().unwrap();
            state.connections += 1;
            let id = state.connections;
            state.children.insert(id, child);
            (id, state.cut_next_after.take())
        };
        let state = state.clone();
        proxies.spawn(async move {
            proxy(socket, server_side, budget).await;
            if let Some(mut child) = state.lock().unwrap().children.remove(&id) {
                let _ = child.start_kill();
            }
        });
    }
}

/// Copies bytes both ways until either side ends or the budget is spent.
async fn proxy(mut socket: TcpStream, mut server: UnixStream, budget: Option<u64>) {
    let (mut from_client, mut to_client) = socket.split();
    let (mut stdout, mut stdin) = server.split();
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        let over = |total: u64| budget.is_some_and(|budget| total >= budget);
        tokio::select! {
            read = from_client.read(&mut up) => {
                let Ok(n) = read else { return };
                if n == 0 { return; }
                total += n as u64;
                if over(total) || stdin.write_all(&up[..n]).await.is_err() { return; }
            }
            read = stdout.read(&mut down) => {
                let Ok(n) = read else { return };
                if n == 0 { return; }
                total += n as u64;
                if over(total) || to_client.write_all(&down[..n]).await.is_err() { return; }
            }
        }
    }
}
