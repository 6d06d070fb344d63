import Foundation

// MARK: - Completion and manual pages, from the same definitions the parser parses with

extension CommandLineParser {
    /// A bash completion function for the tool: its commands as the first word (after any flags
    /// every command takes, and only the commands that take those), then each command's flags and
    /// the common ones it takes, less those already given; a flag's value completes as a file or
    /// directory name when its name says it is one (`FILE`, `DIR`; names with spaces kept whole,
    /// a directory with its `/`), else as nothing. Sourced, with others, from
    /// `storectl completions bash`.
    ///
    /// - Parameter helpers: whether the script defines the two shell functions every tool's
    ///   completion calls (a script of several tools defines them once).
    public func bashCompletion(positionalWords: [String: [String]] = [:], helpers: Bool = true) -> String {
        let function = "_sharedstore_" + tool.map { $0.isLetter || $0.isNumber ? $0 : "_" }.map(String.init).joined()
        let single = commands.count == 1 && commands.first?.name.isEmpty == true
        var lines =
            (helpers ? Self.completionHelpers : []) + [
                "\(function)() {", "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"",
                // bash splits `--option=value` at '=' (COMP_WORDBREAKS): the option is then the word
                // before the '='.
                "    if [ \"$cur\" = \"=\" ]; then cur=\"\"",
                "    elif [ \"$prev\" = \"=\" ] && [ \"$COMP_CWORD\" -ge 2 ]; then",
                "        prev=\"${COMP_WORDS[COMP_CWORD-2]}\"",
                "    fi",
            ]
        let options = commands.flatMap(\.options) + common
        let dirs = Set(options.filter { $0.valueName == "DIR" }.map { "--" + $0.name })
        let files = Set(options.filter { Self.takesPath($0) && $0.valueName != "DIR" }.map { "--" + $0.name })
        let values = Set(options.filter { $0.valueName != nil }.map { "--" + $0.name })
        lines += equalsForm(dirs: dirs, files: files)
        lines.append("    case \"$prev\" in")
        if !dirs.isEmpty {
            lines.append("        \(dirs.sorted().joined(separator: "|"))) _sharedstore_paths -d \"$cur\"; return ;;")
        }
        if !files.isEmpty {
            lines.append("        \(files.sorted().joined(separator: "|"))) _sharedstore_paths -f \"$cur\"; return ;;")
        }
        let others = values.subtracting(files).subtracting(dirs)
        if !others.isEmpty {
            lines.append("        \(others.sorted().joined(separator: "|"))) COMPREPLY=(); return ;;")
        }
        lines.append("    esac")
        if single, let only = commands.first {
            lines.append("    " + completion(of: only, positionalWords: positionalWords))
        } else {
            lines += commandWord()
            for c in commands where !c.name.isEmpty {
                lines.append("        \(c.name)) \(completion(of: c, positionalWords: positionalWords)) ;;")
            }
            lines.append("        *) COMPREPLY=() ;;")
            lines.append("    esac")
        }
        lines.append("}")
        lines.append("complete -F \(function) \(tool)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Two functions every tool's completion uses (each script defines them, the same).
    static let completionHelpers = [
        "# The flags of \"$@\" not given yet, before the word being completed.",
        "_sharedstore_unused() {",
        "    local f w out=()",
        "    for f in \"$@\"; do",
        "        for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do [ \"${w%%=*}\" = \"$f\" ] && continue 2; done",
        "        out+=(\"$f\")",
        "    done",
        "    echo \"${out[*]}\"",
        "}",
        "# Files (-f) or directories (-d) starting with $2: names with spaces whole, '/' after a directory.",
        "_sharedstore_paths() {",
        "    compopt -o filenames 2>/dev/null",
        "    local IFS=$'\\n'",
        "    COMPREPLY=($(compgen \"$1\" -- \"$2\"))",
        "}",
    ]

    /// Finds the command word past the flags every command takes (and their values, split at '='
    /// or not); before it, completes the command names that take the flags given, or those flags.
    private func commandWord() -> [String] {
        let valued = common.filter { $0.valueName != nil }.map { "--" + $0.name }.joined(separator: "|")
        let names = commands.map(\.name).filter { !$0.isEmpty }.joined(separator: " ")
        let commonFlags = common.map { "--" + $0.name }.joined(separator: " ")
        var lines = [
            "    local i=1 cmd=\"\" seen=\"\"",
            "    while [ \"$i\" -lt \"$COMP_CWORD\" ]; do",
            "        case \"${COMP_WORDS[i]}\" in",
            "            \(valued)) seen=\"$seen ${COMP_WORDS[i]}\"",
            "                if [ \"${COMP_WORDS[i+1]}\" = \"=\" ]; then i=$((i+3)); else i=$((i+2)); fi ;;",
            "            --*) seen=\"$seen ${COMP_WORDS[i]%%=*}\"; i=$((i+1)) ;;",
            "            *) cmd=\"${COMP_WORDS[i]}\"; break ;;",
            "        esac",
            "    done",
            "    if [ -z \"$cmd\" ]; then",
            "        if [[ \"$cur\" == -* ]]; then",
            "            COMPREPLY=($(compgen -W \"$(_sharedstore_unused \(commonFlags))\" -- \"$cur\")); return",
            "        fi",
            "        local names=() c",
            "        for c in \(names); do",
            "            case \"$c\" in",
        ]
        // Commands that refuse a flag given before them are not offered.
        var byRefusal: [[String]: [String]] = [:]
        for c in commands where !c.name.isEmpty && !c.notTaking.isEmpty {
            byRefusal[c.notTaking.sorted(), default: []].append(c.name)
        }
        for (refused, names) in byRefusal.sorted(by: { $0.value[0] < $1.value[0] }) {
            let test = refused.map { "\"$seen \" == *\" --\($0) \"*" }.joined(separator: " || ")
            lines.append("                \(names.joined(separator: "|"))) [[ \(test) ]] && continue ;;")
        }
        lines += [
            "            esac",
            "            names+=(\"$c\")",
            "        done",
            "        COMPREPLY=($(compgen -W \"${names[*]}\" -- \"$cur\")); return",
            "    fi",
            "    case \"$cmd\" in",
        ]
        return lines
    }

    /// `--option=value` completes its value as `--option value` does.
    private func equalsForm(dirs: Set<String>, files: Set<String>) -> [String] {
        var lines: [String] = []
        lines.append("    if [[ \"$cur\" == --*=* ]]; then")
        lines.append("        local opt=\"${cur%%=*}\" val=\"${cur#*=}\"")
        lines.append("        case \"$opt\" in")
        if !dirs.isEmpty {
            lines.append(
                "            \(dirs.sorted().joined(separator: "|"))) "
                    + "local IFS=$'\\n'; COMPREPLY=($(compgen -d -P \"$opt=\" -- \"$val\")) ;;")
        }
        if !files.isEmpty {
            lines.append(
                "            \(files.sorted().joined(separator: "|"))) "
                    + "local IFS=$'\\n'; COMPREPLY=($(compgen -f -P \"$opt=\" -- \"$val\")) ;;")
        }
        lines.append("            *) COMPREPLY=() ;;")
        lines.append("        esac")
        lines.append("        return")
        lines.append("    fi")
        return lines
    }

    /// The completion of one command's words: its flags, and its positional (a file, a
    /// directory, or the words it takes).
    private func completion(of c: Command, positionalWords: [String: [String]]) -> String {
        let flags = (c.options + c.common(common)).map { "--" + $0.name }.joined(separator: " ")
        let unused = "COMPREPLY=($(compgen -W \"$(_sharedstore_unused \(flags))\" -- \"$cur\"))"
        // A word not starting with "-" is a positional: a file, or the words it takes.
        guard let positional = c.positionals.first else { return unused }
        let words: String
        if ["FILE", "PATH"].contains(positional) {
            words = "_sharedstore_paths -f \"$cur\""
        } else if positional == "DIR" {
            words = "_sharedstore_paths -d \"$cur\""
        } else {
            let list = (positionalWords[positional] ?? []).joined(separator: " ")
            words = "COMPREPLY=($(compgen -W \"\(list)\" -- \"$cur\"))"
        }
        return "if [[ \"$cur\" == -* ]]; then \(unused); else \(words); fi"
    }

    /// The tool's manual page, section 1, in the `man` macros of groff: name, synopsis,
    /// description, each command with its flags, the common flags and the exit status.
    public func manPage(date: String, source: String = "SharedStore") -> String {
        var out = [
            ".TH \(Self.roff(tool.uppercased())) 1 \"\(date)\" \"\(source)\" \"User Commands\"",
            ".SH NAME", "\(Self.roff(tool)) \\- \(Self.roff(summary))", ".SH SYNOPSIS",
        ]
        for c in commands {
            out.append(".B \(Self.roff(tool))")
            if !c.usageLine.isEmpty { out.append(Self.roff(c.usageLine)) }
            out.append(".br")
        }
        out += [".SH DESCRIPTION", Self.roff(summary) + "."]
        let named = commands.filter { !$0.name.isEmpty }
        if !named.isEmpty {
            out.append(".SH COMMANDS")
            for c in named {
                out += [".TP", ".B \(Self.roff(c.usageLine))", Self.roff(c.summary)]
                for o in c.options { out += [".RS", ".TP", ".B \(Self.roff(o.display))", Self.roff(o.help), ".RE"] }
            }
        } else if let only = commands.first, !only.options.isEmpty {
            out.append(".SH OPTIONS")
            for o in only.options { out += [".TP", ".B \(Self.roff(o.display))", Self.roff(o.help)] }
        }
        out.append(".SH COMMON OPTIONS")
        for o in common {
            out += [".TP", ".B \(Self.roff(o.display))", Self.roff(o.help)]
            let refusing = commands.filter { $0.notTaking.contains(o.name) }.map(\.name)
            if !refusing.isEmpty { out += [".br", Self.roff("Not taken by: \(refusing.joined(separator: ", ")).")] }
        }
        out += [
            ".SH EXIT STATUS", ".TP", ".B 0", "success.", ".TP", ".B 1",
            "the operation failed; one line starting with error: on standard error names the problem.", ".TP", ".B 2",
            "a usage error, naming the argument.",
        ]
        return out.joined(separator: "\n") + "\n"
    }

    /// Whether the value of `option` names a file or a directory.
    static func takesPath(_ option: Option) -> Bool {
        ["FILE", "DIR", "PATH"].contains(option.valueName ?? "")
    }

    /// `text` safe as a line of roff: backslashes doubled, a leading dot or quote escaped, dashes
    /// as the minus sign a man page prints.
    static func roff(_ text: String) -> String {
        var s = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if s.hasPrefix(".") || s.hasPrefix("'") { s = "\\&" + s }
        return s
    }
}
