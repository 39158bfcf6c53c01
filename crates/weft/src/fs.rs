//! File system access from virtual threads: `std::fs` through the blocking
//! offload.
//!
//! Linux has no readiness for regular files, so every call here runs the
//! `std::fs` call inside [`crate::blocking`]: the carrier is marked blocked
//! while the kernel works and a spare carrier runs other virtual threads if
//! any wait. Names and signatures mirror `std::fs`.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("weft-fs-doc-{}", std::process::id()));
//! weft::spawn(move || {
//!     weft::fs::create_dir_all(&dir)?;
//!     let p = dir.join("hello.txt");
//!     weft::fs::write(&p, "hello")?;
//!     assert_eq!(weft::fs::read_to_string(&p)?, "hello");
//!     weft::fs::remove_dir_all(&dir)
//! })
//! .join()
//! .unwrap()
//! .unwrap();
//! ```

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub use std::fs::{DirEntry, FileType, Metadata, Permissions};

use crate::blocking::blocking;

/// `std::fs::read`, offloaded.
pub fn read<P: AsRef<Path>>(path: P) -> io::Result<Vec<u8>> {
    let path = path.as_ref();
    blocking(|| std::fs::read(path))
}

/// `std::fs::read_to_string`, offloaded.
pub fn read_to_string<P: AsRef<Path>>(path: P) -> io::Result<String> {
    let path = path.as_ref();
    blocking(|| std::fs::read_to_string(path))
}

/// `std::fs::write`, offloaded.
pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    let path = path.as_ref();
    let contents = contents.as_ref();
    blocking(|| std::fs::write(path, contents))
}

/// `std::fs::metadata`, offloaded.
pub fn metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    let path = path.as_ref();
    blocking(|| std::fs::metadata(path))
}

/// `std::fs::symlink_metadata`, offloaded.
pub fn symlink_metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    let path = path.as_ref();
    blocking(|| std::fs::symlink_metadata(path))
}

/// `std::fs::remove_file`, offloaded.
pub fn remove_file<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::remove_file(path))
}

/// `std::fs::create_dir`, offloaded.
pub fn create_dir<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::create_dir(path))
}

/// `std::fs::create_dir_all`, offloaded.
pub fn create_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::create_dir_all(path))
}

/// `std::fs::remove_dir`, offloaded.
pub fn remove_dir<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::remove_dir(path))
}

/// `std::fs::remove_dir_all`, offloaded.
pub fn remove_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::remove_dir_all(path))
}

/// `std::fs::rename`, offloaded.
pub fn rename<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<()> {
    let from = from.as_ref();
    let to = to.as_ref();
    blocking(|| std::fs::rename(from, to))
}

/// `std::fs::copy`, offloaded.
pub fn copy<P: AsRef<Path>, Q: AsRef<Path>>(from: P, to: Q) -> io::Result<u64> {
    let from = from.as_ref();
    let to = to.as_ref();
    blocking(|| std::fs::copy(from, to))
}

/// `std::fs::hard_link`, offloaded.
pub fn hard_link<P: AsRef<Path>, Q: AsRef<Path>>(original: P, link: Q) -> io::Result<()> {
    let original = original.as_ref();
    let link = link.as_ref();
    blocking(|| std::fs::hard_link(original, link))
}

/// `std::fs::canonicalize`, offloaded.
pub fn canonicalize<P: AsRef<Path>>(path: P) -> io::Result<PathBuf> {
    let path = path.as_ref();
    blocking(|| std::fs::canonicalize(path))
}

/// `std::fs::set_permissions`, offloaded.
pub fn set_permissions<P: AsRef<Path>>(path: P, perm: Permissions) -> io::Result<()> {
    let path = path.as_ref();
    blocking(|| std::fs::set_permissions(path, perm))
}

/// `std::fs::exists`, offloaded.
pub fn exists<P: AsRef<Path>>(path: P) -> io::Result<bool> {
    let path = path.as_ref();
    blocking(|| std::fs::exists(path))
}

