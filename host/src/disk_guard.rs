//! `wasi:filesystem/types` with a disk budget: the host functions of
//! wasmtime-wasi, shadowed on the linker by this wrapper, which charges a
//! [`CallBudget`] for everything that adds bytes or entries to the
//! worktree before letting the operation run.
//!
//! Counted: `write`, writes through `write-via-stream` / `append-via-stream`
//! streams (the wasip1 adapter's `fd_write` / `fd_pwrite`), `set-size`
//! growth, and the holes a write past the end of a file opens (a sparse
//! file costs its apparent size); `open-at` that creates a file,
//! `create-directory-at`, `symlink-at` (an entry plus its target's bytes),
//! `link-at`. Rewriting bytes that already exist is charged as written
//! (the budgets count writes, not net growth; deleting refunds nothing). Everything else is
//! passed through unchanged. A refused operation fails in the guest with
//! `insufficient-space` (`file-too-large` for the size limit) and the call
//! remembers why, so the host reports `quota_exceeded`.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, Dir, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, FsError, FsResult, InputStream, OutputStream, Pollable,
    StreamError, StreamResult,
};

use crate::disk_budget::{CallBudget, Charge, Cost, Exceeded};
use crate::sandbox::DirId;

mod open_beneath;

impl std::error::Error for Exceeded {}

impl Exceeded {
    fn error_code(self) -> ErrorCode {
        match self {
            Exceeded::FileSize(_) => ErrorCode::FileTooLarge,
            // WASI has no "too many open files".
            Exceeded::OpenFiles(_) => ErrorCode::InsufficientMemory,
            _ => ErrorCode::InsufficientSpace,
        }
    }
}

impl From<Exceeded> for FsError {
    fn from(e: Exceeded) -> FsError {
        e.error_code().into()
    }
}

/// The filesystem view the shadowing functions get: wasmtime-wasi's view
/// plus this call's budget.
pub struct GuardedFs<'a> {
    pub fs: WasiFilesystemCtxView<'a>,
    pub budget: &'a CallBudget,
    /// The empty root of a `none` or narrowed grant (see `sandbox`).
    pub empty_root: Option<DirId>,
}

struct Guarded;

impl HasData for Guarded {
    type Data<'a> = GuardedFs<'a>;
}

/// Replaces `wasi:filesystem/types` (already added by
/// `wasmtime_wasi::p2::add_to_linker_async`) with the guarded version.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> GuardedFs<'_>,
) -> anyhow::Result<()> {
    linker.allow_shadowing(true);
    let added = types::add_to_linker::<T, Guarded>(linker, get);
    linker.allow_shadowing(false);
    added.map_err(anyhow::Error::from)
}

/// Directory entries a listing holds per open file it counts as (250-byte
/// names: ~150 KB): 256 open files hold ~131,000 listed entries at once.
/// 256 listings of a 30,000-entry directory held 0.9 GB in one call.
pub const ENTRIES_PER_OPEN_FILE: u64 = 512;

/// Size check and charge for writing `len` bytes at `offset` of a file now
/// `size` bytes long: the bytes plus any hole opened before them.
fn admit_write(budget: &CallBudget, size: u64, offset: u64, len: u64) -> Result<Charge, Exceeded> {
    let end = offset.saturating_add(len);
    budget.check_file_size(size, end)?;
    budget.charge(Cost::bytes(len.saturating_add(offset.saturating_sub(size))))
}

/// Whether a descriptor of this type opens at once: a directory, a
/// regular file, or a symlink (which an open not following it refuses).
fn opens_without_blocking(t: types::DescriptorType) -> bool {
    use types::DescriptorType as T;
    matches!(t, T::Directory | T::RegularFile | T::SymbolicLink)
}

/// Whether a listing leaves out the entry that failed with `e`, instead
/// of failing there, which fails the guest's whole listing (the wasip1
/// adapter's `fd_readdir`, and so the guest's `read_dir`): a name that is
/// not UTF-8, which a WASI path cannot carry so the guest could not name it
/// anyway, or an entry gone before its type was read.
fn skipped_in_listings(e: &FsError) -> bool {
    matches!(
        e.downcast_ref(),
        Some(ErrorCode::IllegalByteSequence | ErrorCode::NoEntry)
    )
}

