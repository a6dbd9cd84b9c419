import GRDB

/// One write of the engine's state to the store, made alone (`DownloadStore.save`) or with the
/// others of a delivery batch in one transaction (`DownloadStore.commit`).
public struct StoreWrite: Sendable {
    /// Whether a full disk may release the reserve for it (checkpoints may not: the reserve is
    /// kept for the state change that follows).
    let mayUseReserve: Bool
    let body: @Sendable (Database) throws -> Void
}
