import FileIdentities
/// Whether an existing partial file may be kept (its bytes resumed from) or must be replaced by
/// a fresh one. A file is only ever kept when it is a regular file of the user with one link.
public enum PartialReuse: Sendable, Hashable {
    /// Always start a fresh file (a new task: nothing on disk is ours yet).
    case never
    /// Keep it if it is the user's (a task recorded before inodes were).
    case ifOwned
    /// Keep it only if it is still this very file.
    case ifSame(FileIdentity)
    /// Keep it only if it is still this very file, and never create one: a sandboxed app's task
    /// after a restart, whose directory descriptor is gone (only what it created is reused).
    case onlyIfSame(FileIdentity)
}
