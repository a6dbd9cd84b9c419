/// The one declaration of a D-Bus interface: its methods (with argument names and types),
/// signals and properties. It drives both dispatch (signature checks, property access) and the
/// `org.freedesktop.DBus.Introspectable` output, and renders the XML shipped in `dbus/`.
public struct InterfaceDescription: Sendable, Hashable {
    public struct Argument: Sendable, Hashable {
        public let name: String
        public let type: DBusType
        public init(_ name: String, _ type: DBusType) {
            self.name = name
            self.type = type
        }
    }

    public struct Method: Sendable, Hashable {
        public let name: String
        public let inArguments: [Argument]
        public let outArguments: [Argument]
        public init(_ name: String, in inArguments: [Argument] = [], out outArguments: [Argument] = []) {
            self.name = name
            self.inArguments = inArguments
            self.outArguments = outArguments
        }
        public var inSignature: String { DBusType.signature(of: inArguments.map(\.type)) }
        public var outSignature: String { DBusType.signature(of: outArguments.map(\.type)) }
    }

    public struct Signal: Sendable, Hashable {
        public let name: String
        public let arguments: [Argument]
        public init(_ name: String, _ arguments: [Argument] = []) {
            self.name = name
            self.arguments = arguments
        }
        public var signature: String { DBusType.signature(of: arguments.map(\.type)) }
    }

    public struct Property: Sendable, Hashable {
        public enum Access: String, Sendable, Hashable {
            case read, write, readwrite
        }
        /// The `org.freedesktop.DBus.Property.EmitsChangedSignal` annotation.
        public enum EmitsChanged: String, Sendable, Hashable {
            case `true`, invalidates, const, `false`
        }
        public let name: String
        public let type: DBusType
        public let access: Access
        public let emitsChanged: EmitsChanged
        public init(_ name: String, _ type: DBusType, access: Access = .read, emitsChanged: EmitsChanged = .true) {
            self.name = name
            self.type = type
            self.access = access
            self.emitsChanged = emitsChanged
        }
    }

    public let name: String
    public let methods: [Method]
    public let signals: [Signal]
    public let properties: [Property]

    public init(_ name: String, methods: [Method] = [], signals: [Signal] = [], properties: [Property] = []) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
    }

    public func method(named name: String) -> Method? { methods.first { $0.name == name } }
    public func signal(named name: String) -> Signal? { signals.first { $0.name == name } }
    public func property(named name: String) -> Property? { properties.first { $0.name == name } }

    // MARK: Introspection XML

    /// The `<interface>` element, indented by `indent` spaces.
    public func introspectionXML(indent: Int = 2) -> String {
        let pad = String(repeating: " ", count: indent)
        var lines = ["\(pad)<interface name=\"\(xmlEscape(name))\">"]
        for method in methods {
            let arguments = method.inArguments.map { ($0, "in") } + method.outArguments.map { ($0, "out") }
            if arguments.isEmpty {
                lines.append("\(pad)  <method name=\"\(method.name)\"/>")
                continue
            }
            lines.append("\(pad)  <method name=\"\(method.name)\">")
            for (argument, direction) in arguments {
                lines.append(
                    "\(pad)    <arg name=\"\(xmlEscape(argument.name))\" type=\"\(xmlEscape(argument.type.signature))\" direction=\"\(direction)\"/>"
                )
            }
            lines.append("\(pad)  </method>")
        }
        for signal in signals {
            if signal.arguments.isEmpty {
                lines.append("\(pad)  <signal name=\"\(signal.name)\"/>")
                continue
            }
            lines.append("\(pad)  <signal name=\"\(signal.name)\">")
            for argument in signal.arguments {
                lines.append(
                    "\(pad)    <arg name=\"\(xmlEscape(argument.name))\" type=\"\(xmlEscape(argument.type.signature))\"/>"
                )
            }
            lines.append("\(pad)  </signal>")
        }
        for property in properties {
            let open =
                "\(pad)  <property name=\"\(property.name)\" type=\"\(xmlEscape(property.type.signature))\" access=\"\(property.access.rawValue)\""
            if property.emitsChanged == .true {
                lines.append(open + "/>")
            } else {
                lines.append(open + ">")
                lines.append(
                    "\(pad)    <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" value=\"\(property.emitsChanged.rawValue)\"/>"
                )
                lines.append("\(pad)  </property>")
            }
        }
        lines.append("\(pad)</interface>")
        return lines.joined(separator: "\n")
    }

    /// A standalone introspection document holding only this interface: the form of the files
    /// in `dbus/` (and of `/usr/share/dbus-1/interfaces/NAME.xml`).
    public var introspectionDocument: String {
        InterfaceDescription.doctype + "<node>\n" + introspectionXML(indent: 2) + "\n</node>\n"
    }

    public static let doctype = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """
}

func xmlEscape(_ text: String) -> String {
    var result = ""
    result.reserveCapacity(text.count)
    for character in text {
        switch character {
        case "&": result += "&amp;"
        case "<": result += "&lt;"
        case ">": result += "&gt;"
        case "\"": result += "&quot;"
        case "'": result += "&apos;"
        default: result.append(character)
        }
    }
    return result
}
