//! Hands a workspace to the sandbox user before a command runs as it.
//!
//! When the processor runs as root, `bash` commands run as an unprivileged uid while the file tools (and snapshot
//! restores) write as root, so files and directories the processor created would be read-only to the command. Before
//! each command the workspace tree is walked and every directory and regular file not yet owned by the sandbox user is
//! given to it.
//!
//! The walk may run while another command of the same workspace (a second session sharing it) is running as that
//! user and rearranging the tree, so it never follows a path twice: each directory is opened relative to its parent's
//! descriptor with `O_NOFOLLOW`, each entry is pinned by an `O_PATH` descriptor before its owner changes, symbolic
//! links are never followed (nor re-owned), and it stays on the workspace's file system. A regular file with more than
//! one hard link is left alone, since its other names could be outside the workspace.

use std::ffi::CStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Gid, Mode, OFlags, Stat, Uid};
use rustix::io::Errno;

/// Deepest directory level handled; deeper levels keep their owner (the command can read but not change them).
const MAX_DEPTH: usize = 128;

/// The uid and gid that should own the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// What one walk did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Handover {
    /// Entries given to the owner.
    pub changed: u64,
    /// Entries left alone: multiply linked files, other file systems, too deep.
    pub skipped: u64,
}

/// Gives every directory and regular file under `root` (and `root` itself) to `owner`.
pub fn hand_over(root: &Path, owner: Owner) -> std::io::Result<Handover> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::open(root, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&dir)?;
    let mut done = Handover::default();
    if !owned_by(&stat, owner) {
        rustix::fs::fchown(&dir, Some(uid(owner)), Some(gid(owner)))?;
        done.changed += 1;
    }
    walk(dir, stat.st_dev, owner, 0, &mut done)?;
    Ok(done)
}

fn walk(
    dir: OwnedFd,
    dev: u64,
    owner: Owner,
    depth: usize,
    done: &mut Handover,
) -> Result<(), Errno> {
    for entry in Dir::read_from(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        match visit(&dir, name, dev, owner, depth, done) {
            // Gone or replaced since the directory was read (a running command deleted it, or swapped a directory
            // for a link): nothing to hand over.
            Ok(()) | Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn visit(
    dir: &OwnedFd,
    name: &CStr,
    dev: u64,
    owner: Owner,
    depth: usize,
    done: &mut Handover,
) -> Result<(), Errno> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if stat.st_dev != dev {
        done.skipped += 1;
        return Ok(());
    }
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => {
            if depth >= MAX_DEPTH {
                done.skipped += 1;
                return Ok(());
            }
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let child = rustix::fs::openat(dir, name, flags, Mode::empty())?;
            let pinned = rustix::fs::fstat(&child)?;
            if pinned.st_dev != dev {
                done.skipped += 1;
                return Ok(());
            }
            if !owned_by(&pinned, owner) {
                rustix::fs::fchown(&child, Some(uid(owner)), Some(gid(owner)))?;
                done.changed += 1;
            }
            walk(child, dev, owner, depth + 1, done)
        }
        FileType::RegularFile if !owned_by(&stat, owner) => {
            let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let file = rustix::fs::openat(dir, name, flags, Mode::empty())?;
            let pinned = rustix::fs::fstat(&file)?;
            let regular = FileType::from_raw_mode(pinned.st_mode) == FileType::RegularFile;
            if !regular || pinned.st_nlink != 1 || pinned.st_dev != dev {
                done.skipped += 1;
                return Ok(());
            }
            rustix::fs::chownat(
                file.as_fd(),
                c"",
                Some(uid(owner)),
                Some(gid(owner)),
                AtFlags::EMPTY_PATH,
            )?;
            done.changed += 1;
            Ok(())
        }
        // Symbolic links, owned files, sockets, FIFOs and devices keep their owner.
        _ => Ok(()),
    }
}

fn owned_by(stat: &Stat, owner: Owner) -> bool {
    stat.st_uid == owner.uid && stat.st_gid == owner.gid
}

fn uid(owner: Owner) -> Uid {
    Uid::from_raw(owner.uid)
}

fn gid(owner: Owner) -> Gid {
    Gid::from_raw(owner.gid)
}
