// Many small downloads, layer by layer (issue 24): what AsyncHTTPClient costs alone, with the
// file written as the service writes it, through the engine without the store or D-Bus, and with
// the store. The daemon's figure (Benchmarks/profile-small.py) adds D-Bus to the last of them.

/// One layer of the small-files case: how a download is run.
enum SmallFilesLayer: String, CaseIterable {
    /// An AsyncHTTPClient GET, the body read and dropped.
    case http
    /// The same, the body written as the engine writes it: a partial file created at the
    /// response's head, written as the body arrives, `fdatasync`, renamed in place, the
    /// directory synced.
    case file
    /// The engine (`SessionManager`, its queues and delegate) with one observer that waits for
    /// `Finished`: no store, no D-Bus.
    case engine
    /// The engine with the daemon's store before that observer (`StoreObserver`, SQLite in a
    /// fresh directory under /var/tmp, on disk as the daemon's state is by default): no D-Bus.
    case store
}
