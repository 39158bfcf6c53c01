//! Whether this process is a `fork` child of the one that loaded Weft
//! (module docs, "Semantics kept": a child's calls pass through and take
//! no lock). The child is marked by `crate::fork`'s `pthread_atfork`
//! handler, registered before `main`.

/// Whether this process is a `fork` child of the one that loaded Weft.
pub(super) fn forked() -> bool {
    crate::fork::generation() != 0
}
