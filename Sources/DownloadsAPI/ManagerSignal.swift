import DBus

/// The signals of `org.example.Downloads`, typed: the service builds them, clients decode them,
/// and `Connection.emit` checks each against its declaration in `DownloadsInterfaces.manager`.
public enum ManagerSignal: Sendable, Hashable {
    case progress(task: ObjectPath, bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64)
    case finished(task: ObjectPath, location: String)
    case failed(task: ObjectPath, errorName: String, message: String, resumeData: [UInt8])
    case stateChanged(task: ObjectPath, state: String)
    case eventsFinished(session: String)
    case groupProgress(
        group: ObjectPath, bytesWritten: Int64, bytesExpected: Int64, filesFinished: UInt32, files: UInt32)
    case groupFinished(group: ObjectPath)
    case groupFailed(group: ObjectPath, errorName: String, message: String)

    public var name: String {
        switch self {
        case .progress: return "Progress"
        case .finished: return "Finished"
        case .failed: return "Failed"
        case .stateChanged: return "StateChanged"
        case .eventsFinished: return "EventsFinished"
        case .groupProgress: return "GroupProgress"
        case .groupFinished: return "GroupFinished"
        case .groupFailed: return "GroupFailed"
        }
    }

    public var arguments: [DBusValue] {
        switch self {
        case .progress(let task, let written, let total, let expected):
            return [.objectPath(task), .int64(written), .int64(total), .int64(expected)]
        case .finished(let task, let location):
            return [.objectPath(task), .string(location)]
        case .failed(let task, let name, let message, let resumeData):
            return [.objectPath(task), .string(name), .string(message), .bytes(resumeData)]
        case .stateChanged(let task, let state):
            return [.objectPath(task), .string(state)]
        case .eventsFinished(let session):
            return [.string(session)]
        case .groupProgress(let group, let written, let expected, let finished, let files):
            return [.objectPath(group), .int64(written), .int64(expected), .uint32(finished), .uint32(files)]
        case .groupFinished(let group):
            return [.objectPath(group)]
        case .groupFailed(let group, let name, let message):
            return [.objectPath(group), .string(name), .string(message)]
        }
    }

    /// The task a signal is about (nil for EventsFinished).
    public var task: ObjectPath? {
        switch self {
        case .progress(let task, _, _, _), .finished(let task, _), .failed(let task, _, _, _),
            .stateChanged(let task, _):
            return task
        case .eventsFinished, .groupProgress, .groupFinished, .groupFailed:
            return nil
        }
    }

    /// Decodes a received signal; nil when it is not one of ours or its arguments do not fit.
    public init?(name: String, arguments: [DBusValue]) {
        switch (name, arguments.count) {
        case ("Progress", 4):
            guard let task = arguments[0].objectPathValue, let a = arguments[1].int64Value,
                let b = arguments[2].int64Value,
                let c = arguments[3].int64Value
            else { return nil }
            self = .progress(task: task, bytesWritten: a, totalBytesWritten: b, totalBytesExpected: c)
        case ("Finished", 2):
            guard let task = arguments[0].objectPathValue, let location = arguments[1].stringValue else { return nil }
            self = .finished(task: task, location: location)
        case ("Failed", 4):
            guard let task = arguments[0].objectPathValue, let name = arguments[1].stringValue,
                let message = arguments[2].stringValue, let data = arguments[3].bytesValue
            else { return nil }
            self = .failed(task: task, errorName: name, message: message, resumeData: data)
        case ("StateChanged", 2):
            guard let task = arguments[0].objectPathValue, let state = arguments[1].stringValue else { return nil }
            self = .stateChanged(task: task, state: state)
        case ("EventsFinished", 1):
            guard let session = arguments[0].stringValue else { return nil }
            self = .eventsFinished(session: session)
        case ("GroupProgress", 5):
            guard let group = arguments[0].objectPathValue, let written = arguments[1].int64Value,
                let expected = arguments[2].int64Value, let finished = arguments[3].uint32Value,
                let files = arguments[4].uint32Value
            else { return nil }
            self = .groupProgress(
                group: group, bytesWritten: written, bytesExpected: expected, filesFinished: finished, files: files)
        case ("GroupFinished", 1):
            guard let group = arguments[0].objectPathValue else { return nil }
            self = .groupFinished(group: group)
        case ("GroupFailed", 3):
            guard let group = arguments[0].objectPathValue, let name = arguments[1].stringValue,
                let message = arguments[2].stringValue
            else { return nil }
            self = .groupFailed(group: group, errorName: name, message: message)
        default:
            return nil
        }
    }
}
