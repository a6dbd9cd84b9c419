import DBus

/// The public contract of org.example.Downloads as code: names, paths, interface declarations,
/// error names, option keys and their `a{sv}` codec, states and signals. Shared by the service,
/// the client library and the tests, so none of them spells a name twice.
public enum DownloadsAPI {
    public static let busName = "org.example.Downloads"
    public static let managerPath: ObjectPath = "/org/example/Downloads"
    public static let tasksPath: ObjectPath = "/org/example/Downloads/tasks"
    /// v1.3: the group objects, `/org/example/Downloads/groups/<id>`.
    public static let groupsPath: ObjectPath = "/org/example/Downloads/groups"

    /// `/org/example/Downloads/tasks/<id>`.
    public static func taskPath(_ id: UInt64) -> ObjectPath {
        (try? tasksPath.appending("\(id)")) ?? tasksPath
    }

    /// The id in a task path, or nil when `path` is not one.
    public static func taskID(_ path: ObjectPath) -> UInt64? { id(in: path, below: tasksPath) }

    /// `/org/example/Downloads/groups/<id>`.
    public static func groupPath(_ id: UInt64) -> ObjectPath {
        (try? groupsPath.appending("\(id)")) ?? groupsPath
    }

    /// The id in a group path, or nil when `path` is not one.
    public static func groupID(_ path: ObjectPath) -> UInt64? { id(in: path, below: groupsPath) }

    private static func id(in path: ObjectPath, below base: ObjectPath) -> UInt64? {
        guard base.isAncestor(of: path), path.elements.count == base.elements.count + 1,
            let last = path.elements.last, last.first != "0" || last == "0"
        else { return nil }
        return UInt64(last)
    }
}
