import Foundation

/// An aggregate over the objects a condition matches
/// (``ObjectContext/aggregate(_:_:where:groupedBy:)-(String,_,_,_)``).
public enum Aggregate: Sendable, Hashable {
    /// How many objects the group holds (an integer).
    case count
    /// The sum of a number attribute (an integer or a double, like the attribute; 0 for an empty
    /// group).
    case sum(String)
    /// The smallest value of an attribute (a number, date, string or decimal), nil for an empty group.
    case min(String)
    /// The largest value of an attribute (a number, date, string or decimal), nil for an empty group.
    case max(String)
    /// The mean of an attribute, as a double; nil for an empty group.
    case average(String)
}

/// One group of an aggregate query: the values of the grouping key paths, then one value per
/// aggregate asked for.
public struct AggregateRow: Sendable, Hashable {
    /// The values of the grouping key paths, in the order they were asked for (empty without
    /// grouping).
    public let group: [Value]
    /// One value per aggregate asked for, in the same order.
    public let values: [Value]

    /// A row of `group` values and aggregate `values`.
    public init(group: [Value], values: [Value]) {
        self.group = group
        self.values = values
    }
}