/// `std::fs::read_dir`, offloaded: the directory is read eagerly, so
/// iterating never blocks.
pub fn read_dir<P: AsRef<Path>>(path: P) -> io::Result<ReadDir> {
    let path = path.as_ref();
    blocking(|| {
        let entries: Vec<io::Result<DirEntry>> = std::fs::read_dir(path)?.collect();
        Ok(ReadDir(entries.into_iter()))
    })
}

/// Entries of a directory, read by [`read_dir`].
#[derive(Debug)]
pub struct ReadDir(std::vec::IntoIter<io::Result<DirEntry>>);

impl Iterator for ReadDir {
    type Item = io::Result<DirEntry>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

/// `std::fs::File` whose every operation goes through the offload.
#[derive(Debug)]
pub struct File(std::fs::File);

impl File {
    /// `File::open`, offloaded.
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| std::fs::File::open(path)).map(File)
    }

    /// `File::create`, offloaded.
    pub fn create<P: AsRef<Path>>(path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| std::fs::File::create(path)).map(File)
    }

    /// `File::create_new`, offloaded.
    pub fn create_new<P: AsRef<Path>>(path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| std::fs::File::create_new(path)).map(File)
    }

    /// `File::options`.
    pub fn options() -> OpenOptions {
        OpenOptions::new()
    }

    /// `File::sync_all`, offloaded.
    pub fn sync_all(&self) -> io::Result<()> {
        blocking(|| self.0.sync_all())
    }

    /// `File::sync_data`, offloaded.
    pub fn sync_data(&self) -> io::Result<()> {
        blocking(|| self.0.sync_data())
    }

    /// `File::set_len`, offloaded.
    pub fn set_len(&self, size: u64) -> io::Result<()> {
        blocking(|| self.0.set_len(size))
    }

    /// `File::metadata`, offloaded.
    pub fn metadata(&self) -> io::Result<Metadata> {
        blocking(|| self.0.metadata())
    }

    /// `File::try_clone`.
    pub fn try_clone(&self) -> io::Result<File> {
        self.0.try_clone().map(File)
    }

    /// The underlying `std::fs::File`.
    pub fn into_std(self) -> std::fs::File {
        self.0
    }
}

impl From<std::fs::File> for File {
    fn from(f: std::fs::File) -> File {
        File(f)
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        blocking(|| self.0.read(buf))
    }
    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        blocking(|| self.0.read_to_end(buf))
    }
}

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        blocking(|| self.0.write(buf))
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        blocking(|| self.0.write_all(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        blocking(|| self.0.flush())
    }
}

impl Seek for File {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        blocking(|| self.0.seek(pos))
    }
}

impl std::os::fd::AsRawFd for File {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

/// `std::fs::OpenOptions` producing a weft [`File`].
#[derive(Clone, Debug)]
pub struct OpenOptions(std::fs::OpenOptions);

impl Default for OpenOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OpenOptions {
    /// `OpenOptions::new`.
    pub fn new() -> OpenOptions {
        OpenOptions(std::fs::OpenOptions::new())
    }
    /// `OpenOptions::read`.
    pub fn read(&mut self, v: bool) -> &mut Self {
        self.0.read(v);
        self
    }
    /// `OpenOptions::write`.
    pub fn write(&mut self, v: bool) -> &mut Self {
        self.0.write(v);
        self
    }
    /// `OpenOptions::append`.
    pub fn append(&mut self, v: bool) -> &mut Self {
        self.0.append(v);
        self
    }
    /// `OpenOptions::truncate`.
    pub fn truncate(&mut self, v: bool) -> &mut Self {
        self.0.truncate(v);
        self
    }
    /// `OpenOptions::create`.
    pub fn create(&mut self, v: bool) -> &mut Self {
        self.0.create(v);
        self
    }
    /// `OpenOptions::create_new`.
    pub fn create_new(&mut self, v: bool) -> &mut Self {
        self.0.create_new(v);
        self
    }
    /// `OpenOptions::open`, offloaded.
    pub fn open<P: AsRef<Path>>(&self, path: P) -> io::Result<File> {
        let path = path.as_ref();
        blocking(|| self.0.open(path)).map(File)
    }
}
