import DownloadsAPI
import Foundation
import TerminalOutput
import ShownText

/// Text from callers and servers as it goes into the log: what `DisplayText` hides escaped (a
/// newline in a session name forges no log line, a CSI reaches no terminal reading the journal)
/// and URL credentials left out.
enum LogText {
    static func escaped(_ text: String) -> String { DisplayText.escaped(text) }

    /// The URL without its userinfo, escaped.
    static func url(_ text: String) -> String {
        escaped(URLCredentials.split(text).url)
    }
}
