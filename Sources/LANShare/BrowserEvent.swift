/// What an Avahi service browser said (`AvahiBrowser`): an item, or that it told all it knows.
enum BrowserEvent: Sendable {
    case item(interface: Int32, name: String, type: String, domain: String)
    case done
}
