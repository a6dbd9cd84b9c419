import DownloadModel

/// One group in the manager's task table: its record, its tasks in the order given, and, for an
/// atomic group, the runs whose files are complete and durable, each waiting (suspended, holding
/// no place) for the decision to publish them all.
struct GroupEntry {
    var record: DownloadGroupRecord
    var tasks: [UInt64] = []
    /// Runs waiting for the publication, by task: resumed with true to publish, false to stop,
    /// or an error (its name is taken: `FileExists`).
    var waiting: [UInt64: CheckedContinuation<Bool, Error>] = [:]
    /// The decision is being recorded (between the last file ready and the store's commit).
    var deciding = false
    /// How many files ran when their shares of the group's bandwidth were last set.
    var sharedAmong = 0

    init(record: DownloadGroupRecord) {
        self.record = record
    }
}
