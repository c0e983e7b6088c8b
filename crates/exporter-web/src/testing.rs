//! Helpers shared by the unit tests of every module.

use std::{
    fs,
    path::{Path, PathBuf},
};

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};

use crate::config::{WebConfig, WebConfigError};

pub(crate) fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

/// Writes `yaml` as `web.yml` in `dir` and returns its path.
pub(crate) fn write_config(dir: &Path, yaml: &str) -> PathBuf {
    let path = dir.join("web.yml");
    fs::write(&path, yaml).unwrap();
    path
}

pub(crate) fn parse(yaml: &str) -> Result<WebConfig, WebConfigError> {
    WebConfig::parse(yaml, Path::new("/etc/powerdiag/web.yml"))
}

pub(crate) fn parse_err(yaml: &str) -> String {
    parse(yaml).unwrap_err().to_string()
}

pub(crate) fn tls_yaml(cert: &str, key: &str) -> String {
    format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        testdata(cert).display(),
        testdata(key).display()
    )
}

pub(crate) fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", BASE64.encode(format!("{user}:{password}")))
}

/// A config with user alice (password "s3cret") and bob ("hunter2", a `$2y$` hash as
/// htpasswd writes), at bcrypt's lowest cost to keep the tests fast.
pub(crate) fn users_yaml() -> String {
    let alice = bcrypt::hash("s3cret", 4).unwrap();
    let bob = bcrypt::hash_with_result("hunter2", 4)
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    assert!(bob.starts_with("$2y$04$"), "{bob}");
    format!("basic_auth_users:\n  alice: {alice}\n  bob: {bob}\n")
}
