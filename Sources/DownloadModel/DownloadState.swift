/// The states of a download task and the transitions allowed between them (one `switch`, like
/// Alamofire's `Request.State.canTransitionTo`).
public enum DownloadState: String, Sendable, Hashable, CaseIterable, Codable {
    case queued, running, paused, retrying, finished, failed, cancelled

    /// No further transition except removal.
    public var isTerminal: Bool { self == .finished || self == .failed || self == .cancelled }

    /// Queued, running or retrying: the session still has work to do for this task.
    public var isActive: Bool { self == .queued || self == .running || self == .retrying }

    /// Running or retrying: the task holds a transfer place (and a run).
    public var holdsTransfer: Bool { self == .running || self == .retrying }

    public func canTransition(to next: DownloadState) -> Bool {
        switch (self, next) {
        case (.queued, .running), (.queued, .paused), (.queued, .cancelled), (.queued, .failed):
            return true
        case (.running, .finished), (.running, .failed), (.running, .paused), (.running, .cancelled),
            (.running, .retrying), (.running, .queued):
            // running → queued: the daemon stops and will carry on at the next start.
            return true
        case (.retrying, .running), (.retrying, .paused), (.retrying, .cancelled), (.retrying, .failed),
            (.retrying, .queued):
            return true
        case (.paused, .queued), (.paused, .cancelled):
            return true
        case (.failed, .queued), (.failed, .cancelled):
            // A failed task can be resumed (from its durable offset) or cancelled.
            return true
        default:
            return false
        }
    }
}
