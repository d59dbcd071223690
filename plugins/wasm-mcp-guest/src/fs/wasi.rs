//! `std::fs`'s subset over `wasi:filesystem` 0.2, called directly.
//!
//! Each call opens what it names from the preopen its path falls under
//! (see [`super::find_preopen`]), as wasi-libc does, with the same symlink
//! rule as the `std::fs` function it stands for: `metadata`, `File::open`,
//! `write`, `read_dir` follow a last symlink; `symlink_metadata`,
//! `read_link` and `DirEntry::metadata` do not. The host confines every
//! one of them to its preopen.

use std::cell::OnceCell;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntryStream, ErrorCode,
    OpenFlags, PathFlags,
};

thread_local! {
    /// This instance's preopens, asked for once (every call of
    /// `get-directories` makes new handles).
    static PREOPENS: OnceCell<Vec<(Rc<Descriptor>, String)>> = const { OnceCell::new() };
}

/// The preopen `path` falls under and the path relative to it.
fn locate(path: &Path) -> io::Result<(Rc<Descriptor>, String)> {
    let path = path.to_str().ok_or_else(|| errno(ILSEQ))?;
    PREOPENS.with(|cell| {
        let preopens = cell.get_or_init(|| {
            get_directories()
                .into_iter()
                .map(|(d, name)| (Rc::new(d), name))
                .collect()
        });
        let (i, rel) = super::find_preopen(preopens.iter().map(|(_, n)| n), path)
            .ok_or_else(|| errno(NOTCAPABLE))?;
        Ok((preopens[i].0.clone(), rel))
    })
}

fn open(path: &Path, follow: bool, how: OpenFlags, flags: DescriptorFlags) -> io::Result<File> {
    let (dir, rel) = locate(path)?;
    let fd = dir
        .open_at(lookup(follow), &rel, how, flags)
        .map_err(io_error)?;
    Ok(File { fd, pos: 0 })
}

fn lookup(follow: bool) -> PathFlags {
    if follow {
        PathFlags::SYMLINK_FOLLOW
    } else {
        PathFlags::empty()
    }
}

fn stat(path: &Path, follow: bool) -> io::Result<Metadata> {
    let (dir, rel) = locate(path)?;
    dir.stat_at(lookup(follow), &rel)
        .map(Metadata::from)
        .map_err(io_error)
}

/// `std::fs::metadata`: the file `path` names, a last symlink followed.
pub fn metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    stat(path.as_ref(), true)
}

/// `std::fs::symlink_metadata`: a last symlink itself.
pub fn symlink_metadata<P: AsRef<Path>>(path: P) -> io::Result<Metadata> {
    stat(path.as_ref(), false)
}

/// `std::fs::read_link`.
pub fn read_link<P: AsRef<Path>>(path: P) -> io::Result<PathBuf> {
    let (dir, rel) = locate(path.as_ref())?;
    dir.readlink_at(&rel).map(PathBuf::from).map_err(io_error)
}

/// `std::fs::write`: creates or truncates the file, then writes all of it.
pub fn write<P: AsRef<Path>, C: AsRef<[u8]>>(path: P, contents: C) -> io::Result<()> {
    let file = open(
        path.as_ref(),
        true,
        OpenFlags::CREATE | OpenFlags::TRUNCATE,
        DescriptorFlags::WRITE,
    )?;
    let mut rest = contents.as_ref();
    let mut at = 0u64;
    while !rest.is_empty() {
        // The host writes at most what it was given; a larger count is
        // taken as all of it, for the offset as for the rest.
        let n = (file.fd.write(rest, at).map_err(io_error)? as usize).min(rest.len());
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        rest = &rest[n..];
        at += n as u64;
    }
    Ok(())
}

/// `std::fs::create_dir_all`, as std does it: `path` and whatever of its
/// parents is missing, made from the top down; a directory already there
/// is no error (a file there is).
pub fn create_dir_all<P: AsRef<Path>>(path: P) -> io::Result<()> {
    let path = path.as_ref();
    if path.as_os_str().is_empty() {
        return Ok(());
    }
    let already_dir =
        |e: &io::Error, p: &Path| e.kind() == io::ErrorKind::AlreadyExists && is_dir(p);
    let mut missing = Vec::new();
    let mut current = path;
    loop {
        match create_dir(current) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if already_dir(&e, current) => break,
            Err(e) => return Err(e),
        }
        match current.parent() {
            Some(parent) => {
                missing.push(current);
                current = parent;
            }
            None => return Err(io::Error::other("failed to create whole tree")),
        }
    }
    for dir in missing.into_iter().rev() {
        match create_dir(dir) {
            Ok(()) => {}
            Err(e) if already_dir(&e, dir) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn create_dir(path: &Path) -> io::Result<()> {
    let (dir, rel) = locate(path)?;
    dir.create_directory_at(&rel).map_err(io_error)
}

fn is_dir(path: &Path) -> bool {
    metadata(path).is_ok_and(|m| m.is_dir())
}

/// `std::fs::read_dir`: the entries of a directory, without `.` and `..`.
pub fn read_dir<P: AsRef<Path>>(path: P) -> io::Result<ReadDir> {
    let dir = open(
        path.as_ref(),
        true,
        OpenFlags::DIRECTORY,
        DescriptorFlags::READ,
    )?;
    let entries = dir.fd.read_directory().map_err(io_error)?;
    Ok(ReadDir {
        dir: Rc::new(dir.fd),
        entries: Some(entries),
    })
}

/// A file open for reading: `std::fs::File`'s `open`, `metadata` and
/// `Read`.
pub struct File {
    fd: Descriptor,
    pos: u64,
}

impl File {
    /// `std::fs::File::open`: read-only, a last symlink followed.
    pub fn open<P: AsRef<Path>>(path: P) -> io::Result<File> {
        open(
            path.as_ref(),
            true,
            OpenFlags::empty(),
            DescriptorFlags::READ,
        )
    }

    pub fn metadata(&self) -> io::Result<Metadata> {
        self.fd.stat().map(Metadata::from).map_err(io_error)
    }
}

impl super::ReadChunk for File {
    fn read_chunk(&mut self, max: usize) -> io::Result<Vec<u8>> {
        let (data, _end) = self.fd.read(max as u64, self.pos).map_err(io_error)?;
        // The host returns at most `max` bytes; a longer list is cut there.
        let mut data = data;
        data.truncate(max);
        self.pos += data.len() as u64;
        Ok(data)
    }
}

impl io::Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let data = super::ReadChunk::read_chunk(self, buf.len())?;
        buf[..data.len()].copy_from_slice(&data);
        Ok(data.len())
    }
}

