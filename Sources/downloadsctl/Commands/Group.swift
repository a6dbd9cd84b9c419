import ArgumentParser
import DBus
import DownloadsAPI
import DownloadsClient
import FoundationEssentials
import TerminalOutput
#if canImport(Glibc)
import Glibc
#endif

/// `downloadsctl group list/status/pause/resume/cancel`: groups (many files as one job) as a whole.
struct Group: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "List groups (many files as one job, e.g. 'get' of a list) and pause, resume or cancel one as a whole.",
        subcommands: [GroupList.self, GroupStatus.self, GroupPause.self, GroupResume.self, GroupCancel.self]
    )
}
