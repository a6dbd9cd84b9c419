import DownloadModel

extension DownloadTaskRecord {
    /// A download of uid 1000's session "s" from 127.0.0.1 to /tmp, named by its id, in `state`:
    /// for tests of what a record or a task holds, which never run it.
    static func plain(_ id: UInt64, state: DownloadState = .queued) -> DownloadTaskRecord {
        DownloadTaskRecord(
            id: id, owner: 1000, session: "s", url: "http://127.0.0.1/\(id)", destination: "/tmp/\(id)",
            destinationIsDirectory: false, options: DownloadOptions(), state: state)
    }
}
