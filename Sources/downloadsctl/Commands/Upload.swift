import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

struct Upload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload a file to a URL and follow it to the end.",
        discussion: """
            Sends FILE with PUT (or --method POST/PATCH; --form sends it as multipart/form-data, as curl's -F). \
            The service sends it in the background: it carries on if this command ends. It asks the server \
            first: one that speaks the IETF resumable-upload draft or tus gets the file so that a cut \
            connection, a pause or a restart goes on from the bytes the server confirmed; any other gets it \
            whole, again from the start after a cut. Prints the server's reply on standard output, \
            as curl does (or writes it to --reply FILE). Ctrl-C pauses the upload and prints how to resume it.
            """
    )

    @OptionGroup var service: ServiceOptions
    @Argument(help: "The file to send.") var file: String
    @Argument(help: "The http or https URL to send it to.") var url: String
    @Option(
        name: [.customShort("X"), .customLong("method")],
        help: ArgumentHelp("PUT (default), POST or PATCH.", valueName: "method"))
    var method: String?
    @Option(
        help: ArgumentHelp(
            "Send the file as the part FIELD of a multipart/form-data form (curl's -F FIELD=@FILE).", valueName: "field"
        ))
    var form: String?
    @Option(
        name: .customLong("field"),
        help: ArgumentHelp("Another part of the form, NAME=VALUE (repeatable; with --form).", valueName: "name=value"))
    var fields: [String] = []
    @Option(
        name: .customLong("filename"),
        help: ArgumentHelp("The file's name in the form (default: FILE's name).", valueName: "name"))
    var filename: String?
    @Option(
        name: .customLong("content-type"),
        help: ArgumentHelp("The body's Content-Type (in a form, the file part's).", valueName: "type"))
    var contentType: String?
    @Option(
        name: .customLong("reply"),
        help: ArgumentHelp("Write the server's reply to this file instead of standard output.", valueName: "file"))
    var reply: String?
    @Flag(help: "Let the service copy the file first, so you may change or delete it at once.") var snapshot = false
    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp("An HTTP header, 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []
    @Option(help: "The session the task belongs to.") var session = "downloadsctl"
    @Option(
        help: ArgumentHelp(
            "What the upload is called where the desktop shows it (default: the file's name).", valueName: "text"))
    var title: String?
    @Option(
        name: .customLong("limit-rate"),
        help: ArgumentHelp("At most this many bytes per second (500K, 1.5M: K = 1024).", valueName: "bytes"))
    var limitRate: ByteRate?
    @Option(help: ArgumentHelp("low, normal or high (orders only your own tasks).", valueName: "priority"))
    var priority: String?
    @Option(help: ArgumentHelp("The proxy for this upload (as for get).", valueName: "url")) var proxy: String?
    @Flag(help: "Use only the bandwidth nobody else is using.") var background = false
    @Flag(help: "Start it and print its task id; do not follow it.") var detach = false
    @Option(
        name: .customLong("protocol"),
        help: ArgumentHelp(
            "auto (default: asks the server), ietf (the IETF resumable-upload draft), tus (URL is the tus endpoint) or plain.",
            valueName: "protocol"
        )) var transferProtocol: String?
    @Option(
        name: .customLong("ietf-version"),
        help: ArgumentHelp("The IETF draft's interop version to speak: 3, 5 or 6 (default 6).", valueName: "n"))
    var ietfVersion: UInt32?
    @Flag(name: .customLong("keep-on-cancel"), help: "On cancel, leave the upload resource on the server (no DELETE).")
    var keepOnCancel = false
    @Option(
        name: [.customShort("u"), .customLong("login")],
        help: ArgumentHelp(
            "For a server that asks for a login (401, Basic): the user and password, answered as get's -u (asked on the terminal without ':PASSWORD').",
            valueName: "user[:password]"
        ))
    var login: String?

    func validate() throws {
        if form == nil && (!fields.isEmpty || filename != nil) {
            throw ValidationError("--field and --filename describe a form: give --form FIELD too")
        }
    }

    var taskOptions: TaskOptions {
        get throws {
            var options = TaskOptions()
            options.session = session
            options.method = method?.uppercased()
            options.contentType = contentType
            options.replyDestination = reply.map(Paths.absolute)
            if snapshot { options.snapshot = true }
            if let form {
                options.form = TaskOptions.Form(
                    field: form, filename: filename, fields: try TaskOptionArguments.metadata(fields, option: "--field")
                )
            }
            if !headers.isEmpty { options.headers = try TaskOptionArguments.headers(headers) }
            options.title = title
            options.maxBytesPerSecond = limitRate?.bytes
            if let priority {
                guard let value = TaskOptions.Priority(rawValue: priority) else {
                    throw ValidationError("--priority must be low, normal or high")
                }
                options.priority = value
            }
            options.proxy = proxy
            if background { options.background = true }
            options.transferProtocol = transferProtocol
            options.ietfVersion = ietfVersion
            if keepOnCancel { options.terminateOnCancel = false }
            return options
        }
    }

    func run() async throws {
        let source = Paths.absolute(file)
        let options = try taskOptions
        if login != nil && detach {
            throw ValidationError("-u answers while the upload is followed: not with --detach")
        }
        let answerer = login.map { ChallengeAnswerer(server: ChallengeAnswerer.Login($0), proxy: nil) }
        try await service.run { [options] proxy in
            // Registered before the task starts: its first request may be the one that asks.
            try await answerer?.register(on: proxy, session: options.session ?? session)
            let path = try await proxy.upload(url: url, source: source, options: options)
            answerer?.follow(path)
            if detach { return print(Paths.id(path)) }
            _ = try await TaskFollower(proxy: proxy, path: path, service: service).follow()
            if options.replyDestination == nil {
                let answer = try await proxy.reply(path)
                // The server's bytes as they are for a pipe (as curl); escaped for a terminal.
                if isatty(STDOUT_FILENO) == 1 {
                    let lines = String(decoding: answer.body, as: UTF8.self).split(
                        separator: "\n", omittingEmptySubsequences: false)
                    Output.write(
                        lines.map { DisplayText.escaped(String($0)) }.joined(separator: "\n"), to: STDOUT_FILENO)
                } else {
                    Output.write(answer.body, to: STDOUT_FILENO)
                }
            }
        }
    }
}
