/// The standard interfaces every exported object carries (implemented by this layer).
extension InterfaceDescription {
    public static let peer = InterfaceDescription(
        "org.freedesktop.DBus.Peer",
        methods: [
            .init("Ping"),
            .init("GetMachineId", out: [.init("machine_uuid", .string)]),
        ]
    )

    public static let introspectable = InterfaceDescription(
        "org.freedesktop.DBus.Introspectable",
        methods: [.init("Introspect", out: [.init("xml_data", .string)])]
    )

    public static let properties = InterfaceDescription(
        "org.freedesktop.DBus.Properties",
        methods: [
            .init(
                "Get", in: [.init("interface_name", .string), .init("property_name", .string)],
                out: [.init("value", .variant)]),
            .init(
                "GetAll", in: [.init("interface_name", .string)],
                out: [.init("props", .dictionary(key: .string, value: .variant))]),
            .init(
                "Set",
                in: [
                    .init("interface_name", .string), .init("property_name", .string),
                    .init("value", .variant),
                ]),
        ],
        signals: [
            .init(
                "PropertiesChanged",
                [
                    .init("interface_name", .string),
                    .init("changed_properties", .dictionary(key: .string, value: .variant)),
                    .init("invalidated_properties", .array(.string)),
                ])
        ]
    )

    public static let objectManager = InterfaceDescription(
        "org.freedesktop.DBus.ObjectManager",
        methods: [
            .init(
                "GetManagedObjects",
                out: [
                    .init(
                        "object_paths_interfaces_and_properties",
                        .dictionary(
                            key: .objectPath,
                            value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant))))
                ])
        ],
        signals: [
            .init(
                "InterfacesAdded",
                [
                    .init("object_path", .objectPath),
                    .init(
                        "interfaces_and_properties",
                        .dictionary(key: .string, value: .dictionary(key: .string, value: .variant))),
                ]),
            .init(
                "InterfacesRemoved",
                [
                    .init("object_path", .objectPath),
                    .init("interfaces", .array(.string)),
                ]),
        ]
    )
}
