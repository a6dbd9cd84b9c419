/// An implementation of one interface on one object: the description plus a handler for each of
/// its methods and access to its properties. Creating it fails when a described method has no
/// handler or a handler has no described method, so the declaration and dispatch cannot drift.
public struct ExportedInterface: Sendable {
    public typealias MethodHandler = @Sendable (MethodCall) async throws -> [DBusValue]
    public typealias PropertyGetter = @Sendable (String) -> DBusValue?
    public typealias PropertySetter = @Sendable (String, DBusValue) throws -> Void
    /// Every property's value read at one moment; nil when the object went away.
    public typealias PropertiesReader = @Sendable () -> [String: DBusValue]?

    public let description: InterfaceDescription
    let handlers: [String: MethodHandler]
    let getProperty: PropertyGetter
    let setProperty: PropertySetter?
    let readAll: PropertiesReader?

    /// `readAll`, when given, answers GetAll (and the objects' listings) with one read of the
    /// object's state instead of one `getProperty` a property: a task's two dozen properties are
    /// one snapshot, not two dozen.
    public init(
        _ description: InterfaceDescription,
        methods handlers: [String: MethodHandler] = [:],
        getProperty: @escaping PropertyGetter = { _ in nil },
        readAll: PropertiesReader? = nil,
        setProperty: PropertySetter? = nil
    ) throws {
        let described = Set(description.methods.map(\.name))
        let implemented = Set(handlers.keys)
        guard described == implemented else {
            let missing = described.subtracting(implemented).sorted()
            let extra = implemented.subtracting(described).sorted()
            throw BusError.failed(
                "interface \(description.name): methods without handler \(missing), handlers without method \(extra)"
            )
        }
        if description.properties.contains(where: { $0.access != .read }) && setProperty == nil {
            throw BusError.failed("interface \(description.name) has writable properties but no setter")
        }
        self.description = description
        self.handlers = handlers
        self.getProperty = getProperty
        self.setProperty = setProperty
        self.readAll = readAll
    }

    /// Every readable property with its current value, typed as declared (used by GetAll,
    /// GetManagedObjects and InterfacesAdded). Properties whose getter returns nothing or a
    /// value of the wrong type are left out.
    func readableProperties() -> [String: DBusValue] {
        let read: (String) -> DBusValue?
        if let readAll {
            guard let all = readAll() else { return [:] }
            read = { all[$0] }
        } else {
            read = getProperty
        }
        var values: [String: DBusValue] = [:]
        for property in description.properties where property.access != .write {
            if let value = read(property.name), value.type == property.type {
                values[property.name] = value
            }
        }
        return values
    }
}
