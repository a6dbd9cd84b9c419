/// What an Avahi service browser said (`AvahiBrowser`): an item came or went, or it told all it
/// knows for now.
enum BrowserEvent: Sendable {
    case item(interface: Int32, name: String, type: String, domain: String)
    case removed(interface: Int32, name: String)
    case done
}
