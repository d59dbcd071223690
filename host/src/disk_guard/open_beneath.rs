//! `open-at` that cannot block: wasmtime-wasi's rules for the flags and
//! permissions, with the open made here, so it can add `O_NONBLOCK`.
//!
//! Opening a FIFO blocks until its other end is opened, on the thread
//! running the call and past any deadline (a system call cannot be
//! interrupted). `open-at` refuses a special file it finds before opening
//! (`is_special_at`), but another call can rename a FIFO into place between
//! that check and the open, and the open then blocked the server's thread
//! for good. Here the open itself cannot block (a FIFO opens at once with
//! `O_NONBLOCK`, or fails `ENXIO` for writing with no reader) and what it
//! opened is judged by `fstat` on the descriptor: anything but a directory
//! or regular file is closed and refused `unsupported`.
//!
//! The path is resolved by the kernel, beneath the directory
//! (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`), as
//! wasmtime-wasi's own open does on Linux; where `openat2` is unavailable
//! (before Linux 5.6, or refused by a seccomp filter) the open is left to
//! wasmtime-wasi, behind the check before it.

use std::os::fd::OwnedFd;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, OpenMode};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, OpenFlags, PathFlags,
};

use crate::sandbox::ALLOW_BLOCKING_CURRENT_THREAD;

/// What an open here came to.
pub enum Opened {
    Done(Result<Descriptor, ErrorCode>),
    /// `openat2` is not available: open with wasmtime-wasi instead.
    Unavailable,
}

/// `open-at` of `path` beneath `dir`, as wasmtime-wasi's `Dir::open_at`
/// decides it (the same flags, permissions and errors), without blocking.
pub fn open_beneath(
    dir: &Dir,
    path_flags: PathFlags,
    path: &str,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Opened {
    let (how, open_mode) = match os_flags(path_flags, oflags, flags) {
        Ok(asked) => asked,
        Err(e) => return Opened::Done(Err(e)),
    };
    let creates = oflags.contains(OpenFlags::CREATE);
    if dir.perms.write_not_permitted() && (creates || open_mode.contains(OpenMode::WRITE)) {
        return Opened::Done(Err(ErrorCode::NotPermitted));
    }
    if !openat2_available(dir) {
        return Opened::Unavailable;
    }
    let fd = match openat2_retrying(dir, path, how) {
        Ok(fd) => fd,
        Err(e) => return Opened::Done(Err(error_code(e))),
    };
    Opened::Done(descriptor(fd, dir, oflags, open_mode))
}

/// The OS flags and WASI open mode `open-at` asks for, or its refusal
/// (wasmtime-wasi's rules: `create` and `truncate` open for writing, an
/// open not for writing is for reading, sync flags are unsupported, a
/// directory cannot be created or truncated).
fn os_flags(
    path_flags: PathFlags,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Result<(OFlags, OpenMode), ErrorCode> {
    let sync = DescriptorFlags::FILE_INTEGRITY_SYNC
        | DescriptorFlags::DATA_INTEGRITY_SYNC
        | DescriptorFlags::REQUESTED_WRITE_SYNC;
    if flags.intersects(sync) {
        return Err(ErrorCode::Unsupported);
    }
    let dir_changes = OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE;
    if oflags.contains(OpenFlags::DIRECTORY) && oflags.intersects(dir_changes) {
        return Err(ErrorCode::Invalid);
    }
    let mut how = OFlags::CLOEXEC | OFlags::NONBLOCK;
    let writes = oflags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE)
        || flags.contains(DescriptorFlags::WRITE);
    let reads = flags.contains(DescriptorFlags::READ) || !flags.contains(DescriptorFlags::WRITE);
    let mut mode = OpenMode::empty();
    how |= match (reads, writes) {
        (true, true) => OFlags::RDWR,
        (false, true) => OFlags::WRONLY,
        _ => OFlags::RDONLY,
    };
    mode.set(OpenMode::READ, reads);
    mode.set(OpenMode::WRITE, writes);
    if oflags.contains(OpenFlags::CREATE) {
        how |= OFlags::CREATE;
        how.set(OFlags::EXCL, oflags.contains(OpenFlags::EXCLUSIVE));
    }
    how.set(OFlags::TRUNC, oflags.contains(OpenFlags::TRUNCATE));
    how.set(
        OFlags::NOFOLLOW,
        !path_flags.contains(PathFlags::SYMLINK_FOLLOW),
    );
    Ok((how, mode))
}

/// Whether `openat2` works here: it does not before Linux 5.6 (`ENOSYS`),
/// and a seccomp filter may refuse it (`EPERM`). Asked once per process,
/// of an open that cannot fail otherwise (the directory itself, as a
/// path). Never inferred from a guest's own open: a guest can make an
/// `openat2` fail `EAGAIN` (renames while it resolves a long `..` path)
/// and `EPERM`, and falling back to wasmtime-wasi's open after those let
/// it block an open on a FIFO again (a helper's find).
fn openat2_available(dir: &Dir) -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let how = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let probe = rustix::fs::openat2(&*dir.dir, ".", how, Mode::empty(), resolve);
        let available = !matches!(probe, Err(Errno::NOSYS | Errno::PERM));
        if !available {
            tracing::warn!("openat2 is unavailable: opens fall back to wasmtime-wasi's, which a FIFO renamed into place can block");
        }
        available
    })
}

/// `openat2` beneath `dir`, tried again on `EAGAIN` (a rename anywhere on
/// the host while it ran) a few times, as wasmtime-wasi does; past them
/// the open fails (`would-block`: the guest may try again), never falls
/// back.
fn openat2_retrying(dir: &Dir, path: &str, how: OFlags) -> Result<OwnedFd, Errno> {
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    // `openat2` refuses a mode with no `O_CREAT` (`EINVAL`).
    let mode = match how.contains(OFlags::CREATE) {
        true => Mode::from_raw_mode(0o666),
        false => Mode::empty(),
    };
    let mut tried = 0;
    loop {
        match rustix::fs::openat2(&*dir.dir, path, how, mode, resolve) {
            Err(Errno::AGAIN) if tried < 4 => tried += 1,
            done => return done,
        }
    }
}

