/// The exported objects of a connection, by path. Pure bookkeeping: no I/O.
struct ObjectTable: Sendable {
    private(set) var objects: [ObjectPath: ExportedObject] = [:]
    private(set) var subtrees: [ObjectPath: ExportedSubtree] = [:]

    /// An exported object, or one a subtree finds.
    subscript(path: ObjectPath) -> ExportedObject? {
        objects[path] ?? subtree(above: path)?.find(path)
    }

    /// The subtree `path` lies strictly below.
    func subtree(above path: ObjectPath) -> ExportedSubtree? {
        subtrees.values.first { $0.path.isAncestor(of: path) }
    }

    mutating func insert(_ subtree: ExportedSubtree) throws {
        guard subtrees[subtree.path] == nil, objects[subtree.path] == nil else {
            throw BusError.failed("something is already exported at \(subtree.path)")
        }
        subtrees[subtree.path] = subtree
    }

    mutating func removeSubtree(_ path: ObjectPath) {
        subtrees.removeValue(forKey: path)
    }

    mutating func insert(_ object: ExportedObject) throws {
        guard objects[object.path] == nil, subtrees[object.path] == nil else {
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
        for candidate in Array(objects.keys) + Array(subtrees.keys) where path.isAncestor(of: candidate) {
            names.insert(String(candidate.elements[depth]))
        }
        return names.sorted()
    }

    /// Whether `path` is an object, a subtree's root or an inner node of the tree (objects a
    /// subtree finds are answered by the subtree).
    func exists(_ path: ObjectPath) -> Bool {
        objects[path] != nil || subtrees[path] != nil
            || objects.keys.contains { path.isAncestor(of: $0) } || subtrees.keys.contains { path.isAncestor(of: $0) }
    }

    /// Subtrees strictly below `path` (an object manager reports their objects too).
    func subtrees(below path: ObjectPath) -> [ExportedSubtree] {
        subtrees.values.filter { path.isAncestor(of: $0.path) || path == $0.path }
    }
}
