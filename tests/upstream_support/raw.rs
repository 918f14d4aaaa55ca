//! A raw protocol client for the server's side of a frame: it speaks
//! `docs/protocol.md` by hand (`hello`, then whatever a test sends, good or
//! bad) against a real `exo control-plane serve`.

use std::time::Duration;

use exo::wire::{self, Frame, Hello, HostMeta};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::ControlPlane;

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Dials with `token` and sends nothing yet.
pub async fn dial(cp: &ControlPlane, token: &str) -> Socket {
    let url = format!("ws://{}{}", cp.addr, wire::CONNECT_PATH);
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(req).await.unwrap().0
}

/// Dials with `token`, sends `hello` and waits for `welcome`.
pub async fn raw_client(cp: &ControlPlane, token: &str) -> Socket {
    let mut ws = dial(cp, token).await;
    let hello = Frame::Hello(Hello {
        protocol: wire::PROTOCOL_VERSION,
        agent_version: "test".into(),
        boot_id: "raw-boot".into(),
        connection_id: wire::random_id(),
        host: HostMeta::default(),
        capabilities: Vec::new(),
    });
    send(&mut ws, &hello).await;
    match next_frame(&mut ws).await {
        Frame::Welcome(w) => assert!(
            w.accepts_alerts
                && w.accepts_rollouts
                && w.accepts_tenants
                && w.accepts_registrations
                && w.accepts_apps
                && w.accepts_analysis_runs,
            "{w:?}"
        ),
        other => panic!("expected welcome, got {other:?}"),
    }
    ws
}

pub async fn send(ws: &mut Socket, f: &Frame) {
    send_text(ws, &f.to_json().unwrap()).await;
}

/// Any text, frame or not.
pub async fn send_text(ws: &mut Socket, text: &str) {
    ws.send(Message::Text(text.into())).await.unwrap();
}

/// The next frame; panics on a close or after 10 s.
pub async fn next_frame(ws: &mut Socket) -> Frame {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("the socket to stay open")
            .unwrap();
        match m {
            Message::Text(t) => return Frame::from_json(t.as_str()).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

/// The server's close frame, skipping what comes before it.
pub async fn next_close(ws: &mut Socket) -> CloseFrame {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a close within 10 s");
        match m {
            Some(Ok(Message::Close(Some(c)))) => return c,
            Some(Ok(_)) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    }
}
