import DBus
import DownloadModel
import DownloadsAPI

/// A group as its files make it at one moment: its state, counts and bytes, and the values of
/// its properties (one table for Get, GetAll and the signals).
struct GroupSummary {
    let group: DownloadGroupRecord
    let tasks: [TaskSnapshot]

    init(_ group: DownloadGroupRecord, _ tasks: [TaskSnapshot]) {
        self.group = group
        self.tasks = tasks
    }

    var finished: Int { tasks.filter { $0.state == .finished }.count }
    var failed: Int { tasks.filter { $0.state == .failed }.count }
    var bytesWritten: Int64 { tasks.reduce(0) { $0 + $1.bytesWritten } }
    /// -1 while a file's length is unknown.
    var bytesExpected: Int64 {
        tasks.contains { $0.expectedLength < 0 } ? -1 : tasks.reduce(0) { $0 + $1.expectedLength }
    }

    /// In task states: finished when every file is; failed when a file failed and (atomic) the
    /// group cannot publish, or nothing is left running; running while a file runs or retries;
    /// then queued, paused, cancelled.
    var state: DownloadState {
        let states = tasks.map(\.state)
        if !states.isEmpty, states.allSatisfy({ $0 == .finished }) { return .finished }
        let active = states.contains { $0.isActive }
        if states.contains(.failed), group.atomic && !group.publishing || !active { return .failed }
        if states.contains(where: { $0 == .running || $0 == .retrying }) { return .running }
        if states.contains(.queued) { return .queued }
        if states.contains(.paused) { return .paused }
        if states.contains(.cancelled) { return .cancelled }
        return .queued
    }

    /// Every property of the group at this moment (GetAll), from `value`.
    var properties: [String: DBusValue] {
        Dictionary(uniqueKeysWithValues: GroupProperty.allCases.map { ($0.name, value($0)) })
    }

    func value(_ property: GroupProperty) -> DBusValue {
        switch property {
        case .id: return .uint64(group.id)
        case .session: return .string(SessionKey.shown(group.session))
        case .title: return .string(group.title)
        case .state: return .string(state.rawValue)
        case .files: return .uint32(UInt32(clamping: tasks.count))
        case .filesFinished: return .uint32(UInt32(clamping: finished))
        case .filesFailed: return .uint32(UInt32(clamping: failed))
        case .bytesWritten: return .int64(bytesWritten)
        case .bytesExpected: return .int64(bytesExpected)
        case .tasks: return .objectPaths(tasks.map { DownloadsAPI.taskPath($0.id) })
        case .atomic: return .boolean(group.atomic)
        }
    }
}
