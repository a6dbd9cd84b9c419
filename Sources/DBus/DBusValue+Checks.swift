extension DBusValue {
    /// The rules a value must meet at its own level before it is written, whichever way the
    /// message is built (`Message.append` through libdbus, `WireWriter` in one pass): a string
    /// without NUL, a valid object path and signature, an array's elements of its element type, a
    /// dictionary's basic key type and entries of its types, a struct with a field. The values
    /// inside containers are checked as they are written. Nesting depth and lengths are libdbus's.
    func checkOwnLevel() throws {
        switch self {
        case .string(let v):
            guard !v.utf8.contains(0) else { throw BusError.invalidArgs("D-Bus strings cannot contain NUL bytes") }
        case .objectPath(let v):
            guard ObjectPath.isValid(v.rawValue) else { throw BusError.invalidArgs("invalid object path '\(v)'") }
        case .signature(let v):
            _ = try DBusType.parse(v)
        case .array(let element, let elements):
            for item in elements where item.type != element {
                throw BusError.invalidArgs(
                    "array of '\(element.signature)' holds a value of type '\(item.type.signature)'")
            }
        case .dictionary(let keyType, let valueType, let entries):
            guard keyType.isBasic else { throw BusError.invalidArgs("dictionary key type must be basic") }
            for entry in entries where entry.key.type != keyType || entry.value.type != valueType {
                throw BusError.invalidArgs(
                    "dictionary a{\(keyType.signature)\(valueType.signature)} holds an entry of types \(entry.key.type.signature), \(entry.value.type.signature)"
                )
            }
        case .structure(let fields):
            guard !fields.isEmpty else { throw BusError.invalidArgs("a struct needs at least one field") }
        default:
            break
        }
    }
}
