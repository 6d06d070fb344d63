import Foundation
import SharedStoreSupport
import Testing

/// Issue 22: JSON lines are written as bytes (a list of a million articles writes several strings
/// and a date per row); what they say is unchanged.
@Suite struct JSONOutputTests {
    @Test func valuesWriteAsBeforeEscapesIncluded() {
        let value = JSONValue.object([
            ("s", .string("plain")), ("q", .string("a\"b\\c\nd\re\tf\u{7}g\u{7F}h\u{85}i\u{2028}j\u{202E}k")),
            ("é", .string("café 😀")), ("n", .number(-42)), ("z", .number(0)),
            ("big", .number(999_999_999_999_999)),
            ("f", .number(1.5)), ("inf", .number(.infinity)), ("b", .bool(true)), ("nil", .null),
            ("a", .array([.number(1), .string(""), .array([])])),
        ])
        let want =
            #"{"s":"plain","q":"a\"b\\c\nd\re\tf\u0007g\u007fh\u0085i\u2028j\u202ek","é":"café 😀","n":-42,"z":0,"#
            + #""big":999999999999999,"f":1.5,"inf":null,"b":true,"nil":null,"a":[1,"",[]]}"#
        #expect(value.serialized == want)
        var bytes: [UInt8] = []
        value.write(to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == want)
        var text = "x"
        value.write(to: &text)
        #expect(text == "x" + want)
    }

    @Test func datesPrintInUTCWithMilliseconds() {
        #expect(ISO8601.string(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: 1_764_548_428.5029)) == "2025-12-01T00:20:28.502Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: 253_402_300_799.999)) == "9999-12-31T23:59:59.999Z")
        #expect(ISO8601.string(Date(timeIntervalSince1970: .nan)) == "nan")
    }
}
