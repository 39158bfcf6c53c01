//! `may-hello [PORT]`: may_minihttp (stackful coroutines on `may`'s
//! default configuration: one worker per CPU) serving `GET /hello`.
//!
//! `HttpServer::start` binds its own listener and does not say which port
//! it got, so for port 0 a free port is found first by binding
//! `127.0.0.1:0` with `std` and closing it (loopback only; a rare race with
//! another process taking it is reported as a bind error).

use may_minihttp::{HttpServer, HttpService, Request, Response};
use weft_peers::{HELLO, announce, fail, port_from_args};

#[derive(Clone)]
struct Hello;

impl HttpService for Hello {
    fn call(&mut self, req: Request, rsp: &mut Response) -> std::io::Result<()> {
        if req.method() == "GET" && req.path() == "/hello" {
            rsp.header("Content-Type: text/plain").body(HELLO);
        } else {
            rsp.status_code(404, "Not Found").body("");
        }
        Ok(())
    }
}

fn main() {
    let port = port_from_args("may-hello", std::env::args().skip(1)).unwrap_or_else(|e| fail(&e));
    let port = match port {
        0 => std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| fail(&format!("may-hello: finding a free port: {e}"))),
        p => p,
    };
    let server = HttpServer(Hello)
        .start(("127.0.0.1", port))
        .unwrap_or_else(|e| fail(&format!("may-hello: binding 127.0.0.1:{port}: {e}")));
    announce(port);
    if server.join().is_err() {
        fail("may-hello: the accept loop panicked");
    }
}
