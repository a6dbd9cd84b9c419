/// A root for apt of its own (its lists, cache, sources and dpkg status) and the methods
/// directory apt is told to use (apt's own methods and this one): apt-get, unmodified, run by a
/// test as root without touching the machine's apt (`DaemonTestCase.makeAptRoot`).
struct AptRoot {
    let root: String
    let methods: String

    /// apt-get with `command` in this root (`extra`: more `-o` settings, `Name=value`).
    func arguments(_ command: [String], extra: [String] = []) -> [String] {
        [
            "apt-get", "-q", "-o", "Dir=\(root)", "-o", "Dir::State::status=\(root)/var/lib/dpkg/status",
            "-o", "Dir::Bin::Methods=\(methods)", "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root",
            "-o", "Acquire::Languages=none", "-o", "APT::Architecture=amd64",
        ] + extra.flatMap { ["-o", $0] } + command
    }
}
