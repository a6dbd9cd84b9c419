/// Sessions are per user: the engine knows a session as `"<uid>/<name>"`.
struct SessionKey: Hashable, Sendable {
    let owner: UInt32
    let name: String

    var engineKey: String { "\(owner)/\(name)" }

    init(owner: UInt32, name: String) {
        self.owner = owner
        self.name = name
    }

    init?(engineKey: String) {
        guard let slash = engineKey.firstIndex(of: "/"), let owner = UInt32(engineKey[..<slash]) else { return nil }
        self.owner = owner
        self.name = String(engineKey[engineKey.index(after: slash)...])
    }
}