/// `open-at` that cannot block (a FIFO renamed into place after the
/// check before it: see `open_beneath`); wasmtime-wasi's own where
/// `openat2` is unavailable.
async fn open_unblocking(
    fs: &mut WasiFilesystemCtxView<'_>,
    fd: Resource<Descriptor>,
    path_flags: types::PathFlags,
    path: String,
    oflags: types::OpenFlags,
    flags: types::DescriptorFlags,
) -> FsResult<Resource<Descriptor>> {
    let opened = match fs.table.get(&fd)? {
        Descriptor::Dir(dir) => open_beneath::open_beneath(dir, path_flags, &path, oflags, flags),
        Descriptor::File(_) => return Err(ErrorCode::NotDirectory.into()),
    };
    match opened {
        open_beneath::Opened::Done(opened) => Ok(fs.table.push(opened?)?),
        open_beneath::Opened::Unavailable => fs.open_at(fd, path_flags, path, oflags, flags).await,
    }
}

fn file_len(file: &std::fs::File) -> u64 {
    file.metadata().map(|m| m.len()).unwrap_or(0)
}

impl GuardedFs<'_> {
    /// The OS file behind `fd`, if it is a file the guest may write (for
    /// anything else wasmtime-wasi's own answer is passed through).
    fn os_file(&self, fd: &Resource<Descriptor>) -> FsResult<Option<Arc<std::fs::File>>> {
        Ok(match self.fs.table.get(fd)? {
            Descriptor::File(f) if !f.perms.write_not_permitted() => Some(f.file.clone()),
            _ => None,
        })
    }

    /// Whether `fd` is a directory the guest may create entries in.
    fn writable_dir(&self, fd: &Resource<Descriptor>) -> FsResult<bool> {
        Ok(match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => !d.perms.write_not_permitted(),
            Descriptor::File(_) => false,
        })
    }

    /// Notes (for the call's outcome) a change attempted through `fd` when
    /// it is read-only; wasmtime-wasi then refuses it with `not-permitted`.
    fn note_if_read_only(&self, fd: &Resource<Descriptor>) -> FsResult<()> {
        let read_only = match self.fs.table.get(fd)? {
            Descriptor::File(f) => f.perms.write_not_permitted(),
            Descriptor::Dir(d) => d.perms.write_not_permitted(),
        };
        if read_only {
            self.budget.deny();
        }
        Ok(())
    }

    /// Whether `fd` is the empty root: it is there to catch writes, and a
    /// listing of it is refused (`not-permitted`), so a narrowed grant's
    /// `/` looks as absent as before, not like an empty worktree.
    fn is_empty_root(&self, fd: &Resource<Descriptor>) -> FsResult<bool> {
        use std::os::unix::fs::MetadataExt;
        let Some(root) = self.empty_root else {
            return Ok(false);
        };
        Ok(match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => d.dir.metadata().is_ok_and(|m| (m.dev(), m.ino()) == root),
            Descriptor::File(_) => false,
        })
    }

    /// How many entries the directory `fd` has (`getdents`, no `stat`):
    /// what its listing will copy. Counted as the listing is made
    /// ([`listed_in_the_call`]).
    fn entries_in(&self, fd: &Resource<Descriptor>) -> FsResult<u64> {
        Ok(match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => listed_in_the_call(|| count_entries(&d.dir)),
            Descriptor::File(_) => 0,
        })
    }

    /// wasmtime-wasi's listing of `fd` (it `stat`s every entry, up to
    /// ~131,000 under the default bound), made inside the call
    /// ([`listed_in_the_call`]): asked of a copy of the descriptor that may
    /// block its thread, so that wasmtime-wasi lists it there and then.
    async fn listed_within_the_call(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        let Descriptor::Dir(d) = self.fs.table.get(&fd)? else {
            return self.fs.read_directory(fd).await;
        };
        let inline = listing_may_block_the_call();
        let copy = d.dir.try_clone().map_err(FsError::from)?;
        let copy = Dir::new(copy, d.perms, d.open_mode, inline);
        let listing = self.fs.table.push(Descriptor::Dir(copy))?;
        let at = Resource::new_borrow(listing.rep());
        let listed = match inline {
            // Done at the first poll (the copy may block its thread).
            true => listed_in_the_call(|| {
                tokio::runtime::Handle::current().block_on(self.fs.read_directory(at))
            }),
            false => self.fs.read_directory(at).await,
        };
        self.fs.table.delete(listing)?;
        listed
    }

    /// Whether `path` names a FIFO, socket or device, refused with
    /// `unsupported`: opening a FIFO blocks until its other end is opened,
    /// on the thread running the call (file operations run on it) and past
    /// the call's deadline, which cannot interrupt a system call; a device
    /// is not worktree data, and opening one can act on it. Anything else,
    /// or an error, is left to the open itself, which cannot block either
    /// (`open_beneath`: a FIFO renamed into place after this check is
    /// refused there); this check keeps a device from being opened at all.
    async fn is_special_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: &str,
    ) -> bool {
        let probe = Resource::new_borrow(fd.rep());
        let stat = self.fs.stat_at(probe, path_flags, path.to_owned()).await;
        stat.is_ok_and(|stat| !opens_without_blocking(stat.type_))
    }

    /// `open-at` with `create`, charged by what it does rather than by a
    /// check before it (another call renaming the file away between the two
    /// made an open taken for "exists" create it uncharged: 391 entries past
    /// bounds of 50 and 100). Without `create` first, free (it cannot
    /// create); if the path is absent, exclusively, charged as a creation;
    /// if it appeared meanwhile, as asked, charged as a creation.
    async fn open_creating(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let at = || Resource::new_borrow(fd.rep());
        let is = |e: &FsError, code: ErrorCode| e.downcast_ref() == Some(&code);
        if !oflags.contains(types::OpenFlags::EXCLUSIVE) {
            let existing = oflags & !types::OpenFlags::CREATE;
            match open_unblocking(
                &mut self.fs,
                at(),
                path_flags,
                path.clone(),
                existing,
                flags,
            )
            .await
            {
                Err(e) if is(&e, ErrorCode::NoEntry) => {}
                done => return done,
            }
            let exclusive = oflags | types::OpenFlags::EXCLUSIVE;
            let op = open_unblocking(
                &mut self.fs,
                at(),
                path_flags,
                path.clone(),
                exclusive,
                flags,
            );
            match Self::charged(self.budget, true, Cost::entry(), op).await {
                Err(e) if is(&e, ErrorCode::Exist) => {}
                done => return done,
            }
        }
        let op = open_unblocking(&mut self.fs, fd, path_flags, path, oflags, flags);
        Self::charged(self.budget, true, Cost::entry(), op).await
    }

    /// A stream `make` creates, counted as one open file (given back if it
    /// fails; once it lives, by the wrapper's drop: `CountedInput`,
    /// `MeteredStream`).
    fn with_open_file<R>(
        &mut self,
        make: impl FnOnce(&mut WasiFilesystemCtxView<'_>) -> FsResult<R>,
    ) -> FsResult<R> {
        self.budget.open_file()?;
        let made = make(&mut self.fs);
        if made.is_err() {
            self.budget.close_file();
        }
        made
    }

    /// Wraps the stream just pushed at `stream` so its writes are charged
    /// (and the open file counted for it is given back when it is dropped).
    fn meter(
        &mut self,
        stream: Resource<DynOutputStream>,
        file: Arc<std::fs::File>,
        pos: Option<u64>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let inner = self.fs.table.delete(stream)?;
        let metered: DynOutputStream = Box::new(MeteredStream {
            inner,
            file,
            pos,
            base: None,
            budget: self.budget.clone(),
        });
        Ok(self.fs.table.push(metered)?)
    }

    /// Runs `op`, which adds `cost` to the disk, if the budget has room for
    /// it; a failed `op` is refunded. Where the guest may not write at all
    /// (`charge` false) wasmtime-wasi's own refusal is passed through.
    async fn charged<F: std::future::Future<Output = FsResult<R>>, R>(
        budget: &CallBudget,
        charge: bool,
        cost: Cost,
        op: F,
    ) -> FsResult<R> {
        if !charge {
            return op.await;
        }
        let charge = budget.charge(cost)?;
        charge.settle(op.await)
    }
}

