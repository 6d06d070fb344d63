import Foundation

extension StoreError {
    /// What a failure is about, in a typed form (GRDB's errors carry theirs the same way): a
    /// caller matches on it instead of parsing ``StoreError/message``.
    ///
    /// For example:
    /// ```swift
    /// do { try context.save() }
    /// catch let error as StoreError {
    ///     if let conflict = error.uniqueness { print("already there:", conflict.existing as Any) }
    ///     if let failure = error.validation { print(failure.property ?? "", failure.rule) }
    /// }
    /// ```
    public enum Details: Sendable, Hashable {
        /// A `.uniqueness` error: the constraint broken, the values and the object holding them.
        case uniqueness(UniquenessConflict)
        /// A `.validation` error: the object, the property and the rule it breaks.
        case validation(ValidationFailure)
    }

    /// The constraint, values and existing object of a `.uniqueness` error (nil for another).
    public var uniqueness: UniquenessConflict? {
        if case .uniqueness(let conflict)? = details { return conflict }
        return nil
    }

    /// The object, property and rule of a `.validation` error (nil for another).
    public var validation: ValidationFailure? {
        if case .validation(let failure)? = details { return failure }
        return nil
    }

    /// This error with `failure` as its details, when it is a `.validation` error without any
    /// (one thrown where the object was not known yet).
    func describing(_ failure: @autoclosure () -> ValidationFailure) -> StoreError {
        guard code == .validation, details == nil else { return self }
        return StoreError(
            code, message, context: context, conflicts: conflicts, resultCode: resultCode,
            details: .validation(failure()))
    }

    /// A `.validation` error saying `message` about `property` of `object` breaking `rule`.
    static func validation(
        _ message: String, object: String, property: String?, rule: ValidationFailure.Rule
    ) -> StoreError {
        StoreError(
            .validation, message,
            details: .validation(ValidationFailure(object: object, property: property, rule: rule)))
    }
}

/// A save that would give two objects the same values for a uniqueness constraint (a `.uniqueness`
/// error's ``StoreError/details``).
public struct UniquenessConflict: Sendable, Hashable {
    /// The entity whose constraint it is.
    public let entity: String
    /// The properties of the constraint, as the model declares them.
    public let constraint: [String]
    /// The values the save would have written, one per property of ``constraint`` (a to-one
    /// relationship's as the text of the object id it points at).
    public let values: [Value]
    /// The stored object that holds these values already (nil when it could not be told: the
    /// conflict was with another object of the same save, or a value the save computed).
    public let existing: ObjectID?
    /// The object being saved, as the message names it (`Folder/3`, `new Folder`).
    public let object: String

    /// A conflict of `object` over `constraint` of `entity`, whose `values` `existing` holds.
    public init(entity: String, constraint: [String], values: [Value], existing: ObjectID?, object: String) {
        self.entity = entity
        self.constraint = constraint
        self.values = values
        self.existing = existing
        self.object = object
    }
}

/// A value or object that breaks a rule of the model, a registered rule or a record's shape (a
/// `.validation` error's ``StoreError/details``).
public struct ValidationFailure: Sendable, Hashable {
    /// The object, as the message names it: `Article/3`, `new Article`, an entity name for a
    /// value checked before it belongs to an object, `line 4` for an imported line.
    public let object: String
    /// The property whose value breaks the rule; nil for a rule over the whole object.
    public let property: String?
    /// The rule broken.
    public let rule: Rule

    /// `property` of `object` breaking `rule`.
    public init(object: String, property: String?, rule: Rule) {
        self.object = object
        self.property = property
        self.rule = rule
    }

    /// The rules a value or an object can break.
    public enum Rule: Sendable, Hashable {
        /// A non-optional attribute without a value.
        case required
        /// A value of another type, or text the type cannot hold (an absolute URL, a decimal
        /// number, JSON text): the type the property takes.
        case type(AttributeType)
        /// Text shorter than the attribute's `minLength` characters.
        case minLength(Int)
        /// Text longer than the attribute's `maxLength` characters.
        case maxLength(Int)
        /// Text with a control character in a `singleLine` attribute.
        case singleLine
        /// Text that does not match the attribute's pattern (given).
        case pattern(String)
        /// A date that is not a point in time (not finite).
        case validDate
        /// A number that is not finite.
        case finiteNumber
        /// A number below the attribute's `minValue`.
        case minValue(Double)
        /// A number above the attribute's `maxValue`.
        case maxValue(Double)
        /// A relationship given an object of another entity: the entity it takes.
        case destination(String)
        /// A derived attribute set by hand: the save computes it.
        case derived
        /// A registered ``ValidationRule`` the object breaks, by its name.
        case objectRule(String)
        /// A lifecycle hook (`awakeFromInsert`, `willSave`, …) that failed, by its name.
        case hook(String)
        /// A record whose shape or types do not fit the stored object (reading or writing it).
        case record
        /// A global id a mirrored row names that is an object of another entity here: that entity.
        case globalIDEntity(String)
    }
}
