/// A well-known name some subscription takes signals from, and the unique name that owns it now
/// (`Connection+Bus`: `follow`): `GetNameOwner` once, then every `NameOwnerChanged` of it.
struct FollowedName: Sendable {
    /// The unique name owning it; nil while nobody does (or before the first answer).
    var owner: String?
    /// Subscriptions that name it as their sender.
    var users = 1
    /// The `NameOwnerChanged` subscription that keeps `owner` current.
    var watch: UInt64?
    /// A `NameOwnerChanged` arrived after `GetNameOwner` was sent: it is newer than the reply.
    var changedSinceAsked = false
}
