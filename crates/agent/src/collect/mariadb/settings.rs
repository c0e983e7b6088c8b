//! Connection settings from one source (a URL, a defaults file) and the error of a setting that
//! cannot be used: what `option_file.rs` produces and `target.rs` plans from. `target` re-exports
//! them.

use std::{fmt, path::PathBuf};

use super::tls::TlsSwitches;

/// A password that never shows up in `Debug`, `Display` or a snapshot, and whose bytes are
/// wiped when it is dropped (fewer copies in a core image; the driver keeps its own copy for
/// the connection's life).
#[derive(Clone, PartialEq, Eq)]
pub struct Password(zeroize::Zeroizing<String>);

impl Password {
    pub fn new(p: impl Into<String>) -> Password {
        Password(zeroize::Zeroizing::new(p.into()))
    }
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(***)")
    }
}

/// Connection settings from one source, before defaults are applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    pub user: Option<String>,
    pub password: Option<Password>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub socket: Option<PathBuf>,
    /// `ssl`, `ssl-ca`, `ssl-cert`, `ssl-key`, `ssl-verify-server-cert`, `ssl-mode`.
    pub tls: TlsSwitches,
}

impl ClientSettings {
    /// Fields of `other` override ours.
    pub(super) fn overlay(&mut self, other: ClientSettings) {
        self.user = other.user.or(self.user.take());
        self.password = other.password.or(self.password.take());
        self.host = other.host.or(self.host.take());
        self.port = other.port.or(self.port.take());
        self.socket = other.socket.or(self.socket.take());
        self.tls.overlay(other.tls);
    }
}

/// A connection setting that cannot be used; doctor exits 3 with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("{source_name}: {message}")]
    Invalid {
        source_name: String,
        message: String,
    },
}