/// The error `open-at` reports for `e`: a path that led outside the
/// directory is `not-permitted`, as wasmtime-wasi reports it; a FIFO with
/// no reader, opened for writing, is `unsupported` like every special file.
fn error_code(e: Errno) -> ErrorCode {
    match e {
        Errno::XDEV => ErrorCode::NotPermitted,
        Errno::NXIO => ErrorCode::Unsupported,
        Errno::AGAIN => ErrorCode::WouldBlock,
        e => std::io::Error::from(e).into(),
    }
}

/// The descriptor for what `fd` turned out to be (by `fstat`, on the open
/// file itself): a directory, or a regular file (back to blocking mode);
/// anything else is closed and refused.
fn descriptor(
    fd: OwnedFd,
    dir: &Dir,
    oflags: OpenFlags,
    open_mode: OpenMode,
) -> Result<Descriptor, ErrorCode> {
    let stat = rustix::fs::fstat(&fd).map_err(error_code)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => Ok(Descriptor::Dir(Dir::new(
            fd.into(),
            dir.perms,
            open_mode,
            ALLOW_BLOCKING_CURRENT_THREAD,
        ))),
        _ if oflags.contains(OpenFlags::DIRECTORY) => Err(ErrorCode::NotDirectory),
        FileType::RegularFile => {
            let blocking = rustix::fs::fcntl_getfl(&fd).map_err(error_code)? - OFlags::NONBLOCK;
            rustix::fs::fcntl_setfl(&fd, blocking).map_err(error_code)?;
            Ok(Descriptor::File(File::new(
                fd.into(),
                dir.perms,
                open_mode,
                ALLOW_BLOCKING_CURRENT_THREAD,
            )))
        }
        _ => Err(ErrorCode::Unsupported),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_wasi::FsPerms;

    fn worktree() -> (tempfile::TempDir, Dir) {
        let wt = tempfile::tempdir().unwrap();
        let handle = std::fs::File::open(wt.path()).unwrap();
        let dir = Dir::new(handle, FsPerms::ReadWrite, OpenMode::all(), true);
        (wt, dir)
    }

    fn open(
        dir: &Dir,
        path: &str,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Descriptor, ErrorCode> {
        match open_beneath(dir, PathFlags::empty(), path, oflags, flags) {
            Opened::Done(opened) => opened,
            Opened::Unavailable => panic!("openat2 is unavailable here"),
        }
    }

    /// A FIFO opens at once for reading and fails at once for writing (no
    /// reader), both `unsupported`; without `O_NONBLOCK` either open
    /// waited for the other end forever.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (wt, dir) = worktree();
        let fifo = wt.path().join("p");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        for flags in [DescriptorFlags::READ, DescriptorFlags::WRITE] {
            let opened = open(&dir, "p", OpenFlags::empty(), flags);
            assert!(matches!(opened, Err(ErrorCode::Unsupported)), "{flags:?}");
        }
    }

    /// What the rules of wasmtime-wasi's open give, given here: a file
    /// (in blocking mode again), a directory, a created file, and the
    /// refusals: outside the directory, a symlink not followed, a
    /// directory asked to be created, a file asked to be a directory, a
    /// write under read-only permissions.
    #[test]
    fn opens_as_wasmtime_wasi_does() {
        let (wt, dir) = worktree();
        std::fs::write(wt.path().join("f"), "x").unwrap();
        std::fs::create_dir(wt.path().join("d")).unwrap();
        std::os::unix::fs::symlink("f", wt.path().join("l")).unwrap();
        let read = DescriptorFlags::READ;
        let Ok(Descriptor::File(file)) = open(&dir, "f", OpenFlags::empty(), read) else {
            panic!("f is a file");
        };
        let status = rustix::fs::fcntl_getfl(&*file.file).unwrap();
        assert!(!status.contains(OFlags::NONBLOCK));
        assert!(matches!(
            open(&dir, "d", OpenFlags::DIRECTORY, read),
            Ok(Descriptor::Dir(_))
        ));
        let created = open(&dir, "new", OpenFlags::CREATE | OpenFlags::EXCLUSIVE, read);
        assert!(matches!(created, Ok(Descriptor::File(_))));
        assert!(wt.path().join("new").is_file());
        let refused = [
            ("../x", OpenFlags::empty(), ErrorCode::NotPermitted),
            ("/etc/passwd", OpenFlags::empty(), ErrorCode::NotPermitted),
            ("l", OpenFlags::empty(), ErrorCode::Loop),
            (
                "d2",
                OpenFlags::DIRECTORY | OpenFlags::CREATE,
                ErrorCode::Invalid,
            ),
            ("f", OpenFlags::DIRECTORY, ErrorCode::NotDirectory),
            ("absent", OpenFlags::empty(), ErrorCode::NoEntry),
        ];
        for (path, oflags, code) in refused {
            match open(&dir, path, oflags, read) {
                Err(e) => assert_eq!(e, code, "{path}"),
                Ok(_) => panic!("{path} opened"),
            }
        }
        let handle = std::fs::File::open(wt.path()).unwrap();
        let read_only = Dir::new(handle, FsPerms::ReadOnly, OpenMode::READ, true);
        let write = open(&read_only, "f", OpenFlags::empty(), DescriptorFlags::WRITE);
        assert!(matches!(write, Err(ErrorCode::NotPermitted)));
    }
}
