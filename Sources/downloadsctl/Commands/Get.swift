import ArgumentParser
import DBus
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
import ShownText
#endif

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download URLs and follow them to the end.",
        discussion: """
            Prints each file's path when it is complete. Ctrl-C pauses the downloads and prints how to resume them. \
            With several URLs (or -i), or a Metalink file of several files, the files are one group \
            ('downloadsctl group'): one call starts them all, every file goes into one directory under the \
            name its server gives (a Metalink file's under its names), each finished task is removed from \
            the list, and a failed one is kept to be resumed. With --atomic no file lands until all of them can.
            """
    )

    @OptionGroup var service: ServiceOptions
    @Argument(
        help:
            "The http or https URLs, or Metalink files (.meta4): a Metalink file's URLs are the URL and mirrors, its hash the checksum."
    )
    var urls: [String] = []
    @Option(
        name: [.customShort("i"), .customLong("input-file")],
        help: ArgumentHelp(
            "Also download the URLs listed in this file, one a line ('-': standard input); blank lines and lines starting with # are skipped.",
            valueName: "file"
        ))
    var inputFile: String?
    @Option(
        name: .shortAndLong,
        help: ArgumentHelp(
            "The file to write, or an existing directory (the name then comes from the server; the only choice for several URLs). Default: the current directory.",
            valueName: "path"
        ))
    var output: String?
    @Flag(
        help:
            "With several files: none is put in place until every one is complete, then all together (at most 10,000 files)."
    )
    var atomic = false
    @Option(
        name: [.customShort("u"), .customLong("login")],
        help: ArgumentHelp(
            "For a server that asks for a login (401, Basic): the user and password (curl's -u; --user names the session bus). Without ':PASSWORD' it is asked on the terminal when the server asks, not echoed. Given to the service only as an answer to its question, kept in its memory, never stored.",
            valueName: "user[:password]"
        ))
    var login: String?
    @Option(
        name: .customLong("proxy-user"),
        help: ArgumentHelp(
            "For a proxy that asks for credentials (407): its user and password, answered as -u's are.",
            valueName: "user:password"
        ))
    var proxyUser: String?
    @Flag(
        name: .customLong("no-recent"),
        help:
            "Do not add the finished file to your recently used files (the file chooser's Recent; a list's files never are)."
    )
    var noRecent = false
    @OptionGroup var options: TaskOptionArguments

    func validate() throws {
        guard !urls.isEmpty || inputFile != nil else {
            throw ValidationError("give a URL, or a list of them with -i FILE")
        }
        if urls.count > 1 || inputFile != nil {
            guard login == nil, proxyUser == nil else {
                throw ValidationError("-u and --proxy-user answer for one download: give them with one URL")
            }
            // These describe one file; a list has many.
            guard options.checksum == nil, options.sha256 == nil, options.mirrors.isEmpty else {
                throw ValidationError(
                    "--checksum, --sha256 and --mirror name one file: give them with one URL, not several")
            }
            guard options.ifModifiedSince == nil, options.ifNoneMatch == nil else {
                throw ValidationError(
                    "-z and --if-none-match ask about one file: give them with one URL, not several")
            }
        }
    }

    func run() async throws {
        let destination = Paths.absolute(output ?? FileManager.default.currentDirectoryPath)
        var taskOptions = try options.taskOptions(into: destination)
        if urls.count > 1 || inputFile != nil {
            var all = urls
            if let inputFile {
                guard let text = BatchDownload.readList(inputFile) else {
                    CommandFailure(message: "cannot read the URL list \(DisplayText.escaped(inputFile))").exit()
                }
                all += BatchDownload.urls(inList: text)
            }
            guard !all.isEmpty else {
                CommandFailure(message: "no URLs in \(DisplayText.escaped(inputFile ?? "-"))").exit()
            }
            var info = stat()
            guard stat(destination, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                CommandFailure(
                    message: "several URLs go into a directory, and \(DisplayText.escaped(destination)) is not one"
                ).exit()
            }
            guard !atomic || all.count <= BatchDownload.groupSize else {
                CommandFailure(
                    message:
                        "an atomic group holds at most \(BatchDownload.groupSize) files; this list has \(all.count)"
                ).exit()
            }
            try await service.run { [taskOptions, all] proxy in
                try await BatchDownload(
                    proxy: proxy, urls: all, directory: destination, options: taskOptions, service: service,
                    atomic: atomic
                ).run()
            }
            return
        }
        let source = urls[0]
        // A file you fetched yourself belongs in Recent, as a browser's download does (a list's
        // thousands of files would push everything else out of it: those are left out). Inside a
        // sandbox the host's Recent is not the app's: the service refuses it there.
        if !noRecent, !DownloadsProxy.isSandboxed { taskOptions.addToRecent = true }
        let url = try TaskOptionArguments.source(source, into: &taskOptions)
        let answerer =
            login != nil || proxyUser != nil
            ? ChallengeAnswerer(
                server: login.map(ChallengeAnswerer.Login.init), proxy: proxyUser.map(ChallengeAnswerer.Login.init))
            : nil
        try await service.run { [taskOptions] proxy in
            // Registered before the task starts: its first request may be the one that asks.
            try await answerer?.register(on: proxy, session: taskOptions.session ?? options.session)
            let path: ObjectPath
            do {
                path = try await CommandFailure.sayingOverwrite(destination) {
                    try await proxy.start(url: url, destination: destination, options: taskOptions)
                }
            } catch let error as DownloadsClientError
                where error.code == .invalidArgument && error.message.contains("start it as a group")
            {
                // A Metalink file of several files: a group of them, in the directory given.
                var options = try self.options.taskOptions
                options.metalink = nil
                options.metalinkPath = nil
                return try await BatchDownload(
                    proxy: proxy, urls: [source], directory: destination, options: options, service: service,
                    atomic: atomic
                ).run()
            }
            answerer?.follow(path)
            let file = try await TaskFollower(proxy: proxy, path: path, service: service).follow().destination
            // Escaped on a terminal (as ls does); as it is for a script reading the path.
            print(isatty(STDOUT_FILENO) == 1 ? DisplayText.escaped(file) : file)
        }
    }
}
