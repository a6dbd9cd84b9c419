import CDBus

extension Message {
    /// A signal with its arguments, written in one pass (`WireWriter`) and loaded by libdbus,
    /// which validates the whole message as it would one received. Refuses what `signal` and
    /// `append` refuse, with the same errors; what the writer leaves to libdbus (file
    /// descriptors) or libdbus's validation refuses (nesting, lengths) is built by libdbus
    /// instead, which reports its own error.
    /// `signature`: the arguments' signature when the caller has it already (`Connection.emit`
    /// checked it against the declaration), so it is not worked out twice.
    public static func signal(
        path: ObjectPath, interface: String, name: String, destination: String?, arguments: [DBusValue],
        signature: String? = nil
    ) throws -> Message {
        if let written = try written(
            path: path, interface: interface, name: name, destination: destination, arguments: arguments,
            signature: signature
        ) {
            return written
        }
        let message = try Message.signal(path: path, interface: interface, name: name)
        if let destination { try message.setDestination(destination) }
        try message.append(arguments)
        return message
    }

    /// The signal written in one pass; nil when it is left to libdbus.
    static func written(
        path: ObjectPath, interface: String, name: String, destination: String?, arguments: [DBusValue],
        signature: String? = nil
    ) throws -> Message? {
        try checkInterfaceName(interface)
        try checkMemberName(name)
        if let destination { try checkDestination(destination) }
        var body = WireWriter()
        do {
            for argument in arguments { try body.value(argument) }
        } catch is WireWriter.Unsupported {
            return nil
        }
        var message = WireWriter(capacity: 128 + body.bytes.count)
        message.byte(UInt8(ascii: "l"))
        message.byte(4)  // signal
        message.byte(1)  // no reply expected, as dbus_message_new_signal sets
        message.byte(1)  // protocol version
        message.uint32(UInt32(truncatingIfNeeded: body.bytes.count))
        message.uint32(1)  // a serial for the loader; reset below so the connection gives its own
        message.uint32(0)
        let fieldsAt = message.bytes.count
        message.headerField(1, "o", path.rawValue)
        message.headerField(2, "s", interface)
        message.headerField(3, "s", name)
        if let destination { message.headerField(6, "s", destination) }
        if !arguments.isEmpty {
            message.align(8)
            message.byte(8)
            message.signature("g")
            message.signature(signature ?? DBusType.signature(of: arguments.map(\.type)))
        }
        message.setUInt32(UInt32(truncatingIfNeeded: message.bytes.count - fieldsAt), at: fieldsAt - 4)
        message.align(8)
        message.append(body)
        guard let loaded = Message.load(message.bytes) else { return nil }
        dbus_message_set_serial(loaded, 0)
        return Message(owning: loaded)
    }

    /// `dbus_message_demarshal` of a whole message; nil when libdbus does not accept it.
    private static func load(_ bytes: [UInt8]) -> OpaquePointer? {
        guard bytes.count <= Int(Int32.max) else { return nil }
        let error = cdbus_error_new()
        defer { cdbus_error_free(error) }
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                dbus_message_demarshal($0.baseAddress, Int32(buffer.count), error)
            }
        }
    }
}

extension WireWriter {
    /// One header field: `(y v)` with a string-like value of type `type` ("o", "s"), checked
    /// before (a name, a path: libdbus's validation refuses an invalid one).
    fileprivate mutating func headerField(_ code: UInt8, _ type: String, _ value: String) {
        align(8)
        byte(code)
        signature(type)
        string(value)
    }
}
