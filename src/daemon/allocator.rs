//! The allocator's settings for the daemon, a process that lives for months and, at a start at
//! scale, reads tens of megabytes at once from several threads (pages of pods and Nodes, Slurm's
//! node list).
//!
//! glibc's defaults suit short programs: each thread allocating at once gets an arena of its own
//! (up to 8 per core), and freeing a large block raises the size from which blocks are mapped on
//! their own (up to 32 MiB), so that the next large blocks land in the arenas, where what is freed
//! around them stays resident. Two arenas and a fixed 512 KiB threshold: a block that large is
//! mapped and given back when freed.

/// Applies the settings; before the first thread starts.
pub fn settle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets glibc's allocator parameters; called before the daemon's
        // runtime starts any thread, so no allocation runs beside it.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
            libc::mallopt(libc::M_MMAP_THRESHOLD, 512 << 10);
        }
    }
}
