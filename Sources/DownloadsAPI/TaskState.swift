/// The states a task's `State` property and `StateChanged` signal name.
public enum TaskState: String, Sendable, Hashable, CaseIterable {
    case queued, running, paused, retrying, finished, failed, cancelled

    /// Finished, failed or cancelled: nothing more will happen (Cancel then removes it).
    public var isTerminal: Bool { self == .finished || self == .failed || self == .cancelled }
}
