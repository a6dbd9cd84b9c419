/// The exported objects of a connection, by path. Pure bookkeeping: no I/O.
struct ObjectTable: Sendable {
    private(set) var objects: [ObjectPath: ExportedObject] = [:]

    subscript(path: ObjectPath) -> ExportedObject? { objects[path] }

    mutating func insert(_ object: ExportedObject) throws {
        guard objects[object.path] == nil else {
            throw BusError.failed("an object is already exported at \(object.path)")
        }
        objects[object.path] = object
    }

    @discardableResult
    mutating func remove(_ path: ObjectPath) -> ExportedObject? {
        objects.removeValue(forKey: path)
    }

    /// The nearest object manager at or above `path` (excluding `path` itself).
    func manager(above path: ObjectPath) -> ExportedObject? {
        objects.values
            .filter { $0.isObjectManager && $0.path.isAncestor(of: path) }
            .max { $0.path.rawValue.count < $1.path.rawValue.count }
    }

    /// The objects an object manager at `path` reports: every object strictly below it.
    func managed(by path: ObjectPath) -> [ExportedObject] {
        objects.values.filter { path.isAncestor(of: $0.path) }.sorted { $0.path < $1.path }
    }

    /// Names of the direct children of `path` in the tree of exported paths (for introspection).
    func childNames(of path: ObjectPath) -> [String] {
        let depth = path.elements.count
        var names = Set<String>()
        for candidate in objects.keys where path.isAncestor(of: candidate) {
            names.insert(String(candidate.elements[depth]))
        }
        return names.sorted()
    }

    /// Whether `path` is an object or an inner node of the tree.
    func exists(_ path: ObjectPath) -> Bool {
        objects[path] != nil || objects.keys.contains { path.isAncestor(of: $0) }
    }
}