/// `std::fs::Metadata`: a file's type and size.
#[derive(Clone, Debug)]
pub struct Metadata {
    ty: FileType,
    len: u64,
}

impl Metadata {
    pub fn file_type(&self) -> FileType {
        self.ty
    }
    pub fn is_dir(&self) -> bool {
        self.ty.is_dir()
    }
    pub fn is_file(&self) -> bool {
        self.ty.is_file()
    }
    pub fn is_symlink(&self) -> bool {
        self.ty.is_symlink()
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl From<DescriptorStat> for Metadata {
    fn from(s: DescriptorStat) -> Self {
        Metadata {
            ty: FileType(s.type_),
            len: s.size,
        }
    }
}

/// `std::fs::FileType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileType(DescriptorType);

impl FileType {
    pub fn is_dir(&self) -> bool {
        self.0 == DescriptorType::Directory
    }
    pub fn is_file(&self) -> bool {
        self.0 == DescriptorType::RegularFile
    }
    pub fn is_symlink(&self) -> bool {
        self.0 == DescriptorType::SymbolicLink
    }
}

/// `std::fs::ReadDir`. Ends after the first error it yields.
pub struct ReadDir {
    dir: Rc<Descriptor>,
    entries: Option<DirectoryEntryStream>,
}

impl Iterator for ReadDir {
    type Item = io::Result<DirEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        let entry = match self.entries.as_ref()?.read_directory_entry() {
            Ok(Some(entry)) => entry,
            Ok(None) => {
                self.entries = None;
                return None;
            }
            Err(e) => {
                self.entries = None;
                return Some(Err(io_error(e)));
            }
        };
        Some(Ok(DirEntry {
            dir: self.dir.clone(),
            name: entry.name,
            ty: FileType(entry.type_),
        }))
    }
}

/// `std::fs::DirEntry`.
pub struct DirEntry {
    dir: Rc<Descriptor>,
    name: String,
    ty: FileType,
}

impl DirEntry {
    pub fn file_name(&self) -> OsString {
        OsString::from(&self.name)
    }
    pub fn file_type(&self) -> io::Result<FileType> {
        Ok(self.ty)
    }
    /// The entry itself, a symlink not followed (as `std::fs`).
    pub fn metadata(&self) -> io::Result<Metadata> {
        self.dir
            .stat_at(PathFlags::empty(), &self.name)
            .map(Metadata::from)
            .map_err(io_error)
    }
}

// WASI preview1 error numbers (wasi-libc's `errno` values), which
// `std::io::Error::from_raw_os_error` maps to kinds and messages on
// wasm32-wasip1 as it does for `std::fs`.
const ILSEQ: i32 = 25;
const NOTCAPABLE: i32 = 76;

fn errno(n: i32) -> io::Error {
    io::Error::from_raw_os_error(n)
}

/// A `wasi:filesystem` error as the preview1 adapter reports it to
/// wasi-libc.
fn io_error(e: ErrorCode) -> io::Error {
    use ErrorCode as E;
    errno(match e {
        E::Access => 2,
        E::WouldBlock => 6,
        E::Already => 7,
        E::BadDescriptor => 8,
        E::Busy => 10,
        E::Deadlock => 16,
        E::Quota => 19,
        E::Exist => 20,
        E::FileTooLarge => 22,
        E::IllegalByteSequence => ILSEQ,
        E::InProgress => 26,
        E::Interrupted => 27,
        E::Invalid => 28,
        E::Io => 29,
        E::IsDirectory => 31,
        E::Loop => 32,
        E::TooManyLinks => 34,
        E::MessageSize => 35,
        E::NameTooLong => 37,
        E::NoDevice => 43,
        E::NoEntry => 44,
        E::NoLock => 46,
        E::InsufficientMemory => 48,
        E::InsufficientSpace => 51,
        E::NotDirectory => 54,
        E::NotEmpty => 55,
        E::NotRecoverable => 56,
        E::Unsupported => 58,
        E::NoTty => 59,
        E::NoSuchDevice => 60,
        E::Overflow => 61,
        E::NotPermitted => 63,
        E::Pipe => 64,
        E::ReadOnly => 69,
        E::InvalidSeek => 70,
        E::TextFileBusy => 74,
        E::CrossDevice => 75,
    })
}
