import DownloadModel

extension UploadSpec {
    /// Keeps a final response: its status and headers (names lower-cased, repeated ones joined
    /// with ", "), and its body when it was kept in memory (`bodyKept`; else a reply file took it).
    mutating func keep(_ result: UploadDelegate.Result, bodyKept: Bool) {
        responseStatus = result.status
        var headers: [String: String] = [:]
        for (name, value) in result.headers {
            let key = name.lowercased()
            headers[key] = headers[key].map { "\($0), \(value)" } ?? value
        }
        replyHeaders = headers
        newReplyBody = bodyKept ? Array(result.body.prefix(UploadSpec.maxKeptReply)) : []
    }
}
