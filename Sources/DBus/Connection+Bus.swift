/// Calls on the bus daemon itself: names, match rules, credentials, name tracking.
extension Connection {
    static let busName = "org.freedesktop.DBus"
    static let busPath: ObjectPath = "/org/freedesktop/DBus"

    private func callBus(_ method: String, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await call(
            destination: Connection.busName, path: Connection.busPath, interface: Connection.busName,
            method: method, arguments: arguments
        )
    }

    /// Becomes the primary owner of `name`, or throws `nameTaken` when another connection owns it.
    public func requestName(_ name: String) async throws {
        // DBUS_NAME_FLAG_DO_NOT_QUEUE
        let reply = try await callBus("RequestName", [.string(name), .uint32(4)])
        switch reply.first?.uint32Value {
        case 1, 4: return  // primary owner, already owner
        case 3: throw BusError.nameTaken(name)
        default: throw BusError.failed("unexpected RequestName reply \(reply)")
        }
    }

    public func releaseName(_ name: String) async throws {
        _ = try await callBus("ReleaseName", [.string(name)])
    }

    /// The unique name owning `name`, or nil when nobody owns it.
    /// The bus instance's id (`GetId`): unique names are unique only within one instance.
    public func busID() async throws -> String {
        guard let id = try await callBus("GetId", []).first?.stringValue else {
            throw BusError.failed("GetId gave no id")
        }
        return id
    }

    /// Asks the bus to start the activatable service `name` (`StartServiceByName`) and waits.
    public func startService(_ name: String) async throws {
        _ = try await callBus("StartServiceByName", [.string(name), .uint32(0)])
    }

    /// Asks the bus to start `name` without waiting for it (`StartServiceByName`, no reply
    /// wanted): what a service leaving the bus does when work is left for its next instance,
    /// which cannot take the name before this one is gone.
    public func requestStart(_ name: String) throws {
        let message = try Message.methodCall(
            destination: Connection.busName, path: Connection.busPath, interface: Connection.busName,
            member: "StartServiceByName"
        )
        try message.append([.string(name), .uint32(0)])
        message.setNoReply(true)
        try send(message)
    }

    public func nameOwner(_ name: String) async throws -> String? {
        do {
            return try await callBus("GetNameOwner", [.string(name)]).first?.stringValue
        } catch let error as BusError where error.name == BusError.nameHasNoOwnerName {
            return nil
        }
    }

    /// Subscribes to signals matching `rule`. The handler runs on the connection's queue: keep it short.
    /// A well-known `sender` is followed to the unique name that owns it (`follow`), so a signal
    /// another connection sends in the name's interface is not taken for the owner's.
    @discardableResult
    public func subscribe(_ rule: MatchRule, handler: @escaping @Sendable (Message) -> Void) async throws -> UInt64 {
        if let sender = rule.sender, MatchRule.isWellKnown(sender) { try await follow(sender) }
        let id = state.withLockedValue { state -> UInt64 in
            let id = state.nextSubscriptionID
            state.nextSubscriptionID += 1
            state.subscriptions[id] = Subscription(rule: rule, handler: handler)
            return id
        }
        do {
            _ = try await callBus("AddMatch", [.string(rule.text)])
        } catch {
            _ = state.withLockedValue { $0.subscriptions.removeValue(forKey: id) }
            if let sender = rule.sender, MatchRule.isWellKnown(sender) { await unfollow(sender) }
            throw error
        }
        return id
    }

    public func unsubscribe(_ id: UInt64) async {
        guard let subscription = state.withLockedValue({ $0.subscriptions.removeValue(forKey: id) }) else { return }
        _ = try? await callBus("RemoveMatch", [.string(subscription.rule.text)])
        if let sender = subscription.rule.sender, MatchRule.isWellKnown(sender) { await unfollow(sender) }
    }

    /// The unique name that owns `name` as this connection last heard, for a name some
    /// subscription follows; nil when nobody owns it or it is not followed.
    public func followedOwner(of name: String) -> String? {
        state.withLockedValue { $0.followedNames[name]?.owner }
    }

