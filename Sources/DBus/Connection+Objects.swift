import CDBus

/// Exported objects: method dispatch, and the standard Introspectable, Properties,
/// ObjectManager and Peer interfaces.
extension Connection {
    /// Exports an object. Register every object before requesting a bus name: an activated
    /// service gets calls at once.
    public func export(_ object: ExportedObject) throws {
        let manager = try state.withLockedValue { state -> ExportedObject? in
            try state.objects.insert(object)
            return state.objects.manager(above: object.path)
        }
        if let manager { emitInterfacesAdded(object.path, object.interfacesAndProperties(), manager: manager.path) }
    }

    /// Serves every object below `subtree.path` through its find and enumerate.
    public func export(_ subtree: ExportedSubtree) throws {
        try state.withLockedValue { try $0.objects.insert(subtree) }
    }

    public func unexportSubtree(_ path: ObjectPath) {
        state.withLockedValue { $0.objects.removeSubtree(path) }
    }

    /// Announces a subtree object that came to be (`InterfacesAdded` from the object manager
    /// above it, if there is one), with the property values the caller read: the values of one
    /// moment of the object's state, read once rather than through its getters one by one.
    public func announceAdded(_ path: ObjectPath, interfaces: [String: [String: DBusValue]]) {
        guard let manager = state.withLockedValue({ $0.objects.manager(above: path) }) else { return }
        emitInterfacesAdded(
            path, ExportedObject.interfacesValue(interfaces.map { ($0.key, $0.value) }), manager: manager.path)
    }

    /// Announces a subtree object that is gone (`InterfacesRemoved`).
    public func announceRemoved(_ path: ObjectPath, interfaces: [String]) {
        guard let manager = state.withLockedValue({ $0.objects.manager(above: path) }) else { return }
        emitInterfacesRemoved(path, interfaces, manager: manager.path)
    }

    /// `InterfacesAdded` from the object manager at `manager`; `interfaces` is `a{sa{sv}}`.
    private func emitInterfacesAdded(_ path: ObjectPath, _ interfaces: DBusValue, manager: ObjectPath) {
        try? emitSignal(
            path: manager, interface: InterfaceDescription.objectManager.name, name: "InterfacesAdded",
            arguments: [.objectPath(path), interfaces]
        )
    }

    /// `InterfacesRemoved` from the object manager at `manager`.
    private func emitInterfacesRemoved(_ path: ObjectPath, _ interfaces: [String], manager: ObjectPath) {
        try? emitSignal(
            path: manager, interface: InterfaceDescription.objectManager.name, name: "InterfacesRemoved",
            arguments: [.objectPath(path), .strings(interfaces)]
        )
    }

    /// Emits a signal of a declared interface, after checking that the signal is declared
    /// there and that `arguments` have its signature: what clients were promised is what they get.
    public func emit(
        _ interface: InterfaceDescription, _ signal: String, path: ObjectPath, arguments: [DBusValue],
        destination: String? = nil
    ) throws {
        guard let declared = interface.signal(named: signal) else {
            throw BusError.failed("\(interface.name) declares no signal \(signal)")
        }
        let signature = DBusType.signature(of: arguments.map(\.type))
        guard signature == declared.signature else {
            throw BusError.failed(
                "\(interface.name).\(signal) is declared '\(declared.signature)', emitted with '\(signature)'")
        }
        try emitSignal(
            path: path, interface: interface.name, name: signal, arguments: arguments, destination: destination,
            signature: signature
        )
    }

