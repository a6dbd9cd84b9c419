/// Why the store refused or could not read something.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The file system under the database is full (SQLITE_FULL, even with the reserve released).
    public let isStorageFull: Bool

    init(_ description: String, storageFull: Bool = false) {
        self.description = description
        isStorageFull = storageFull
    }
}
