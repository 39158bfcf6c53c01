//! What the peer hello servers share: the response body and the command
//! line.
//!
//! Each server (`may-hello`, `axum-hello`) listens on `127.0.0.1:<port>`,
//! prints `ready <port>` on stdout once it accepts connections (the
//! protocol of `weft-bench`'s `http-server` workers and of `bench/go`),
//! and serves `GET /hello` with [`HELLO`] until killed.

/// The body of `GET /hello`: the same 13 bytes as `weft-bench`'s
/// `http-server` workers (`bench/src/worker.rs`) and `bench/go`.
pub const HELLO: &str = "Hello, World!";

/// The usage line of server `name`.
pub fn usage(name: &str) -> String {
    format!("usage: {name} [PORT]   (listens on 127.0.0.1:PORT; 0 or none: any free port)")
}

/// The port from the arguments after the program name: none means 0 (any
/// free port).
pub fn port_from_args(name: &str, mut args: impl Iterator<Item = String>) -> Result<u16, String> {
    let port = match args.next() {
        None => 0,
        Some(a) => a
            .parse()
            .map_err(|e| format!("{name}: port {a:?}: {e}\n{}", usage(name)))?,
    };
    if let Some(extra) = args.next() {
        return Err(format!(
            "{name}: unexpected argument {extra:?}\n{}",
            usage(name)
        ));
    }
    Ok(port)
}

/// Prints `ready <port>` and flushes it (stdout may be a pipe).
pub fn announce(port: u16) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed stdout only loses the line: the caller then never starts us.
    let _ = writeln!(out, "ready {port}");
    let _ = out.flush();
}

/// Prints `msg` to stderr and exits with status 2.
pub fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> impl Iterator<Item = String> {
        a.iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn port_defaults_to_any() {
        assert_eq!(port_from_args("t", args(&[])), Ok(0));
        assert_eq!(port_from_args("t", args(&["0"])), Ok(0));
        assert_eq!(port_from_args("t", args(&["8080"])), Ok(8080));
    }

    #[test]
    fn bad_port_is_an_error() {
        assert!(port_from_args("t", args(&["70000"])).is_err());
        assert!(port_from_args("t", args(&["x"])).is_err());
        assert!(port_from_args("t", args(&["1", "2"])).is_err());
    }

    #[test]
    fn body_is_thirteen_bytes() {
        assert_eq!(HELLO.len(), 13);
    }
}