impl types::Host for GuardedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.fs, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        if let Some(e) = self.fs.table.get(&err)?.downcast_ref::<Exceeded>() {
            return Ok(Some(e.error_code()));
        }
        types::Host::filesystem_error_code(&mut self.fs, err)
    }
}

impl HostDescriptor for GuardedFs<'_> {
    async fn write(
        &mut self,
        fd: Resource<types::Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        let Some(file) = self.os_file(&fd)? else {
            self.note_if_read_only(&fd)?;
            return self.fs.write(fd, buf, offset).await;
        };
        let charge = admit_write(self.budget, file_len(&file), offset, buf.len() as u64)?;
        charge.settle(self.fs.write(fd, buf, offset).await)
    }

    async fn set_size(
        &mut self,
        fd: Resource<types::Descriptor>,
        size: types::Filesize,
    ) -> FsResult<()> {
        let Some(file) = self.os_file(&fd)? else {
            self.note_if_read_only(&fd)?;
            return self.fs.set_size(fd, size).await;
        };
        let old = file_len(&file);
        self.budget.check_file_size(old, size)?;
        let charge = self.budget.charge(Cost::bytes(size.saturating_sub(old)))?;
        charge.settle(self.fs.set_size(fd, size).await)
    }

    /// Metered, and counted as an open file while it lives: the stream
    /// holds the file open after its descriptor is dropped (16,000 streams
    /// held as many descriptors past a bound of 256; a helper's find).
    fn write_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        let file = self.os_file(&fd)?;
        self.note_if_read_only(&fd)?;
        let Some(file) = file else {
            return self.fs.write_via_stream(fd, offset);
        };
        let stream = self.with_open_file(|fs| fs.write_via_stream(fd, offset))?;
        self.meter(stream, file, Some(offset))
    }

    /// As [`GuardedFs::write_via_stream`], at the end of the file.
    fn append_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        let file = self.os_file(&fd)?;
        self.note_if_read_only(&fd)?;
        let Some(file) = file else {
            return self.fs.append_via_stream(fd);
        };
        let stream = self.with_open_file(|fs| fs.append_via_stream(fd))?;
        self.meter(stream, file, None)
    }

    async fn open_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<types::Descriptor>> {
        let mutates = oflags.contains(types::OpenFlags::CREATE)
            || oflags.contains(types::OpenFlags::TRUNCATE)
            || flags.contains(types::DescriptorFlags::WRITE);
        if mutates {
            self.note_if_read_only(&fd)?;
        }
        if self.is_special_at(&fd, path_flags, &path).await {
            return Err(ErrorCode::Unsupported.into());
        }
        // `create` with `directory` is refused by wasmtime-wasi as it is.
        let may_create = oflags.contains(types::OpenFlags::CREATE)
            && !oflags.contains(types::OpenFlags::DIRECTORY)
            && self.writable_dir(&fd)?;
        self.budget.open_file()?;
        let opened = if may_create {
            self.open_creating(fd, path_flags, path, oflags, flags)
                .await
        } else {
            open_unblocking(&mut self.fs, fd, path_flags, path, oflags, flags).await
        };
        match &opened {
            Ok(fd) => self.budget.held_by(fd.rep(), 1),
            Err(_) => self.budget.close_file(),
        }
        opened
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        let writable = self.writable_dir(&fd)?;
        let op = self.fs.create_directory_at(fd, path);
        Self::charged(self.budget, writable, Cost::entry(), op).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        let writable = self.writable_dir(&fd)?;
        // The link's target is stored on disk too (up to a page each).
        let cost = Cost {
            bytes: src_path.len() as u64,
            entries: 1,
        };
        let op = self.fs.symlink_at(fd, src_path, dest_path);
        Self::charged(self.budget, writable, cost, op).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.note_if_read_only(&new_descriptor)?;
        let writable = self.writable_dir(&new_descriptor)?;
        let op = self
            .fs
            .link_at(fd, old_path_flags, old_path, new_descriptor, new_path);
        Self::charged(self.budget, writable, Cost::entry(), op).await
    }

    // Everything below adds nothing to the disk: passed through (changes
    // through a read-only descriptor are noted as denied).

    /// Succeeds without passing the hint on (the descriptor is checked):
    /// `dont-need` dropped the worktree's pages from the page cache for
    /// every process, so a read-only plugin's reads came from the device
    /// (667 MB/s from one call), and one such advise took 73 ms (a
    /// helper's find). A hint may be ignored.
    async fn advise(
        &mut self,
        fd: Resource<types::Descriptor>,
        _offset: types::Filesize,
        _len: types::Filesize,
        _advice: types::Advice,
    ) -> FsResult<()> {
        self.fs.get_flags(fd).await.map(drop)
    }

    /// Succeeds without flushing anything (see [`HostDescriptor::sync`]).
    async fn sync_data(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.fs.get_flags(fd).await.map(drop)
    }

    async fn get_flags(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorFlags> {
        self.fs.get_flags(fd).await
    }

    async fn get_type(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::DescriptorType> {
        self.fs.get_type(fd).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<types::Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        self.fs.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<types::Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.fs.read(fd, len, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        if self.is_empty_root(&fd)? {
            return Err(ErrorCode::NotPermitted.into());
        }
        // A listing is a copy of the directory in host memory: it counts as
        // an open file per `ENTRIES_PER_OPEN_FILE` entries, and one more.
        let counts = 1 + self.entries_in(&fd)? / ENTRIES_PER_OPEN_FILE;
        self.budget.open_files(counts)?;
        let listed = self.listed_within_the_call(fd).await;
        match &listed {
            Ok(stream) => self.budget.held_by(stream.rep(), counts),
            Err(_) => self.budget.close_files(counts),
        }
        listed
    }

    /// Succeeds without flushing anything (the descriptor is checked, so a
    /// bad one is still an error). A plugin's fsyncs forced the device's
    /// cache out: one call of a plugin granted no filesystem at all (it
    /// synced its empty root) made ~10,000 flushes a second, each up to
    /// 46 ms and uninterruptible, and with renames between them 62 MB/s
    /// reached the device from a call that wrote nothing (a helper's find).
    /// Durability is the host's business: the harness commits the work.
    async fn sync(&mut self, fd: Resource<types::Descriptor>) -> FsResult<()> {
        self.fs.get_flags(fd).await.map(drop)
    }

    async fn stat(&mut self, fd: Resource<types::Descriptor>) -> FsResult<types::DescriptorStat> {
        self.fs.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.fs.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        self.fs.set_times_at(fd, path_flags, path, atim, mtim).await
    }

    fn drop(&mut self, fd: Resource<types::Descriptor>) -> wasmtime::Result<()> {
        self.budget.dropped(fd.rep());
        HostDescriptor::drop(&mut self.fs, fd)
    }

    async fn readlink_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<String> {
        self.fs.readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        self.fs.remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        old_path: String,
        new_fd: Resource<types::Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        self.note_if_read_only(&new_fd)?;
        self.fs.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn unlink_file_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.note_if_read_only(&fd)?;
        self.fs.unlink_file_at(fd, path).await
    }

    /// Counted as an open file while it lives: a stream with a read
    /// started holds its buffer on the host (99,000 took 6.4 GB in a call).
    fn read_via_stream(
        &mut self,
        fd: Resource<types::Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        let stream = self.with_open_file(|fs| fs.read_via_stream(fd, offset))?;
        let inner = self.fs.table.delete(stream)?;
        let counted: DynInputStream = Box::new(CountedInput {
            inner,
            budget: self.budget.clone(),
        });
        Ok(self.fs.table.push(counted)?)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<types::Descriptor>,
        b: Resource<types::Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.fs.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<types::Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.fs.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<types::Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.fs.metadata_hash_at(fd, path_flags, path).await
    }
}

/// Whether a listing can be made inside the call: on a runtime of several
/// threads (the server's connection and its call pool), where
/// [`tokio::task::block_in_place`] hands the thread's other tasks on.
fn listing_may_block_the_call() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Runs a directory listing (or its count) inside the call, the thread's
/// other tasks handed to another thread meanwhile. Not on the thread
/// running calls as it stood: a plugin listing 50,000 entries in a loop
/// held other plugins' calls for up to 5 s. Not on a blocking task of its
/// own either: a cancelled call (or one whose client went away) is dropped
/// at its next await, and its listing went on without it, slot and all
/// freed; clients cancelling listings of a 128,000-entry directory piled up
/// 300 threads and slowed every other call to seconds (a helper's find).
/// Inside the call, a listing ends before its call can be dropped, and no
/// more run at once than calls do. On a runtime of one thread (tests, the
/// bench) it runs as it is.
fn listed_in_the_call<T>(list: impl FnOnce() -> T) -> T {
    match listing_may_block_the_call() {
        true => tokio::task::block_in_place(list),
        false => list(),
    }
}

/// The entries of the directory `dir` (`getdents`, no `stat`).
fn count_entries(dir: &std::fs::File) -> u64 {
    // The descriptor may be `O_PATH`: read a fresh one of it.
    use rustix::fs::{openat, Dir, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(mut dir) = openat(dir, ".", flags, Mode::empty()).and_then(Dir::new) else {
        return 0; // the listing itself reports why
    };
    let mut n = 0;
    while let Some(Ok(_)) = dir.read() {
        n += 1;
    }
    n
}

impl HostDirectoryEntryStream for GuardedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        loop {
            let next = Resource::new_borrow(stream.rep());
            match self.fs.read_directory_entry(next).await {
                Err(e) if skipped_in_listings(&e) => continue,
                entry => return entry,
            }
        }
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.budget.dropped(stream.rep());
        HostDirectoryEntryStream::drop(&mut self.fs, stream)
    }
}

/// A file input stream, counted by [`CallBudget::open_file`] until dropped.
struct CountedInput {
    inner: DynInputStream,
    budget: CallBudget,
}

impl Drop for CountedInput {
    fn drop(&mut self) {
        self.budget.close_file();
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CountedInput {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for CountedInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        self.inner.read(size)
    }

    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        self.inner.blocking_read(size).await
    }

    fn skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.inner.skip(nelem)
    }

    async fn blocking_skip(&mut self, nelem: usize) -> StreamResult<usize> {
        self.inner.blocking_skip(nelem).await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

/// A file output stream: its writes charged before they run, and counted by
/// [`CallBudget::open_file`] until dropped.
struct MeteredStream {
    inner: DynOutputStream,
    file: Arc<std::fs::File>,
    /// Where the next write lands; `None` for an appending stream (at the
    /// end of the file).
    pos: Option<u64>,
    /// A positioned stream: the file's size at its first write.
    base: Option<u64>,
    budget: CallBudget,
}

impl Drop for MeteredStream {
    fn drop(&mut self) {
        self.budget.close_file();
    }
}

impl MeteredStream {
    /// The size to charge a write at `start` against. A positioned stream
    /// reads it once: after its first write (which paid for any hole before
    /// it) every byte below `pos` is paid for, whatever else happened to
    /// the file, so it writes on without another `fstat` per chunk.
    fn size_before(&mut self, start: Option<u64>) -> u64 {
        match (start, self.base) {
            (Some(p), Some(base)) => base.max(p),
            (Some(_), None) => *self.base.insert(file_len(&self.file)),
            (None, _) => file_len(&self.file),
        }
    }

    fn admit(&mut self, len: usize) -> StreamResult<Charge> {
        let len = len as u64;
        let size = self.size_before(self.pos);
        let start = self.pos.unwrap_or(size);
        let charge = admit_write(&self.budget, size, start, len)
            .map_err(|e| StreamError::LastOperationFailed(e.into()))?;
        if let Some(p) = &mut self.pos {
            *p = p.saturating_add(len);
        }
        Ok(charge)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for MeteredStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for MeteredStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let _charge = self.admit(bytes.len())?;
        self.inner.write(bytes)
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        let _charge = self.admit(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        let _charge = self.admit(nelem)?;
        self.inner.write_zeroes(nelem)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disk_budget::{DiskLimits, WorktreeUsage};

    #[test]
    fn a_write_pays_for_the_hole_before_it() {
        let usage = Arc::new(WorktreeUsage::default());
        let limits = DiskLimits {
            call_bytes: 500,
            max_file_size: 600,
            ..DiskLimits::default()
        };
        let b = CallBudget::new(limits, Arc::default(), usage.clone());
        // 10 bytes at offset 100 of a 40-byte file: 60 bytes of hole + 10.
        let _ = admit_write(&b, 40, 100, 10).unwrap();
        assert_eq!(usage.bytes(), 70);
        // Inside the file: only the bytes.
        let _ = admit_write(&b, 110, 0, 10).unwrap();
        assert_eq!(usage.bytes(), 80);
        assert_eq!(
            admit_write(&b, 0, 595, 10).err(),
            Some(Exceeded::FileSize(600))
        );
        assert_eq!(
            admit_write(&b, 0, 590, 10).err(),
            Some(Exceeded::CallBytes(500))
        );
        assert_eq!(usage.bytes(), 80);
    }
}
