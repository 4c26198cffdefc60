//! The HTTP/2 receive windows a server grants, read from the first frames it sends on a new connection.

use std::time::Duration;

/// What a server's first frames on a new connection grant: one call's receive window (its SETTINGS'
/// `INITIAL_WINDOW_SIZE`) and the connection's (65 535 plus its first `WINDOW_UPDATE` on stream 0).
pub async fn granted(addr: std::net::SocketAddr) -> (u32, u32) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The client preface and an empty SETTINGS frame.
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let (mut stream_window, mut connection_window) = (None, None);
    let read = async {
        while stream_window.is_none() || connection_window.is_none() {
            let mut head = [0u8; 9];
            tcp.read_exact(&mut head).await.unwrap();
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            tcp.read_exact(&mut payload).await.unwrap();
            match kind {
                // SETTINGS, not an ACK: a missing INITIAL_WINDOW_SIZE (0x4) is HTTP/2's default.
                0x4 if flags & 1 == 0 => {
                    let initial = payload
                        .chunks(6)
                        .rfind(|s| u16::from_be_bytes([s[0], s[1]]) == 0x4)
                        .map(|s| u32::from_be_bytes([s[2], s[3], s[4], s[5]]));
                    stream_window = Some(initial.unwrap_or(65_535));
                }
                0x8 if stream == 0 => {
                    let increment = u32::from_be_bytes(payload[..4].try_into().unwrap());
                    connection_window = Some(65_535 + (increment & 0x7fff_ffff));
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the server's SETTINGS and WINDOW_UPDATE");
    (stream_window.unwrap(), connection_window.unwrap())
}
