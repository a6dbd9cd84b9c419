import Foundation
import TestHTTPServer

/// The resumable-upload servers of `bench.py --sections upload`: swift-nio-extras'
/// `NIOResumableUpload` (the IETF draft) and a cutting relay in front of the tus server the
/// script started (its port the first argument). Prints the ports as one JSON line, then
/// answers lines on standard input: `cut ietf N,N,N` and `cut relay N,N,N` (cut once these many
/// more bytes were received), `stats` (a JSON line: the IETF server's body bytes and finished uploads'
/// SHA-256, the relay's forwarded bytes).
/// A line on standard output, at once (a pipe would buffer `print`).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

guard CommandLine.arguments.count == 2, let tusPort = Int(CommandLine.arguments[1]) else {
    FileHandle.standardError.write(Data("usage: upload-servers TUS_PORT\n".utf8))
    exit(2)
}
let ietf = try ResumableUploadServer()
let relay = try CuttingProxy(to: tusPort)
say("{\"ietf\": \(ietf.port), \"relay\": \(relay.port)}")
while let line = readLine() {
    let words = line.split(separator: " ")
    switch (words.first, words.dropFirst().first) {
    case ("cut", "ietf"?), ("cut", "relay"?):
        let totals = words.dropFirst(2).first.map { $0.split(separator: ",").compactMap { Int64($0) } } ?? []
        // Counted from now: each run's cuts fall within its own bytes.
        if words[1] == "ietf" {
            let now = ietf.bodyBytes
            ietf.cut(atTotals: totals.map { $0 + now })
        } else {
            let now = relay.forwarded
            relay.cut(atTotals: totals.map { $0 + now })
        }
        say("{}")
    case ("stats", _):
        let hashes = ietf.uploads.map { "\"\($0.sha256)\"" }.joined(separator: ",")
        say(
            "{\"ietf_body_bytes\": \(ietf.bodyBytes), \"ietf_uploads\": [\(hashes)], \"relay_forwarded\": \(relay.forwarded)}"
        )
    default:
        say("{\"error\": \"unknown command\"}")
    }
}
ietf.stop()
relay.stop()
