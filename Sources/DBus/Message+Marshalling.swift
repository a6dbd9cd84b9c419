import CDBus

/// Reading and writing message bodies. Every value is checked against the D-Bus rules before it
/// reaches libdbus (which would otherwise only print a warning and drop it), so a bad value is a
/// `BusError`, never a crash or a silently short message.
extension Message {
    /// Appends values to the body.
    public func append(_ values: [DBusValue]) throws {
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for value in values {
            try Message.append(value, to: &iter)
        }
    }

    /// Appends values after checking that they have exactly the given signature.
    public func append(_ values: [DBusValue], signature: String) throws {
        let actual = DBusType.signature(of: values.map(\.type))
        guard actual == signature else {
            throw BusError.invalidArgs("values have signature '\(actual)', expected '\(signature)'")
        }
        try append(values)
    }

    /// Reads the whole body.
    public func arguments() throws -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != CDBUS_TYPE_INVALID {
            values.append(try Message.read(&iter))
            dbus_message_iter_next(&iter)
        }
        return values
    }

    // MARK: Writing

    static func append(_ value: DBusValue, to iter: inout DBusMessageIter) throws {
        try value.checkOwnLevel()
        switch value {
        case .byte(let v): try appendBasic(CDBUS_TYPE_BYTE, v, &iter)
        case .boolean(let v): try appendBasic(CDBUS_TYPE_BOOLEAN, dbus_bool_t(v ? 1 : 0), &iter)
        case .int16(let v): try appendBasic(CDBUS_TYPE_INT16, v, &iter)
        case .uint16(let v): try appendBasic(CDBUS_TYPE_UINT16, v, &iter)
        case .int32(let v): try appendBasic(CDBUS_TYPE_INT32, v, &iter)
        case .uint32(let v): try appendBasic(CDBUS_TYPE_UINT32, v, &iter)
        case .int64(let v): try appendBasic(CDBUS_TYPE_INT64, v, &iter)
        case .uint64(let v): try appendBasic(CDBUS_TYPE_UINT64, v, &iter)
        case .double(let v): try appendBasic(CDBUS_TYPE_DOUBLE, v, &iter)
        case .string(let v): try appendString(CDBUS_TYPE_STRING, v, &iter)
        case .objectPath(let v): try appendString(CDBUS_TYPE_OBJECT_PATH, v.rawValue, &iter)
        case .signature(let v): try appendString(CDBUS_TYPE_SIGNATURE, v, &iter)
        case .unixFD(let fd): try appendBasic(CDBUS_TYPE_UNIX_FD, fd.fd, &iter)
        case .byteArray(let bytes):
            try withContainer(CDBUS_TYPE_ARRAY, "y", &iter) { sub in
                try bytes.withUnsafeBufferPointer { buffer in
                    var base = buffer.baseAddress ?? UnsafePointer(bitPattern: 1)
                    let ok = withUnsafeMutablePointer(to: &base) { pointer in
                        dbus_message_iter_append_fixed_array(&sub, CDBUS_TYPE_BYTE, pointer, Int32(buffer.count))
                    }
                    guard ok != 0 else { throw BusError.noMemory() }
                }
            }
        case .array(let element, let elements):
            try withContainer(CDBUS_TYPE_ARRAY, element.signature, &iter) { sub in
                for item in elements { try append(item, to: &sub) }
            }
        case .dictionary(let keyType, let valueType, let entries):
            try withContainer(CDBUS_TYPE_ARRAY, "{" + keyType.signature + valueType.signature + "}", &iter) { sub in
                for entry in entries {
                    try withContainer(CDBUS_TYPE_DICT_ENTRY, nil, &sub) { entryIter in
                        try append(entry.key, to: &entryIter)
                        try append(entry.value, to: &entryIter)
                    }
                }
            }
        case .structure(let fields):
            try withContainer(CDBUS_TYPE_STRUCT, nil, &iter) { sub in
                for field in fields { try append(field, to: &sub) }
            }
        case .variant(let inner):
            try withContainer(CDBUS_TYPE_VARIANT, inner.type.signature, &iter) { sub in
                try append(inner, to: &sub)
            }
        }
    }

    private static func appendBasic<T>(_ type: Int32, _ value: T, _ iter: inout DBusMessageIter) throws {
        var copy = value
        let ok = withUnsafePointer(to: &copy) { dbus_message_iter_append_basic(&iter, type, $0) }
        guard ok != 0 else { throw BusError.noMemory() }
    }

    private static func appendString(_ type: Int32, _ value: String, _ iter: inout DBusMessageIter) throws {
        let ok = value.withCString { cString -> dbus_bool_t in
            var pointer: UnsafePointer<CChar>? = cString
            return withUnsafePointer(to: &pointer) { dbus_message_iter_append_basic(&iter, type, $0) }
        }
        guard ok != 0 else { throw BusError.invalidArgs("libdbus refused a string value (invalid UTF-8?)") }
    }

    private static func withContainer(
        _ type: Int32, _ signature: String?, _ iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) throws -> Void
    ) throws {
        var sub = DBusMessageIter()
        let opened: dbus_bool_t
        if let signature {
            opened = dbus_message_iter_open_container(&iter, type, signature, &sub)
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub)
        }
        guard opened != 0 else { throw BusError.noMemory() }
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(&iter, &sub)
            throw error
        }
        guard dbus_message_iter_close_container(&iter, &sub) != 0 else { throw BusError.noMemory() }
    }

    // MARK: Reading

    static func read(_ iter: inout DBusMessageIter) throws -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        var basic = DBusBasicValue()
        switch type {
        case CDBUS_TYPE_BYTE:
            dbus_message_iter_get_basic(&iter, &basic)
            return .byte(basic.byt)
        case CDBUS_TYPE_BOOLEAN:
            dbus_message_iter_get_basic(&iter, &basic)
            return .boolean(basic.bool_val != 0)
        case CDBUS_TYPE_INT16:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int16(basic.i16)
        case CDBUS_TYPE_UINT16:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint16(basic.u16)
        case CDBUS_TYPE_INT32:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int32(basic.i32)
        case CDBUS_TYPE_UINT32:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint32(basic.u32)
        case CDBUS_TYPE_INT64:
            dbus_message_iter_get_basic(&iter, &basic)
            return .int64(Int64(basic.i64))
        case CDBUS_TYPE_UINT64:
            dbus_message_iter_get_basic(&iter, &basic)
            return .uint64(UInt64(basic.u64))
        case CDBUS_TYPE_DOUBLE:
            dbus_message_iter_get_basic(&iter, &basic)
            return .double(basic.dbl)
        case CDBUS_TYPE_STRING, CDBUS_TYPE_OBJECT_PATH, CDBUS_TYPE_SIGNATURE:
            dbus_message_iter_get_basic(&iter, &basic)
            let text = basic.str.map { String(cString: $0) } ?? ""
            if type == CDBUS_TYPE_OBJECT_PATH { return .objectPath(ObjectPath(unchecked: text)) }
            if type == CDBUS_TYPE_SIGNATURE { return .signature(text) }
            return .string(text)
        case CDBUS_TYPE_UNIX_FD:
            dbus_message_iter_get_basic(&iter, &basic)
            guard basic.fd >= 0 else { throw BusError.invalidArgs("message carries an invalid file descriptor") }
            return .unixFD(UnixFD(owning: basic.fd))
        case CDBUS_TYPE_ARRAY:
            let fullType = try currentType(&iter)
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            switch fullType {
            case .array(.byte):
                var pointer: UnsafeMutableRawPointer?
                var count: Int32 = 0
                dbus_message_iter_get_fixed_array(&sub, &pointer, &count)
                guard count > 0, let pointer else { return .byteArray([]) }
                return .byteArray(Array(UnsafeRawBufferPointer(start: pointer, count: Int(count))))
            case .array(let element):
                var items: [DBusValue] = []
                while dbus_message_iter_get_arg_type(&sub) != CDBUS_TYPE_INVALID {
                    items.append(try read(&sub))
                    dbus_message_iter_next(&sub)
                }
                return .array(element: element, items)
            case .dictionary(let key, let value):
                var entries: [DBusValue.DictEntry] = []
                while dbus_message_iter_get_arg_type(&sub) == CDBUS_TYPE_DICT_ENTRY {
                    var entryIter = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &entryIter)
                    let k = try read(&entryIter)
                    dbus_message_iter_next(&entryIter)
                    let v = try read(&entryIter)
                    entries.append(.init(k, v))
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(key: key, value: value, entries)
            default:
                throw BusError.invalidArgs("unexpected array type \(fullType)")
            }
        case CDBUS_TYPE_STRUCT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != CDBUS_TYPE_INVALID {
                fields.append(try read(&sub))
                dbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case CDBUS_TYPE_VARIANT:
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try read(&sub))
        default:
            throw BusError.invalidArgs("unsupported D-Bus type code \(type)")
        }
    }

    private static func currentType(_ iter: inout DBusMessageIter) throws -> DBusType {
        guard let cString = dbus_message_iter_get_signature(&iter) else { throw BusError.noMemory() }
        defer { dbus_free(cString) }
        return try DBusType(String(cString: cString))
    }
}
