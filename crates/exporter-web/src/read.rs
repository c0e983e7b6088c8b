//! Reading a small configuration file safely: size-capped, regular files only, never blocking.
//!
//! The file is opened first (with `O_NONBLOCK`, so opening a FIFO returns at once instead of
//! waiting for a writer) and then the *opened* file is checked with `fstat`: a check of the path
//! before opening could be raced by a rename. A FIFO, device, socket or directory is refused
//! with its kind named; a symbolic link is followed (certbot's `live/` certificates are links),
//! and what it points to must be a regular file. `O_NONBLOCK` has no effect on regular files.

use std::{
    fmt,
    fs::{File, FileType},
    io::{self, Read},
    path::Path,
};

/// Largest web configuration, certificate, key or CA file read: real ones are a few KiB.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

/// Why a configuration file could not be read. `Display` says what to do; the caller names the
/// file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Opening or reading failed (absent, permission denied, ...).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Not a regular file: a FIFO, a device, a socket or a directory.
    #[error("it is {0}, not a regular file: give the path of a regular file")]
    NotRegular(Kind),
    /// Larger than the cap.
    #[error("larger than {} KiB: not a configuration file", .0 >> 10)]
    TooLarge(u64),
}

/// The kind of a non-regular file, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A character device (`/dev/zero`, a terminal).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
    /// Anything else.
    Other,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Directory => "a directory",
            Kind::Fifo => "a FIFO (named pipe)",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Socket => "a socket",
            Kind::Other => "a special file",
        })
    }
}

fn kind(file_type: &FileType) -> Kind {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Kind::Fifo;
        }
        if file_type.is_char_device() {
            return Kind::CharDevice;
        }
        if file_type.is_block_device() {
            return Kind::BlockDevice;
        }
        if file_type.is_socket() {
            return Kind::Socket;
        }
    }
    if file_type.is_dir() {
        Kind::Directory
    } else {
        Kind::Other
    }
}

/// Reads `path` whole if it is a regular file of at most `max_bytes` bytes.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    read_regular_file_with_metadata(path, max_bytes).map(|(bytes, _)| bytes)
}

/// [`read_regular_file`], with the opened file's metadata (its mode, for a permission warning).
pub fn read_regular_file_with_metadata(
    path: &Path,
    max_bytes: u64,
) -> Result<(Vec<u8>, std::fs::Metadata), ReadError> {
    let file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular(kind(&meta.file_type())));
    }
    if meta.len() > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    // The file may grow between fstat and read: read one byte past the cap to notice.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    Ok((bytes, meta))
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

#[cfg(test)]
mod tests {
    use std::{fs, time::Duration};

    use super::*;

    #[test]
    fn reads_a_small_regular_file_and_follows_links() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.pem");
        fs::write(&file, "hello").unwrap();
        assert_eq!(read_regular_file(&file, 10).unwrap(), b"hello");
        #[cfg(unix)]
        {
            let link = dir.path().join("link.pem");
            std::os::unix::fs::symlink(&file, &link).unwrap();
            assert_eq!(read_regular_file(&link, 10).unwrap(), b"hello");
        }
    }

    #[test]
    fn refuses_large_files_without_reading_them() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.yml");
        // Sparse: 1 GiB that takes no disk and, refused by its size, no memory.
        fs::File::create(&big).unwrap().set_len(1 << 30).unwrap();
        let e = read_regular_file(&big, MAX_CONFIG_FILE_BYTES).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "larger than 1024 KiB: not a configuration file"
        );
    }

    #[test]
    fn refuses_directories_and_devices_by_kind() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_regular_file(dir.path(), 100).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("it is a directory, not a regular file"),
            "{e}"
        );
        #[cfg(unix)]
        {
            let e = read_regular_file(Path::new("/dev/zero"), 100).unwrap_err();
            assert!(
                matches!(e, ReadError::NotRegular(Kind::CharDevice)),
                "{e:?}"
            );
        }
        let e = read_regular_file(&dir.path().join("absent"), 100).unwrap_err();
        assert!(matches!(e, ReadError::Io(_)), "{e:?}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_at_once_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("cert.pem");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        // On a thread, so a regression (a blocking open) fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_regular_file(&fifo, 100).map_err(|e| e.to_string()));
        });
        let result = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("reading a FIFO must not block");
        assert_eq!(
            result.unwrap_err(),
            "it is a FIFO (named pipe), not a regular file: give the path of a regular file"
        );
    }
}
