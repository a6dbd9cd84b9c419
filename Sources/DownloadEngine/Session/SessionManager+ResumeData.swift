import DownloadModel
import UserFiles

/// Resume data out (`resumeData`) and back in (`adopt`: the old task resumed, or a new one
/// taking over its partial file).
extension SessionManager {
    /// Resume data for a paused or failed task that holds a resumable partial download.
    public func resumeData(for id: UInt64) throws -> [UInt8] {
        let record = try task(id).record
        guard record.state == .paused || record.state == .failed || record.state == .queued else {
            throw DownloadError.wrongState(
                "task \(id) is \(record.state); only a paused, failed or queued task has resume data")
        }
        return try ResumeData(record: record).encoded(key: key)
    }

    /// Verifies a blob made by this engine for `owner`.
    public func decodeResumeData(_ blob: [UInt8], owner: UInt32, app: String = "") throws -> ResumeData {
        try ResumeData.decode(blob, key: key, owner: owner, app: app)
    }

    /// `ResumeWithData`: the task the data came from, if it still exists, gets `change` and is
    /// resumed (a paused or failed one) or left running; otherwise a new task takes over the
    /// old one's partial file when it is still there, or starts from zero when it is not.
    /// `url`: carry on at this URL instead (`setURL`: the bytes are kept when the entity is the
    /// same); a running task cannot take one (`WrongState`).
    /// `anchor`: a new descriptor to make the task's files below (`destination_fd`).
    /// `group`: a new task joins this group (`adoptGroup`).
    public func adopt(
        _ data: ResumeData, change: DownloadOptions.Change, url: String? = nil, fileMode: UInt32? = nil,
        anchor: DescriptorAnchor? = nil,
        group: UInt64 = 0
    ) async throws -> TaskSnapshot {
        if let existing = state.withLockedValue({ $0.tasks[data.taskID] }), existing.record.owner == data.owner,
            existing.record.app == data.app
        {
            if let anchor, existing.snapshot.state != .finished, existing.snapshot.state != .cancelled {
                existing.update { $0.anchor = anchor }
            }
            switch existing.snapshot.state {
            case .paused, .failed:
                if let url { try await setURL(data.taskID, to: url) }
                try changeOptions(data.taskID, change)
                try resume(data.taskID)
                return existing.snapshot
            case .queued, .running, .retrying:
                if let url { try await setURL(data.taskID, to: url) }
                return try changeOptions(data.taskID, change)
            case .finished, .cancelled:
                break
            }
        }
        var request = data.request
        if let url {
            request.url = url
            request.options.credentialsOrigin = url
        }
        request.fileMode = fileMode
        request.options.apply(change)
        try request.options.validate()
        let id = state.withLockedValue { $0.takeID() }
        var record = DownloadTaskRecord(id: id, request: request)
        record.group = group
        let old = DownloadTaskRecord(id: data.taskID, request: data.request)
        let access = fileAccess(for: record, anchor: anchor)
        let source = old.partialPath, target = record.partialPath
        var adopted = false
        if data.offset > 0, data.validator != nil {
            // Only a regular file of the owner with one link is taken over (publish checks).
            adopted =
                (try? await DownloadTask(record: record).onIOQueue {
                    guard try access.exists(source) else { return false }
                    // A daemon whose state was lost may give the new task the old one's id: the file is already its own.
                    if source != target {
                        try access.publish(source, identity: nil, to: target, replace: true, mode: nil)
                    }
                    return true
                }) == true
        }
        if data.upload?.resumable?.resource != nil {
            // A resumable upload goes on from the offset the server confirmed (asked again first).
            record.durableOffset = data.offset
        }
        if adopted {
            record.durableOffset = data.offset
            record.validator = data.validator
            record.segments = data.segments
            record.expectedLength = data.expectedLength
            record.finalURL = url == nil ? data.finalURL : nil
            record.resolvedPath = data.resolvedPath
        }
        let fixed = record
        return insert(anchor: anchor) { _ in fixed }
    }
}
