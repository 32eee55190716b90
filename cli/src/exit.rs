//! Exit statuses of the `quorumlock` command.

/// Success (for `status`: the resource is held by a quorum; for
/// `leader`: the election has a leader).
pub const OK: u8 = 0;
/// `status`: the resource is not held by a quorum; `leader`: nobody leads.
pub const NOT_HELD: u8 = 1;
/// Bad flags or arguments (also clap's own usage errors).
pub const USAGE: u8 = 2;
/// No quorum of nodes answered (for at most `--outage-wait`).
pub const UNAVAILABLE: u8 = 69;
/// Internal error (e.g. a signal handler could not be installed).
pub const SOFTWARE: u8 = 70;
/// A quorum can never be had with this configuration: wrong password,
/// missing ACL permission, a key of another type under the name, or
/// (`--permits`) another number of permits than the semaphore's holders.
pub const CONFIG: u8 = 78;
/// The lock is held by someone else, (`--permits`) too few permits are
/// free, or (`elect`) another process leads (`--no-wait`, or `--wait` ran
/// out).
pub const BUSY: u8 = 75;
/// The lock (the permit, the leadership) was lost while the command (or a
/// process it started) ran; all of them were terminated.
pub const LOST: u8 = 79;
/// The command could not be executed (permission).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub const NOT_FOUND: u8 = 127;

/// The text of the exit status table, for `--help`.
pub const TABLE: &str = "\
Exit status of `run` and `elect`: the command's own status, or
    75  the lock is held elsewhere, with --permits too few permits are free,
        for `elect` another process leads (--no-wait, or --wait ran out)
    69  no quorum of Redis nodes answered (at once with --no-wait, else
        after --outage-wait)
    78  configuration error no retry cures: wrong password (WRONGPASS,
        NOAUTH), missing ACL permission (NOPERM), or the resource's key
        holds a value of another type (WRONGTYPE) on too many nodes, or
        --permits differs from the semaphore's holders'
    79  the lock (the permit, the leadership) was lost while the command,
        or a process it started, ran; all of them were sent SIGTERM
        (SIGKILL after --grace or at the end of the lock's validity) and
        this status is returned
   126  the command could not be executed
   127  the command was not found
  128+N the command was killed by signal N, or quorumlock got signal N
        before the command started (the lock was released)
     2  bad flags or arguments (also: --ttl too short to renew, --permits
        outside 1 to 1024, --take above --permits, two nodes that are the
        same server, a node that can evict keys)
Exit status of `status`: 0 held by a quorum (with --permits: some permit
is; with --shared: read or written), 1 not held, 69 no quorum answered, 78
configuration error (as above).
Exit status of `leader`: 0 a leader, 1 no leader, 69, 78 as for `status`.";
