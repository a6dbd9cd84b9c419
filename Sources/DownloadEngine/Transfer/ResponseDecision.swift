import DownloadModel
import Metalink
import NIOHTTP1
import TerminalOutput
import ShownText

/// What to do with a response head, decided by the resume rules of RFC 9110 (pure; tested
/// without I/O, one test per rule in `ResponseDecisionTests`). Never splices two versions of a
/// resource. Every protocol rule of a download is here and nowhere else: a 200 to a ranged
/// request, a `Content-Range` that does not start where asked, a resource whose length changed,
/// a different validator, a 416 for the end of what is held.
enum ResponseDecision: Equatable, Sendable {
    /// Write the body starting at `offset` (0 with `truncate` when a ranged request got a 200).
    case write(offset: Int64, truncate: Bool, expectedLength: Int64, validator: String?)
    case redirect(String)
    /// 416 for a range starting exactly at the end: we already hold the whole file.
    case alreadyComplete
    /// The server's answer does not fit what we hold: start again from zero.
    case restartFromZero(reason: String)
    case fail(DownloadError)
    /// A Metalink document (`application/metalink4+xml`) for a request that follows them: its
    /// body is read into memory and the download goes to the file it describes.
    case metalink
    /// 304 to a conditional request (`if_modified_since`, `if_none_match`): the caller's copy
    /// is current; nothing is written.
    case notModified

    /// `ranged`: the request carried a `Range` header (from `requestedOffset`, possibly 0 for a
    /// segmented download's first range, or bounded). `segment`: it asked for one range of a
    /// segmented download, whose other ranges are being fetched beside it. `followsMetalink`: a
    /// whole Metalink document (a 200 from the start) is the file's description, not the file.
    /// `conditional`: the request carried `If-Modified-Since` or `If-None-Match` (a 304 to any
    /// other is the server's error).
    static func decide(
        status: Int, reason: String, headers: HTTPHeaders, requestedOffset: Int64, knownLength: Int64,
        validator: String?, retryAfterCap: Double, ranged: Bool, segment: Bool = false, followsMetalink: Bool = false,
        conditional: Bool = false, promise: LengthPromise? = nil
    ) -> ResponseDecision {
        let decision = decide(
            status: status, reason: reason, headers: headers, requestedOffset: requestedOffset,
            knownLength: knownLength,
            validator: validator, retryAfterCap: retryAfterCap, ranged: ranged, segment: segment,
            followsMetalink: followsMetalink, conditional: conditional)
        // A file of another length than promised is not fetched at all (a caller's
        // `expected_size` makes a task short from its start: a wrong one is not a way round the
        // transfer limits); a length the head does not tell is judged at the end (`TransferFinalizer`).
        if let promise, case .write(_, _, let length, _) = decision, length >= 0, length != promise.length {
            return .fail(.invalidResponse(promise.broken(by: length)))
        }
        return decision
    }

    private static func decide(
        status: Int, reason: String, headers: HTTPHeaders, requestedOffset: Int64, knownLength: Int64,
        validator: String?, retryAfterCap: Double, ranged: Bool, segment: Bool, followsMetalink: Bool,
        conditional: Bool
    ) -> ResponseDecision {
        let contentLength = headers.first(name: "content-length").flatMap { Int64($0) }
        switch status {
        case 301, 302, 303, 307, 308:
            guard let location = headers.first(name: "location"), !location.isEmpty else {
                return .fail(.invalidResponse("redirect \(status) without a Location"))
            }
            return .redirect(location)
        case 200 where segment:
            // The whole resource for one range: its other ranges are of another version, or the
            // server ignores ranges. Never spliced: the download starts again on one stream.
            return .restartFromZero(reason: "200 to the ranged request for bytes \(requestedOffset)-")
        case 200
        where followsMetalink && requestedOffset == 0
            && headers.first(name: "content-type")?.split(separator: ";").first?
                .trimmingCharacters(in: .whitespaces).lowercased() == MetalinkDocument.mediaType:
            return .metalink
        case 200:
            // A new version (If-Range did not match) or a server that ignores ranges: the body is
            // the whole resource, written from the start of an emptied file.
            return .write(
                offset: 0, truncate: true, expectedLength: contentLength ?? -1,
                validator: HTTPHeaderRules.strongValidator(headers)
            )
        case 206:
            guard ranged else {
                return .restartFromZero(reason: "206 to a request without a range")
            }
            guard let value = headers.first(name: "content-range"),
                let range = HTTPHeaderRules.parseContentRange(value), let first = range.first, let last = range.last
            else {
                return .restartFromZero(reason: "206 with a missing or malformed Content-Range")
            }
            guard first == requestedOffset else {
                return .restartFromZero(reason: "206 starting at \(first), asked for \(requestedOffset)")
            }
            if let complete = range.complete, knownLength >= 0, complete != knownLength {
                return .restartFromZero(reason: "206 for a resource of \(complete) bytes, expected \(knownLength)")
            }
            if let contentLength, contentLength != last - first + 1 {
                return .restartFromZero(reason: "206 whose Content-Length disagrees with its Content-Range")
            }
            if let etag = headers.first(name: "etag"), let validator, validator.hasPrefix("\""), etag != validator {
                return .restartFromZero(reason: "206 with a different ETag")
            }
            let complete = range.complete ?? (knownLength >= 0 ? knownLength : -1)
            return .write(offset: first, truncate: false, expectedLength: complete, validator: validator)
        case 416:
            if let value = headers.first(name: "content-range"), let range = HTTPHeaderRules.parseContentRange(value),
                let complete = range.complete, complete == requestedOffset, ranged, requestedOffset > 0,
                knownLength < 0 || knownLength == complete
            {
                return .alreadyComplete
            }
            return .restartFromZero(reason: "416 for a range we should hold")
        case 304 where conditional && !ranged:
            return .notModified
        case 408, 429, 500...599:
            return .fail(
                .http(
                    status: status, reason: reason,
                    retryAfter: HTTPHeaderRules.retryAfter(headers, cap: retryAfterCap)
                ))
        case 400, 401, 403, 410:
            // A question the app may answer (`Challenge.asked`): the failure it is when nobody does.
            let failure = DownloadError.http(status: status, reason: reason)
            return .fail(Challenge.asked(by: status, headers: headers).map { failure.asking($0) } ?? failure)
        case 400...499:
            return .fail(.http(status: status, reason: reason))
        default:
            return .fail(.invalidResponse("unexpected status \(status) \(DisplayText.quoted(reason, limit: 60))"))
        }
    }

    /// Whether the first response of a download that may go on several connections splits what
    /// is left of it into ranges, and which bytes those are: only a body to write of a known
    /// length, with a strong validator (every range asks `If-Range` with it, so no range can
    /// come from another version), from a server that takes ranges (it answered one with 206, or
    /// says `Accept-Ranges: bytes`), with at least two ranges of `minimumSegment` left. nil: the
    /// response is fetched on one stream, as a download with one connection always is.
    func rangeToSplit(status: Int, headers: HTTPHeaders, minimumSegment: Int64) -> ByteRange? {
        guard case .write(let offset, _, let length, let validator) = self, validator != nil, length > 0,
            status == 206 || headers.first(name: "accept-ranges")?.lowercased().contains("bytes") == true,
            length - offset >= 2 * minimumSegment
        else { return nil }
        return ByteRange(start: offset, end: length)
    }
}
