#include "CMallocTuning.h"

#include <malloc.h>

/// How the daemon's memory goes back to the system, set before the Swift runtime and any
/// thread start (a constructor: glibc fixes how many arenas it makes when the second thread
/// first allocates, so a setting made later from Swift's code, already on a thread of the pool,
/// comes too late for that one).
///
/// - Blocks of 4 MiB and more are mapped and unmapped (returned when freed): by default glibc
///   raises its mmap threshold after the first large block is freed, so a 20 MB message a caller
///   sent stays in the heap of whichever thread's arena read it. Not lower: NIOSSL decrypts each
///   read into a buffer that grows past 1 MiB and is copied afresh while the last one is still
///   being written, so at a 1 MiB threshold every read of an HTTPS download mapped new pages and
///   the kernel zeroed them (a fifth of the daemon's CPU under `NIOSSLHandler.doDecodeData`);
///   at 4 MiB they are reused from the heap: 1 GiB over HTTPS in 1.2 s at 1.3 CPU s instead of
///   1.8 s at 2.2, for 6 MiB more just after 100,000 tasks were queued (Benchmarks/RESULTS.md,
///   "HTTPS at curl's cost").
/// - Up to 8 MiB free at the top of a heap is kept, so the receive buffers of every transfer are
///   reused without page faults.
/// - One arena for every thread. Each thread's arena otherwise keeps the freed memory of the work
///   that passed through it (a StartGroup's decoded message on one, its records on another), each
///   fragmented by what lives on beside it: 100,000 tasks taken by ten StartGroups of 10,000 left
///   133 MiB of RSS with one arena against 145-148 with glibc's default, and a hundred transfers
///   at once peaked at 78 MiB against 91, for 5-10 % more CPU while the groups were taken (their
///   threads share the arena's lock); a small task and the 1 GiB stream cost the same
///   (Benchmarks/RESULTS.md, "One arena"). glibc's per-thread caches serve the small blocks most
///   allocations are without the lock.
static int tuned;

__attribute__((constructor)) static void downloadsd_tune_malloc(void) {
    int ok = 1;
    ok &= mallopt(M_MMAP_THRESHOLD, 4 << 20);
    ok &= mallopt(M_TRIM_THRESHOLD, 8 << 20);
    ok &= mallopt(M_ARENA_MAX, 1);
    tuned = ok;
}

int downloadsd_malloc_tuned(void) { return tuned; }

/// A StartGroup of 10,000 files frees its decoded message and its working copies among the
/// records it keeps; glibc gives back only what is free at the top of the heap, so the rest stayed
/// resident: 100,000 tasks queued by ten such groups held 141 MiB, against 129 with this after each
/// group (and 120 once the daemon restarts holding them; Benchmarks/RESULTS.md, "HTTPS at curl's
/// cost: the rest").
void downloadsd_release_free_memory(void) { malloc_trim(0); }
