/// What a run whose file waits for its atomic group learns (`TransferRunOwner.awaitPublication`).
enum GroupPublication: Sendable, Equatable {
    /// The run was stopped first: nothing of it is published.
    case stopped
    /// The decision was recorded by an earlier run (found at a restart): the run places its file.
    case publish
    /// The group placed the file with the others' (all or none): it is here now.
    case placed(String)
}
