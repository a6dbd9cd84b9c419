import DownloadModel

/// One group in the manager's task table: its record, its tasks in the order given, and, for an
/// atomic group, the runs whose files are complete and durable, each waiting (suspended, holding
/// no place) for the decision to publish them all.
struct GroupEntry {
    var record: DownloadGroupRecord
    var tasks: [UInt64] = []
    /// Runs waiting for the publication, by task: resumed with where the group placed the file,
    /// `publish` (decided before a restart), `stopped`, or an error (its name is taken: `FileExists`).
    var waiting: [UInt64: CheckedContinuation<GroupPublication, Error>] = [:]
    /// The decision is being recorded and the files placed (between the last file ready and the
    /// last rename): a run stopped meanwhile is answered when the placing ends.
    var deciding = false
    /// Runs stopped while the files were being placed (`deciding`).
    var stoppedWhileDeciding: Set<UInt64> = []
    /// How many files ran when their shares of the group's bandwidth were last set.
    var sharedAmong = 0

    init(record: DownloadGroupRecord) {
        self.record = record
    }
}
