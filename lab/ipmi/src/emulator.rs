//! The UDP front of the BMC emulator: binds a socket (127.0.0.1, port 0 in tests), passes each
//! datagram to [`Bmc::handle_datagram`] on its own task, and sends the reply back to the sender.
//!
//! Dropping the [`IpmiEmulator`] stops the server and every request still running; the socket
//! closes once the runtime drops the aborted task. [`IpmiEmulator::stop`] waits for that.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use rackproof_clock::Clock;
use rackproof_driver::SharedMachine;
use tokio::net::UdpSocket;
use tokio::task::{JoinHandle, JoinSet};

use crate::bmc::{Bmc, BmcConfig};
use crate::credentials::Credentials;

/// The emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("failed to bind the IPMI emulator to {addr}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A running IPMI-over-LAN BMC emulator in front of one machine.
#[derive(Debug)]
pub struct IpmiEmulator {
    local_addr: SocketAddr,
    bmc: Arc<Bmc>,
    server: JoinHandle<()>,
}

impl IpmiEmulator {
    /// Starts an emulator on 127.0.0.1 with an ephemeral port for `machine`, letting in the user
    /// of `credentials` (as Administrator).
    pub async fn start(
        machine: SharedMachine,
        credentials: Credentials,
        clock: Clock,
    ) -> Result<Self, EmulatorError> {
        Self::start_with(
            machine,
            BmcConfig::new(credentials),
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            clock,
        )
        .await
    }

    /// Starts an emulator with a full configuration on `bind`.
    pub async fn start_with(
        machine: SharedMachine,
        config: BmcConfig,
        bind: SocketAddr,
        clock: Clock,
    ) -> Result<Self, EmulatorError> {
        let socket = UdpSocket::bind(bind)
            .await
            .map_err(|source| EmulatorError::Bind { addr: bind, source })?;
        let local_addr = socket
            .local_addr()
            .map_err(|source| EmulatorError::Bind { addr: bind, source })?;
        let bmc = Arc::new(Bmc::new(machine, config, clock));
        let server = tokio::spawn(serve(Arc::new(socket), Arc::clone(&bmc)));
        tracing::info!(%local_addr, "IPMI emulator listening");
        Ok(Self {
            local_addr,
            bmc,
            server,
        })
    }

    /// The address ipmitool and clients talk to (`-H ip -p port`).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Sessions that completed RAKP and are still open.
    pub fn active_sessions(&self) -> usize {
        self.bmc.active_sessions()
    }

    /// Every session, including those still in the RAKP handshake.
    pub fn sessions_including_handshakes(&self) -> usize {
        self.bmc.sessions_including_handshakes()
    }

    /// Stops the server and waits until its socket is closed (the port is free again).
    pub async fn stop(mut self) {
        self.server.abort();
        // The task was aborted: its result says so and carries nothing else.
        let _ = (&mut self.server).await;
    }
}

impl Drop for IpmiEmulator {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(socket: Arc<UdpSocket>, bmc: Arc<Bmc>) {
    // Dropped with the server task: aborts requests still running.
    let mut requests = JoinSet::new();
    let mut buffer = vec![0u8; 2048];
    loop {
        while requests.try_join_next().is_some() {}
        let (len, peer) = match socket.recv_from(&mut buffer).await {
            Ok(received) => received,
            Err(error) => {
                tracing::debug!(%error, "IPMI emulator receive failed");
                continue;
            }
        };
        let datagram = buffer[..len].to_vec();
        let socket = Arc::clone(&socket);
        let bmc = Arc::clone(&bmc);
        requests.spawn(async move {
            if let Some(reply) = bmc.handle_datagram(&datagram).await
                && let Err(error) = socket.send_to(&reply, peer).await
            {
                tracing::debug!(%error, %peer, "IPMI emulator send failed");
            }
        });
    }
}
