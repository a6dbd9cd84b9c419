import DBus

/// The interface declarations of the contract. One declaration drives dispatch, introspection
/// and signal checks; `dbus/*.xml` is rendered from these and a test keeps them equal.
public enum DownloadsInterfaces {
    public static let manager = InterfaceDescription(
        "org.example.Downloads",
        methods: [
            .init(
                "Start",
                in: [
                    .init("url", .string), .init("destination", .string),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ],
                out: [.init("task", .objectPath)]),
            // v1.3: a destination the caller opened (a directory, `name` created in it or "" for the
            // server's name; or a regular file opened for writing, `name` ""): how sandboxed apps start.
            .init(
                "StartAt",
                in: [
                    .init("url", .string), .init("destination", .unixFD), .init("name", .string),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ], out: [.init("task", .objectPath)]),
            .init("Pause", in: [.init("task", .objectPath)], out: [.init("resume_data", .array(.byte))]),
            .init("Resume", in: [.init("task", .objectPath)]),
            .init("Cancel", in: [.init("task", .objectPath)]),
            .init(
                "ResumeWithData",
                in: [
                    .init("resume_data", .array(.byte)), .init("options", .dictionary(key: .string, value: .variant)),
                ],
                out: [.init("task", .objectPath)]),
            .init("ListTasks", in: [.init("session", .string)], out: [.init("tasks", .array(.objectPath))]),
            // v1.4: ListTasks a page at a time (a million paths are more than a system bus message).
            .init(
                "ListTasksPage", in: [.init("session", .string), .init("after", .uint64), .init("limit", .uint32)],
                out: [.init("tasks", .array(.objectPath)), .init("next", .uint64)]),
            // v1.2: the caller's tasks whose metadata has every key of `match` with its value (type and value).
            .init(
                "FindTasks", in: [.init("match", .dictionary(key: .string, value: .variant))],
                out: [.init("tasks", .array(.objectPath))]),
            // The administrator's view: every user's tasks (root, or polkit org.example.Downloads.manage-all).
            .init("ListAllTasks", in: [], out: [.init("tasks", .array(.objectPath))]),
            .init(
                "RegisterCompletionHandler",
                in: [
                    .init("session", .string), .init("client_object", .objectPath),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ]),
            // v1.3: many files as one job: each entry a URL, a destination (as Start's) and that
            // file's own options; the group's options apply to every file.
            .init(
                "StartGroup",
                in: [
                    .init("files", .array(.structure([.string, .string, .dictionary(key: .string, value: .variant)]))),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ], out: [.init("group", .objectPath), .init("tasks", .array(.objectPath))]),
            // A group's destinations as relative paths below a directory the caller opened
            // (sandboxed apps, anyone with a descriptor): subdirectories made, links refused.
            .init(
                "StartGroupAt",
                in: [
                    .init("directory", .unixFD),
                    .init("files", .array(.structure([.string, .string, .dictionary(key: .string, value: .variant)]))),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ], out: [.init("group", .objectPath), .init("tasks", .array(.objectPath))]),
            .init(
                "ResumeGroupWithData",
                in: [
                    .init("resume_data", .array(.byte)), .init("options", .dictionary(key: .string, value: .variant)),
                ], out: [.init("group", .objectPath), .init("tasks", .array(.objectPath))]),
            .init("ListGroups", in: [.init("session", .string)], out: [.init("groups", .array(.objectPath))]),
            // v1.5: the caller's files offered to the local network (`share`), and withdrawing one.
            .init("ListShared", in: [], out: [.init("files", .array(.dictionary(key: .string, value: .variant)))]),
            .init("Unshare", in: [.init("sha256", .string)], out: []),
            // v1.3: a file sent to a URL (PUT, POST or PATCH; a form with `form`): `source` an
            // absolute path the caller can read, or (UploadAt) a descriptor it opened for reading.
            .init(
                "Upload",
                in: [
                    .init("url", .string), .init("source", .string),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ],
                out: [.init("task", .objectPath)]),
            .init(
                "UploadAt",
                in: [
                    .init("url", .string), .init("source", .unixFD),
                    .init("options", .dictionary(key: .string, value: .variant)),
                ],
                out: [.init("task", .objectPath)]),
        ],
        signals: [
            .init(
                "Progress",
                [
                    .init("task", .objectPath), .init("bytes_written", .int64), .init("total_bytes_written", .int64),
                    .init("total_bytes_expected", .int64),
                ]),
            .init("Finished", [.init("task", .objectPath), .init("location", .string)]),
            .init(
                "Failed",
                [
                    .init("task", .objectPath), .init("error_name", .string), .init("message", .string),
                    .init("resume_data", .array(.byte)),
                ]),
            .init("StateChanged", [.init("task", .objectPath), .init("state", .string)]),
            .init("EventsFinished", [.init("session", .string)]),
            .init(
                "GroupProgress",
                [
                    .init("group", .objectPath), .init("bytes_written", .int64), .init("bytes_expected", .int64),
                    .init("files_finished", .uint32), .init("files", .uint32),
                ]),
            .init("GroupFinished", [.init("group", .objectPath)]),
            .init(
                "GroupFailed", [.init("group", .objectPath), .init("error_name", .string), .init("message", .string)]),
        ]
    )

    /// v1.3: a group of tasks that is one job.
    public static let group = InterfaceDescription(
        "org.example.Downloads.Group",
        methods: [
            // The group's resume data (empty until ResumeGroupWithData exists, issue 47).
            .init("Pause", out: [.init("resume_data", .array(.byte))]),
            .init("Resume"),
            .init("Cancel"),
        ],
        properties: GroupProperty.allCases.map(\.declaration)
    )

    public static let task = InterfaceDescription(
        "org.example.Downloads.Task",
        methods: [
            .init("Pause", out: [.init("resume_data", .array(.byte))]),
            .init("Resume"),
            .init("Cancel"),
            .init("SetURL", in: [.init("url", .string)]),
            // v1.3: change what may change while the task exists (TaskOptions.updateKeys).
            .init("Update", in: [.init("options", .dictionary(key: .string, value: .variant))]),
            // v1.3: an upload's final response: status, headers, and its body (at most 1 MiB,
            // empty when a reply_destination took it). WrongState before the upload ended.
            .init(
                "GetReply",
                out: [
                    .init("status", .uint32), .init("headers", .dictionary(key: .string, value: .string)),
                    .init("body", .array(.byte)),
                ]),
            // v1.4: where its time went: the task's times and counts, and its last 50 requests
            // (URLSessionTaskMetrics' shape; times in Unix microseconds, a phase not seen absent).
            .init(
                "GetMetrics",
                out: [
                    .init("task", .dictionary(key: .string, value: .variant)),
                    .init("transactions", .array(.dictionary(key: .string, value: .variant))),
                ]),
        ],
        properties: TaskProperty.allCases.map(\.declaration)
    )

    /// What a client implements to receive completion calls, and (v1.4) the questions its
    /// tasks meet, when it registered for them (`RegisterCompletionHandler`'s `challenges`).
    public static let client = InterfaceDescription(
        "org.example.Downloads.Client",
        methods: [
            .init("HandleEventsForBackgroundSession", in: [.init("session", .string)]),
            .init(
                "HandleChallenge",
                in: [
                    .init("task", .objectPath), .init("kind", .string),
                    .init("details", .dictionary(key: .string, value: .variant)),
                ],
                out: [.init("disposition", .string), .init("answer", .dictionary(key: .string, value: .variant))]),
        ]
    )

    public static let all = [manager, task, group, client]
}