    /// Removes an exported object; calls to it then get `UnknownObject`.
    public func unexport(_ path: ObjectPath) {
        let (removed, manager) = state.withLockedValue { state in
            (state.objects.remove(path), state.objects.manager(above: path))
        }
        if let removed, let manager {
            emitInterfacesRemoved(path, removed.interfaces.map(\.description.name), manager: manager.path)
        }
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for an exported object.
    public func emitPropertiesChanged(
        path: ObjectPath, interface: String, changed: [String: DBusValue], invalidated: [String] = []
    ) throws {
        try emitSignal(
            path: path, interface: InterfaceDescription.properties.name, name: "PropertiesChanged",
            arguments: [.string(interface), .vardict(changed), .strings(invalidated)]
        )
    }

    // MARK: Dispatch (called on the loop's queue)

    func handleMethodCall(_ message: Message) {
        let resolution = resolve(message)
        switch resolution {
        case .reply(let values):
            state.withLockedValue { $0.incoming.arrived(handled: false) }
            reply(to: message, with: .success(values), outSignature: nil)
        case .error(let error):
            state.withLockedValue { $0.incoming.arrived(handled: false) }
            reply(to: message, with: .failure(error), outSignature: nil)
        case .handler(let handler, let call, let outSignature):
            // Counted before the handler runs, on the loop's queue: a call that arrived before
            // anything the connection reads later is already counted when that is read.
            state.withLockedValue { $0.incoming.arrived(handled: true) }
            Task {
                let result: Result<[DBusValue], Error>
                do {
                    result = .success(try await handler(call))
                } catch {
                    result = .failure(error)
                }
                self.reply(to: message, with: result, outSignature: outSignature)
                self.state.withLockedValue { $0.incoming.answered() }
            }
        }
    }

    /// The method calls this connection received: how many are still being handled and when the
    /// last one came (for a service that exits when idle).
    public var incomingCalls: IncomingCalls { state.withLockedValue { $0.incoming } }

    enum Resolution {
        case reply([DBusValue])
        case error(BusError)
        /// Run the handler; check the reply against the out signature when there is one.
        case handler(ExportedInterface.MethodHandler, MethodCall, String?)
    }

    /// Decides synchronously, in arrival order, what a call gets: an error, an immediate reply,
    /// or a handler to run.
    private func resolve(_ message: Message) -> Resolution {
        guard let path = message.path, let member = message.member else {
            return .error(.invalidArgs("method call without path or member"))
        }
        let interfaceName = message.interface
        let signature = message.signature
        let (object, exists, objects) = state.withLockedValue { state in
            (state.objects[path], state.objects.exists(path), state.objects)
        }

        // Standard interfaces served on every node of the tree.
        switch (interfaceName, member) {
        case ("org.freedesktop.DBus.Peer", "Ping"), (nil, "Ping"):
            return signature.isEmpty ? .reply([]) : .error(.invalidArgs("Ping takes no arguments"))
        case ("org.freedesktop.DBus.Peer", "GetMachineId"), (nil, "GetMachineId"):
            guard let id = dbus_get_local_machine_id() else { return .error(.failed("no machine id")) }
            defer { dbus_free(id) }
            return .reply([.string(String(cString: id))])
        case ("org.freedesktop.DBus.Introspectable", "Introspect"), (nil, "Introspect"):
            guard signature.isEmpty else { return .error(.invalidArgs("Introspect takes no arguments")) }
            return resolveIntrospect(
                message, path: path, object: object, exists: exists, objects: objects, arguments: [])
        default:
            break
        }

        guard let object else { return .error(.unknownObject(path.rawValue)) }
        // The signature is in the header: a call that does not match its declaration is refused
        // before a byte of its body is decoded (a 20 MB array sent to a method taking a string
        // costs nothing but this comparison).
        if let expected = declaredSignature(of: object, interface: interfaceName, member: member), expected != signature
        {
            return .error(.invalidArgs("\(interfaceName ?? "").\(member) takes '\(expected)', got '\(signature)'"))
        }
        let arguments: [DBusValue]
        do {
            arguments = try message.arguments()
        } catch let error as BusError {
            return .error(error)
        } catch {
            return .error(.invalidArgs("\(error)"))
        }
        let call = MethodCall(
            connection: self, message: message, sender: message.sender ?? "", path: path,
            interface: interfaceName ?? "", member: member, arguments: arguments
        )
        let resolution = resolveOnObject(object, call: call, signature: signature, objects: objects)
        guard let check = object.accessCheck else { return resolution }
        switch resolution {
        case .error(let error) where error.name == BusError.unknownObjectName:
            // The object went away after it was found: the check answers as it does for a
            // missing object (a task's `NotFound`), so both look the same to the caller.
            return .handler(
                { call in
                    try await check(call)
                    throw error
                }, call, nil)
        case .error:
            return resolution
        case .reply(let values):
            return .handler(
                { call in
                    try await check(call)
                    return values
                }, call, nil)
        case .handler(let handler, let call, let outSignature):
            return .handler(
                { call in
                    try await check(call)
                    return try await handler(call)
                }, call, outSignature)
        }
    }

    /// The declared in-signature of the method a call names on `object`, or nil when it names none.
    private func declaredSignature(of object: ExportedObject, interface: String?, member: String) -> String? {
        switch interface {
        case InterfaceDescription.properties.name?:
            return InterfaceDescription.properties.method(named: member)?.inSignature
        case InterfaceDescription.objectManager.name? where object.isObjectManager:
            return InterfaceDescription.objectManager.method(named: member)?.inSignature
        case let name?:
            return object.interface(named: name)?.description.method(named: member)?.inSignature
        case nil:
            return object.interfaces.lazy.compactMap { $0.description.method(named: member) }.first?.inSignature
        }
    }

    private func resolveOnObject(
        _ object: ExportedObject, call: MethodCall, signature: String, objects: ObjectTable
    ) -> Resolution {
        let path = call.path
        let member = call.member
        let arguments = call.arguments
        let interfaceName = call.message.interface
        if interfaceName == InterfaceDescription.properties.name {
            if member == "Set", object.accessCheck != nil {
                // A setter must not run before the caller is checked: run it inside the handler.
                return .handler(
                    { [self] call in
                        switch self.resolveProperties(
                            member: member, arguments: arguments, signature: signature, object: object)
                        {
                        case .error(let error): throw error
                        case .reply(let values): return values
                        case .handler(let handler, _, _): return try await handler(call)
                        }
                    }, call, nil)
            }
            return resolveProperties(member: member, arguments: arguments, signature: signature, object: object)
        }
        if interfaceName == InterfaceDescription.objectManager.name, object.isObjectManager {
            guard member == "GetManagedObjects" else {
                return .error(.unknownMethod(member, interfaceName, signature))
            }
            let managed = objects.managed(by: path)
            let subtrees = objects.subtrees(below: path)
            return .handler(
                { call in
                    var all = managed
                    for subtree in subtrees {
                        for name in try await subtree.enumerate(call) {
                            if let child = try? subtree.path.appending(name), let found = subtree.find(child) {
                                all.append(found)
                            }
                        }
                    }
                    return [
                        .dictionary(
                            key: .objectPath,
                            value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
                            all.map { .init(.objectPath($0.path), $0.interfacesAndProperties()) }
                        )
                    ]
                }, call, nil)
        }

        let interface: ExportedInterface
        if let interfaceName {
            guard let found = object.interface(named: interfaceName) else {
                return .error(.unknownInterface(interfaceName, path.rawValue))
            }
            interface = found
        } else {
            guard let found = object.interfaces.first(where: { $0.description.method(named: member) != nil }) else {
                return .error(.unknownMethod(member, nil, signature))
            }
            interface = found
        }
        guard let method = interface.description.method(named: member), let handler = interface.handlers[member] else {
            return .error(.unknownMethod(member, interface.description.name, signature))
        }
        guard signature == method.inSignature else {
            return .error(
                .invalidArgs(
                    "\(interface.description.name).\(member) takes '\(method.inSignature)', got '\(signature)'"
                ))
        }
        let resolved = MethodCall(
            connection: self, message: call.message, sender: call.sender, path: path,
            interface: interface.description.name, member: member, arguments: arguments
        )
        return .handler(handler, resolved, method.outSignature)
    }

    private func resolveProperties(
        member: String, arguments: [DBusValue], signature: String, object: ExportedObject
    ) -> Resolution {
        let description = InterfaceDescription.properties
        guard let method = description.method(named: member) else {
            return .error(.unknownMethod(member, description.name, signature))
        }
        guard signature == method.inSignature else {
            return .error(
                .invalidArgs("\(description.name).\(member) takes '\(method.inSignature)', got '\(signature)'"))
        }
        guard let interfaceName = arguments.first?.stringValue else { return .error(.invalidArgs("missing interface")) }
        guard let interface = object.interface(named: interfaceName) else {
            return .error(.unknownInterface(interfaceName, object.path.rawValue))
        }
        switch member {
        case "GetAll":
            let values = interface.readableProperties()
            // Every getter answering nil: the object went away after it was found (a task being
            // removed); answer as for a missing object, never an empty success.
            if values.isEmpty, interface.description.properties.contains(where: { $0.access != .write }) {
                return .error(.unknownObject(object.path.rawValue))
            }
            return .reply([.vardict(values)])
        case "Get":
            let name = arguments[1].stringValue ?? ""
            guard let property = interface.description.property(named: name), property.access != .write else {
                return .error(.unknownProperty(name, interfaceName))
            }
            guard let value = interface.getProperty(name) else {
                // The object went away after it was found (a task being removed).
                return .error(.unknownObject(object.path.rawValue))
            }
            guard value.type == property.type else {
                return .error(
                    .failed(
                        "property \(name) has type '\(value.type.signature)', declared '\(property.type.signature)'"))
            }
            return .reply([.variant(value)])
        default:  // Set
            let name = arguments[1].stringValue ?? ""
            guard let property = interface.description.property(named: name) else {
                return .error(.unknownProperty(name, interfaceName))
            }
            guard property.access != .read, let setter = interface.setProperty else {
                return .error(.propertyReadOnly(name))
            }
            guard let value = arguments[2].variantValue, value.type == property.type else {
                return .error(.invalidArgs("property \(name) has type '\(property.type.signature)'"))
            }
            do {
                try setter(name, value)
            } catch let error as BusError {
                return .error(error)
            } catch {
                return .error(.failed("\(error)"))
            }
            if property.emitsChanged == .true {
                try? emitPropertiesChanged(path: object.path, interface: interfaceName, changed: [name: value])
            } else if property.emitsChanged == .invalidates {
                try? emitPropertiesChanged(
                    path: object.path, interface: interfaceName, changed: [:], invalidated: [name])
            }
            return .reply([])
        }
    }

    /// Sends exactly one reply (none if the caller asked for none).
    func reply(to call: Message, with result: Result<[DBusValue], Error>, outSignature: String?) {
        guard !call.noReplyExpected else { return }
        do {
            let reply: Message
            switch result {
            case .success(let values):
                reply = try call.methodReturn()
                if let outSignature {
                    try reply.append(values, signature: outSignature)
                } else {
                    try reply.append(values)
                }
            case .failure(let error as BusError):
                reply = try call.errorReply(error)
            case .failure(let error):
                reply = try call.errorReply(.failed("\(error)"))
            }
            try send(reply)
        } catch let error as BusError where error.name == BusError.disconnectedName {
            logger.debug("no reply sent to \(call.member ?? ""): the connection is closed")
        } catch {
            logger.error("could not build the reply to \(call.interface ?? "").\(call.member ?? ""): \(error)")
            if let fallback = try? call.errorReply(.failed("internal error building the reply: \(error)")) {
                try? send(fallback)
            }
        }
    }

    /// Introspect: an object a subtree finds is described only to callers its access check lets
    /// through (others get `UnknownObject`, as for a path with nothing); a subtree's root lists
    /// the children the caller may see.
    private func resolveIntrospect(
        _ message: Message, path: ObjectPath, object: ExportedObject?, exists: Bool, objects: ObjectTable,
        arguments: [DBusValue]
    ) -> Resolution {
        let call = MethodCall(
            connection: self, message: message, sender: message.sender ?? "", path: path,
            interface: InterfaceDescription.introspectable.name, member: "Introspect", arguments: arguments
        )
        if objects.subtree(above: path) != nil {
            guard let object else { return .error(.unknownObject(path.rawValue)) }
            return .handler(
                { [self] call in
                    if let check = object.accessCheck {
                        do {
                            try await check(call)
                        } catch {
                            throw BusError.unknownObject(path.rawValue)
                        }
                    }
                    return [.string(introspect(path: path, object: object, objects: objects, children: []))]
                }, call, nil)
        }
        guard exists else { return .error(.unknownObject(path.rawValue)) }
        let subtreeRoot = objects.subtrees(below: path).first { $0.path == path }
        guard let subtreeRoot else {
            return .reply([
                .string(
                    introspect(path: path, object: object, objects: objects, children: objects.childNames(of: path)))
            ])
        }
        return .handler(
            { [self] call in
                let children = try await subtreeRoot.enumerate(call)
                return [.string(introspect(path: path, object: object, objects: objects, children: children))]
            }, call, nil)
    }

    func introspect(path: ObjectPath, object: ExportedObject?, objects: ObjectTable, children: [String]) -> String {
        var interfaces = [InterfaceDescription.peer, .introspectable]
        if let object {
            interfaces.append(.properties)
            if object.isObjectManager { interfaces.append(.objectManager) }
            interfaces += object.interfaces.map(\.description)
        }
        var xml = InterfaceDescription.doctype + "<node>\n"
        for interface in interfaces {
            xml += interface.introspectionXML(indent: 2) + "\n"
        }
        for child in children {
            xml += "  <node name=\"\(child)\"/>\n"
        }
        xml += "</node>\n"
        return xml
    }
}