    /// Starts following who owns `name` (GDBus's way for a subscription to a well-known name):
    /// `NameOwnerChanged` of that name first, then `GetNameOwner`, whose answer is kept unless a
    /// change came meanwhile (the change is newer). Signals are taken only from that owner.
    private func follow(_ name: String) async throws {
        let first = state.withLockedValue { state -> Bool in
            if state.followedNames[name] != nil {
                state.followedNames[name]?.users += 1
                return false
            }
            state.followedNames[name] = FollowedName()
            return true
        }
        guard first else { return }
        do {
            let watch = try await subscribe(
                MatchRule(
                    sender: Connection.busName, interface: Connection.busName, member: "NameOwnerChanged", arg0: name)
            ) { [weak self] message in
                guard let values = try? message.arguments(), values.count == 3, values[0].stringValue == name,
                    let new = values[2].stringValue
                else { return }
                self?.state.withLockedValue { state in
                    state.followedNames[name]?.owner = new.isEmpty ? nil : new
                    state.followedNames[name]?.changedSinceAsked = true
                }
            }
            let stillFollowed = state.withLockedValue { state -> Bool in
                state.followedNames[name]?.watch = watch
                return state.followedNames[name] != nil
            }
            guard stillFollowed else { return await unsubscribe(watch) }
            let owner = try await nameOwner(name)
            state.withLockedValue { state in
                guard state.followedNames[name]?.changedSinceAsked == false else { return }
                state.followedNames[name]?.owner = owner
            }
        } catch {
            await unfollow(name)
            throw error
        }
    }

    private func unfollow(_ name: String) async {
        let watch = state.withLockedValue { state -> UInt64?? in
            guard var followed = state.followedNames[name] else { return nil }
            followed.users -= 1
            guard followed.users <= 0 else {
                state.followedNames[name] = followed
                return nil
            }
            state.followedNames[name] = nil
            return .some(followed.watch)
        }
        if case .some(.some(let watch)) = watch { await unsubscribe(watch) }
    }

    /// Calls `handler(name, oldOwner, newOwner)` for every `NameOwnerChanged` the bus emits.
    @discardableResult
    public func onNameOwnerChanged(
        _ handler: @escaping @Sendable (String, String, String) -> Void
    ) async throws -> UInt64 {
        try await subscribe(
            MatchRule(sender: Connection.busName, interface: Connection.busName, member: "NameOwnerChanged")
        ) { message in
            guard let values = try? message.arguments(), values.count == 3,
                let name = values[0].stringValue, let old = values[1].stringValue, let new = values[2].stringValue
            else { return }
            handler(name, old, new)
        }
    }

    /// The uid (and pid) of the connection owning `name`, from `GetConnectionCredentials`.
    /// A failed look-up is an error, never uid 0.
    public func credentials(of name: String) async throws -> Credentials {
        if let cached = state.withLockedValue({ $0.credentials[name] }) { return cached }
        try await installNameWatchIfNeeded()
        let reply = try await callBus("GetConnectionCredentials", [.string(name)])
        guard let dict = reply.first?.vardictValue, let uid = dict["UnixUserID"]?.uint32Value else {
            throw BusError(name: BusError.accessDeniedName, message: "the bus did not tell the uid of \(name)")
        }
        let label = dict["LinuxSecurityLabel"]?.bytesValue.map { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        let credentials = Credentials(uid: uid, pid: dict["ProcessID"]?.uint32Value, securityLabel: label)
        if name.hasPrefix(":") {
            state.withLockedValue { state in
                // Only cache while the name is alive; the watch drops it when it leaves.
                state.credentials[name] = credentials
            }
        }
        return credentials
    }

    private func installNameWatchIfNeeded() async throws {
        let install = state.withLockedValue { state -> Bool in
            guard !state.nameWatchInstalled else { return false }
            state.nameWatchInstalled = true
            return true
        }
        guard install else { return }
        do {
            try await onNameOwnerChanged { [weak self] name, _, new in
                guard new.isEmpty else { return }
                _ = self?.state.withLockedValue { $0.credentials.removeValue(forKey: name) }
            }
        } catch {
            state.withLockedValue { $0.nameWatchInstalled = false }
            throw error
        }
    }
}
