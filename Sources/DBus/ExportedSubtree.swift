/// Many objects of one kind below one path, served by one handler instead of one registration
/// each (sd-bus's fallback vtables with `find` and `enumerate`; importd serves its transfers so).
/// Ten thousand objects cost nothing until they are called.
public struct ExportedSubtree: Sendable {
    /// The object at a path strictly below `path`, built when it is called; nil: no object.
    /// Its `accessCheck` decides, per caller, whether it exists for them (Introspect too).
    public typealias Find = @Sendable (ObjectPath) -> ExportedObject?
    /// The child names below `path` that the caller may see (Introspect, GetManagedObjects).
    public typealias Enumerate = @Sendable (MethodCall) async throws -> [String]

    public let path: ObjectPath
    public let find: Find
    public let enumerate: Enumerate

    public init(path: ObjectPath, find: @escaping Find, enumerate: @escaping Enumerate) {
        self.path = path
        self.find = find
        self.enumerate = enumerate
    }
}
