//! `axum-hello [PORT]`: axum on Tokio's multi-thread runtime (default
//! worker count: one per CPU) serving `GET /hello`.

use axum::{Router, routing::get};
use weft_peers::{HELLO, announce, fail, port_from_args};

#[tokio::main]
async fn main() {
    let port = port_from_args("axum-hello", std::env::args().skip(1)).unwrap_or_else(|e| fail(&e));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| fail(&format!("axum-hello: binding 127.0.0.1:{port}: {e}")));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| fail(&format!("axum-hello: local address: {e}")))
        .port();
    let app = Router::new().route("/hello", get(|| async { HELLO }));
    announce(port);
    if let Err(e) = axum::serve(listener, app).await {
        fail(&format!("axum-hello: serving: {e}"));
    }
}
