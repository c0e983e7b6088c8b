//! Reading a file that came from outside safely: opened without blocking, regular files only,
//! size-capped. The one implementation behind the exporter-web's configuration, certificate and
//! key reads, the agent's option files, snapshots and recorded trees, and the agent's procfs and
//! sysfs reads.
//!
//! The file is opened first (with `O_NONBLOCK`, so opening a FIFO returns at once instead of
//! waiting for a writer; and `O_NOCTTY`) and then the *opened* file is checked with `fstat`: a
//! check of the path before opening could be raced by a rename. A FIFO, device, socket or
//! directory is refused with its [`Kind`]; a symbolic link is followed (certbot's `live/`
//! certificates are links), and what it points to must be a regular file. `O_NONBLOCK` has no
//! effect on regular files.
//!
//! The cap, for whole-file reads ([`read_regular_file`], [`read_regular_file_with_metadata`],
//! [`read_pseudo_file`]), is a limit: a file over it is an error ([`ReadError::TooLarge`]),
//! never a truncation. The file is read up to one byte past the cap, so a file that grows after
//! `fstat` is noticed. Only [`open_truncated`], for streams a caller scans as far as they go,
//! truncates.
//!
//! Two ways to treat the size `fstat` reports ([`StatSize`]): an ordinary file's is trusted, so a
//! file larger than the cap is refused before a byte is read (a sparse 1 GiB file costs nothing);
//! a procfs or sysfs file's is meaningless (procfs says 0, sysfs 4096, whatever the content), so
//! only the bytes read count.
//!
//! [`ReadError`] does not carry the path: every caller already names the file in its own error
//! (the exporter-web's `WebConfigError`, the agent's `CollectError`), and `Display` says only what
//! is wrong and what to do.

use std::{
    fmt,
    fs::{File, FileType, Metadata},
    io::{self, Read, Take},
    path::Path,
};

/// Why a file could not be read. `Display` says what to do; the caller names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Opening or reading failed (absent, permission denied, ...).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Not a regular file: a FIFO, a device, a socket or a directory.
    #[error("it is {0}, not a regular file: give the path of a regular file")]
    NotRegular(Kind),
    /// Larger than the cap (the cap, in bytes).
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

impl Kind {
    /// The kind of a file that is not a regular file ([`Kind::Other`] for anything unnamed).
    pub fn of(file_type: &FileType) -> Kind {
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
}

/// Whether the size `fstat` reports for the opened file is trusted before reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatSize {
    /// An ordinary file: one whose size is over the cap is refused unread.
    Trusted,
    /// A procfs or sysfs file (size 0 or 4096, whatever the content): only the bytes read
    /// count, and nothing is preallocated from it.
    Ignored,
}

/// Opens `path` without blocking and returns it with its metadata if the opened file is a
/// regular file.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), ReadError> {
    let file = open_nonblocking(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(ReadError::NotRegular(Kind::of(&meta.file_type())));
    }
    Ok((file, meta))
}

/// Reads `path` whole if it is a regular file of at most `max_bytes` bytes; a larger one is
/// [`ReadError::TooLarge`]. With [`StatSize::Trusted`], a file `fstat` says is larger is refused
/// without reading it.
pub fn read_capped(
    path: &Path,
    max_bytes: u64,
    stat_size: StatSize,
) -> Result<(Vec<u8>, Metadata), ReadError> {
    let (file, meta) = open_regular(path)?;
    let capacity = match stat_size {
        StatSize::Trusted if meta.len() > max_bytes => return Err(ReadError::TooLarge(max_bytes)),
        StatSize::Trusted => usize::try_from(meta.len()).unwrap_or(0),
        StatSize::Ignored => 0,
    };
    // The file may grow between fstat and read (or not know its size): read one byte past the
    // cap to notice.
    let mut bytes = Vec::with_capacity(capacity);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(ReadError::TooLarge(max_bytes));
    }
    Ok((bytes, meta))
}

/// Reads `path` whole if it is a regular file of at most `max_bytes` bytes (its `fstat` size is
/// trusted: a larger file is refused unread).
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    read_capped(path, max_bytes, StatSize::Trusted).map(|(bytes, _)| bytes)
}

/// [`read_regular_file`], with the opened file's metadata (its mode, for a permission warning).
pub fn read_regular_file_with_metadata(
    path: &Path,
    max_bytes: u64,
) -> Result<(Vec<u8>, Metadata), ReadError> {
    read_capped(path, max_bytes, StatSize::Trusted)
}

/// Reads a procfs or sysfs file (or its copy in a recorded tree) whole if it is a regular file
/// of at most `max_bytes` bytes, whatever size `fstat` reports ([`StatSize::Ignored`]).
pub fn read_pseudo_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ReadError> {
    read_capped(path, max_bytes, StatSize::Ignored).map(|(bytes, _)| bytes)
}

/// Opens `path` if it is a regular file, for a caller that scans it as a stream: reading ends
/// after `limit` bytes, a truncation, not an error. Its `fstat` size is ignored.
pub fn open_truncated(path: &Path, limit: u64) -> Result<Take<File>, ReadError> {
    let (file, _) = open_regular(path)?;
    Ok(file.take(limit))
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

    /// The exporter-web's cap for configuration files.
    const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

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
            // Whatever the stat size policy: a device is never read.
            let e = read_pseudo_file(Path::new("/dev/zero"), 100).unwrap_err();
            assert!(
                matches!(e, ReadError::NotRegular(Kind::CharDevice)),
                "{e:?}"
            );
            let e = open_truncated(Path::new("/dev/zero"), 100).unwrap_err();
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

    #[test]
    fn over_the_cap_is_an_error_whatever_the_stat_size_says() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("online");
        fs::write(&file, "0-3\n").unwrap();
        assert_eq!(read_pseudo_file(&file, 4).unwrap(), b"0-3\n");
        let e = read_pseudo_file(&file, 3).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(3)), "{e:?}");
        // A sparse file is read only to one byte past the cap, then refused.
        fs::File::create(&file).unwrap().set_len(1 << 30).unwrap();
        let e = read_pseudo_file(&file, 100).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(100)), "{e:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn procfs_files_whose_stat_size_is_zero_are_read_whole() {
        let path = Path::new("/proc/self/status");
        assert_eq!(fs::metadata(path).unwrap().len(), 0);
        let bytes = read_pseudo_file(path, 1 << 20).unwrap();
        assert!(bytes.starts_with(b"Name:"), "{bytes:?}");
        // A trusted size of 0 is under any cap too: the bytes read still count.
        let e = read_regular_file(path, 10).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge(10)), "{e:?}");
    }

    #[test]
    fn a_stream_is_truncated_at_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("maps");
        fs::write(&file, "0123456789").unwrap();
        let mut text = String::new();
        open_truncated(&file, 4)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "0123");
        let e = open_truncated(dir.path(), 4).unwrap_err();
        assert!(matches!(e, ReadError::NotRegular(Kind::Directory)), "{e:?}");
    }
}
