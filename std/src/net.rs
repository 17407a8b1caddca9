//! Free ports on 127.0.0.1, for a process about to be told where to listen (QEMU's forwarded SSH
//! port, a BMC emulator): the port is free when asked for and released at once, so another
//! process could take it before the listener binds; the callers start their listener at once.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};

/// A TCP port on 127.0.0.1 nobody listens on right now.
pub fn free_tcp_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// A UDP port on 127.0.0.1 nobody is bound to right now.
pub fn free_udp_port() -> std::io::Result<u16> {
    Ok(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_can_be_bound_again() {
        let tcp = free_tcp_port().unwrap();
        assert_ne!(tcp, 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, tcp)).unwrap();
        let udp = free_udp_port().unwrap();
        assert_ne!(udp, 0);
        UdpSocket::bind((Ipv4Addr::LOCALHOST, udp)).unwrap();
    }
}
