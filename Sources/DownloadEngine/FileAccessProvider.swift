/// Hands out the file access for one task owner (uid).
public protocol FileAccessProvider: Sendable {
    func files(for owner: UInt32) -> any FileAccess
}
