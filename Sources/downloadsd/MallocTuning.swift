/// glibc's `mallopt` (not in Swift's Glibc module: `<malloc.h>`).
@_silgen_name("mallopt")
private func mallopt(_ parameter: Int32, _ value: Int32) -> Int32

/// How the daemon's memory goes back to the system. By default glibc raises its mmap threshold
/// after the first large block is freed, so a 20 MB message a caller sent stays in the heap of
/// whichever thread's arena read it, one per arena. Fixed thresholds instead: blocks of 1 MiB and
/// more are mapped and unmapped (returned when freed), and up to 8 MiB free at the top of a heap
/// is kept, so the 64 KiB receive buffers of every transfer are reused without page faults.
enum MallocTuning {
    static let mmapThreshold: Int32 = -3  // M_MMAP_THRESHOLD
    static let trimThreshold: Int32 = -1  // M_TRIM_THRESHOLD

    static func apply() {
        _ = mallopt(mmapThreshold, 1 << 20)
        _ = mallopt(trimThreshold, 8 << 20)
    }
}
