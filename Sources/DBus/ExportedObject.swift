/// An object exported on a connection: a path and the interfaces implemented there.
/// An object manager also serves `org.freedesktop.DBus.ObjectManager` for every object below it.
public struct ExportedObject: Sendable {
    /// Decides whether a caller may use the object; throws (e.g. AccessDenied) to refuse.
    public typealias AccessCheck = @Sendable (MethodCall) async throws -> Void

    public let path: ObjectPath
    public let interfaces: [ExportedInterface]
    public let isObjectManager: Bool
    /// Run before every call to this object, the standard Properties and ObjectManager methods
    /// included (Introspect and Peer excepted: they reveal no state).
    public let accessCheck: AccessCheck?

    public init(
        path: ObjectPath, interfaces: [ExportedInterface], isObjectManager: Bool = false,
        accessCheck: AccessCheck? = nil
    ) throws {
        let names = interfaces.map(\.description.name)
        guard Set(names).count == names.count else {
            throw BusError.failed("object \(path) declares an interface twice")
        }
        self.path = path
        self.interfaces = interfaces
        self.isObjectManager = isObjectManager
        self.accessCheck = accessCheck
    }

    public func interface(named name: String) -> ExportedInterface? {
        interfaces.first { $0.description.name == name }
    }

    /// `a{sa{sv}}`: each interface with its readable properties.
    func interfacesAndProperties() -> DBusValue {
        ExportedObject.interfacesValue(interfaces.map { ($0.description.name, $0.readableProperties()) })
    }

    /// Interfaces and their properties as ObjectManager sends them (`a{sa{sv}}`).
    static func interfacesValue(_ interfaces: [(name: String, properties: [String: DBusValue])]) -> DBusValue {
        .dictionary(
            key: .string, value: .dictionary(key: .string, value: .variant),
            interfaces.map { .init(.string($0.name), .vardict($0.properties)) }
        )
    }
}
