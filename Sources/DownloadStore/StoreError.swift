/// Why the store refused or could not read something.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
