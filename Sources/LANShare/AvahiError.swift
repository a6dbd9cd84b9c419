/// An answer of avahi-daemon the publisher did not expect.
struct AvahiError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
