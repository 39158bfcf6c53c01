//! Address conversion and name resolution.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Things that name one or more socket addresses: the same set of types as
/// [`std::net::ToSocketAddrs`].
///
/// Literal addresses are used as they are; host names (`"example.com:80"`,
/// `("localhost", 8080)`) are resolved with the system resolver. The trait
/// is sealed: it is implemented for `SocketAddr`, `SocketAddrV4`,
/// `SocketAddrV6`, `(IpAddr, u16)`, `(Ipv4Addr, u16)`, `(Ipv6Addr, u16)`,
/// `(&str, u16)`, `(String, u16)`, `str`, `String`, `&[SocketAddr]`, and
/// references to any of them.
///
/// ```
/// use std::net::SocketAddr;
/// use weft::net::lookup_host;
///
/// let addrs: Vec<SocketAddr> = lookup_host(("127.0.0.1", 8080))?.collect();
/// assert_eq!(addrs, ["127.0.0.1:8080".parse::<SocketAddr>().unwrap()]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait ToSocketAddrs: sealed::Sealed {
    /// The addresses, resolving host names if needed.
    #[doc(hidden)]
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>>;
}

mod sealed {
    pub trait Sealed {}
}

/// Resolves `addr` to socket addresses, like
/// [`std::net::ToSocketAddrs::to_socket_addrs`].
///
/// Literal addresses need no lookup. Host names go to the system resolver
/// (`getaddrinfo`) inside [`weft::blocking`](crate::blocking), so a lookup
/// on a virtual thread does not stall the other virtual threads of its
/// carrier.
///
/// ```
/// let n = weft::net::lookup_host("localhost:0")?.count();
/// assert!(n >= 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn lookup_host<A: ToSocketAddrs>(addr: A) -> io::Result<impl Iterator<Item = SocketAddr>> {
    addr.weft_addrs()
}

/// A host-name lookup through the system resolver; inside a simulation,
/// among its simulated hosts (`crate::sim::net`), as `"name:port"` or
/// (`name`, `port`).
fn resolve(name: &str, port: Option<u16>) -> io::Result<Vec<SocketAddr>> {
    use std::net::ToSocketAddrs as _;
    if crate::sched::simulation().is_some() {
        let (host, port) = match port {
            Some(p) => (name, p),
            None => split_port(name)?,
        };
        if let Some(r) = crate::sim::net::resolve(host, port) {
            return r;
        }
    }
    // getaddrinfo blocks its OS thread: mark the carrier blocked so a
    // spare carrier runs the other virtual threads meanwhile.
    crate::blocking::blocking(|| match port {
        Some(p) => (name, p).to_socket_addrs().map(Iterator::collect),
        None => name.to_socket_addrs().map(Iterator::collect),
    })
}

/// `"host:port"` split, as the system resolver's caller in `std` does.
fn split_port(s: &str) -> io::Result<(&str, u16)> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "invalid socket address");
    let (host, port) = s.rsplit_once(':').ok_or_else(invalid)?;
    let port = port.parse::<u16>().map_err(|_| invalid())?;
    Ok((host, port))
}

fn one(a: SocketAddr) -> io::Result<std::vec::IntoIter<SocketAddr>> {
    Ok(vec![a].into_iter())
}

macro_rules! literal {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl ToSocketAddrs for $t {
            fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
                one(SocketAddr::from(*self))
            }
        }
    )*};
}

literal!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl sealed::Sealed for (&str, u16) {}
impl ToSocketAddrs for (&str, u16) {
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
        let (host, port) = *self;
        if let Ok(ip) = host.parse::<IpAddr>() {
            return one(SocketAddr::new(ip, port));
        }
        resolve(host, Some(port)).map(Vec::into_iter)
    }
}

impl sealed::Sealed for (String, u16) {}
impl ToSocketAddrs for (String, u16) {
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
        (self.0.as_str(), self.1).weft_addrs()
    }
}

impl sealed::Sealed for str {}
impl ToSocketAddrs for str {
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
        if let Ok(a) = self.parse::<SocketAddr>() {
            return one(a);
        }
        resolve(self, None).map(Vec::into_iter)
    }
}

impl sealed::Sealed for String {}
impl ToSocketAddrs for String {
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
        self.as_str().weft_addrs()
    }
}

impl sealed::Sealed for &[SocketAddr] {}
impl ToSocketAddrs for &[SocketAddr] {
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
        let v: Vec<SocketAddr> = self.to_vec();
        Ok(v.into_iter())
    }
}

impl<T: ToSocketAddrs + ?Sized> sealed::Sealed for &T {}
impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn weft_addrs(&self) -> io::Result<std::vec::IntoIter<SocketAddr>> {
        (**self).weft_addrs()
    }
}
