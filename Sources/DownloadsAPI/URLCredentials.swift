import FoundationEssentials

/// A URL's `user:password@`, as curl and wget take it: `Start` sends them as the task's
/// `Authorization: Basic` header. Taken out in this one place, so that the service's `URL`
/// property and log and the client's proxy lookup all see the URL without them.
public enum URLCredentials {
    /// The URL without its user name and password, and the `Authorization` value they stand
    /// for; the text as it is and nil when it has none (or is not a URL).
    public static func split(_ text: String) -> (url: String, authorization: String?) {
        guard var components = URLComponents(string: text), components.user != nil || components.password != nil else {
            return (text, nil)
        }
        let pair = "\(components.user ?? ""):\(components.password ?? "")"
        components.user = nil
        components.password = nil
        guard let url = components.string else { return (text, nil) }
        return (url, "Basic " + Data(pair.utf8).base64EncodedString())
    }
}
